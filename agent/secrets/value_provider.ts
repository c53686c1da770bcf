/** Reads declared app values from AWS Parameter Store and Secrets Manager. */

import {
  AwsRequester,
  AwsResponseError,
  configuredEndpoint,
  responseError,
} from "../../core/aws/aws_request.ts";
import type { CredentialSource } from "../../core/aws/aws_credentials.ts";
import {
  NotFoundError,
  PermanentStoreError,
  PodminError,
  UnavailableError,
} from "../../core/kit/errors.ts";
import {
  isTimeout,
  readAllBounded,
  requestTimeoutMs,
  timeoutError,
} from "../../core/kit/request_bounds.ts";
import type { SecretRef } from "../../core/model/resources.ts";

/** Something that returns the current value of a named parameter or secret. */
export interface ValueProvider {
  /** Throws `NotFoundError`, `UnavailableError` or `PermanentStoreError`. */
  fetch(from: SecretRef["from"], name: string): Promise<Uint8Array>;
  /**
   * Several values of one kind in as few calls as the provider allows (Parameter Store:
   * `GetParameters`, 10 names per call). Each name maps to its value or its own error; a failed
   * call maps every name it carried to that error. Optional: callers fall back to `fetch`.
   */
  fetchMany?(from: SecretRef["from"], names: string[]): Promise<Map<string, Uint8Array | Error>>;
}

/** Parameter Store's `GetParameters` limit. */
export const SSM_BATCH = 10;

/** Fetches `names` with `provider.fetchMany` when it has one, else one `fetch` each. */
export async function fetchValues(
  provider: ValueProvider,
  from: SecretRef["from"],
  names: string[],
): Promise<Map<string, Uint8Array | Error>> {
  if (provider.fetchMany) return await provider.fetchMany(from, names);
  return await fetchEach(provider, from, names);
}

/** One `fetch` per name, concurrently; each name maps to its value or its error. */
async function fetchEach(
  provider: ValueProvider,
  from: SecretRef["from"],
  names: string[],
): Promise<Map<string, Uint8Array | Error>> {
  const out = new Map<string, Uint8Array | Error>();
  await Promise.all(names.map(async (name) => {
    try {
      out.set(name, await provider.fetch(from, name));
    } catch (err) {
      out.set(name, err as Error);
    }
  }));
  return out;
}

/** One JSON-protocol call's answer, or the AWS error it was. */
type JsonAnswer = Record<string, unknown>;

/** Largest answer read (a secret is at most 64 KiB; 10 parameters of 8 KiB each). */
const ANSWER_BYTES = 1024 * 1024;

/**
 * The AWS implementation: Parameter Store and Secrets Manager through their JSON APIs, signed by
 * core/aws/aws_request.ts (the SDK's clients are not loaded: spec §2.4). The endpoint of each service
 * is the configured one (`AWS_ENDPOINT_URL_SSM`, `AWS_ENDPOINT_URL_SECRETS_MANAGER`, then
 * `AWS_ENDPOINT_URL`: `configuredEndpoint`), else its dual-stack endpoint. A transient failure is
 * tried once more after a short jittered pause; the values loop backs off beyond that.
 */
export class AwsValueProvider implements ValueProvider {
  readonly #aws: AwsRequester;
  readonly #region: string;
  readonly #timeoutMs: number;
  readonly #endpoints: Record<"ssm" | "secretsmanager", string | undefined>;

  /** `requestTimeoutMs` bounds each attempt (default `requestTimeoutMs()`, §2.3). */
  constructor(
    options: { region: string; requestTimeoutMs?: number; credentials?: CredentialSource },
  ) {
    this.#timeoutMs = options.requestTimeoutMs ?? requestTimeoutMs();
    this.#region = options.region;
    this.#endpoints = {
      ssm: configuredEndpoint("SSM"),
      secretsmanager: configuredEndpoint("Secrets Manager"),
    };
    this.#aws = new AwsRequester({
      region: options.region,
      timeoutMs: this.#timeoutMs,
      credentials: options.credentials,
    });
  }

  /** One call of `target` (e.g. `AmazonSSM.GetParameters`), tried twice when transient. */
  async #call(
    service: "ssm" | "secretsmanager",
    target: string,
    input: unknown,
  ): Promise<JsonAnswer> {
    const url = new URL(this.#endpoints[service] ?? dualStackEndpoint(service, this.#region));
    const body = new TextEncoder().encode(JSON.stringify(input));
    for (let attempt = 1;; attempt++) {
      try {
        const r = await this.#aws.send({
          method: "POST",
          url,
          service,
          body,
          headers: { "content-type": "application/x-amz-json-1.1", "x-amz-target": target },
        });
        if (!r.ok) throw await responseError(r);
        const bytes = await readAllBounded(r.body ?? new Blob().stream(), {
          idleMs: this.#timeoutMs,
          onIdle: () =>
            new UnavailableError(
              `${target}: the answer from ${
                this.#endpointName(service)
              } stalled for ${this.#timeoutMs} ms`,
            ),
          maxBytes: ANSWER_BYTES,
          what: `the answer of ${target}`,
        });
        return JSON.parse(new TextDecoder().decode(bytes)) as JsonAnswer;
      } catch (err) {
        if (attempt >= 2 || !transient(err)) throw err;
        // A pause between two attempts of one request, not a periodic pass: no Loop.
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  }

  /** Parameter Store values in `GetParameters` calls of 10; Secrets Manager one call each. */
  async fetchMany(
    from: SecretRef["from"],
    names: string[],
  ): Promise<Map<string, Uint8Array | Error>> {
    if (from !== "ssm") return await fetchEach(this, from, names);
    const out = new Map<string, Uint8Array | Error>();
    const unique = [...new Set(names)];
    for (let i = 0; i < unique.length; i += SSM_BATCH) {
      const chunk = unique.slice(i, i + SSM_BATCH);
      try {
        const got = await this.#call("ssm", "AmazonSSM.GetParameters", {
          Names: chunk,
          WithDecryption: true,
        }) as { Parameters?: { Name?: string; Value?: string }[]; InvalidParameters?: string[] };
        for (const p of got.Parameters ?? []) {
          if (p.Name) out.set(p.Name, new TextEncoder().encode(p.Value ?? ""));
        }
        for (const name of got.InvalidParameters ?? []) {
          out.set(name, classifyAwsError(notFound, "ssm", name));
        }
        for (const name of chunk) {
          if (!out.has(name)) out.set(name, classifyAwsError(notFound, "ssm", name));
        }
      } catch (err) {
        const e = isTimeout(err)
          ? timeoutError({
            endpoint: this.#endpointName(from),
            timeoutMs: this.#timeoutMs,
            what: `Parameter Store ${chunk.length} parameter(s)`,
            cause: err,
          })
          : classifyAwsError(err, "ssm", chunk.join(", "));
        for (const name of chunk) out.set(name, e);
      }
    }
    return out;
  }

  async fetch(from: SecretRef["from"], name: string): Promise<Uint8Array> {
    try {
      if (from === "ssm") {
        const out = await this.#call("ssm", "AmazonSSM.GetParameter", {
          Name: name,
          WithDecryption: true,
        }) as { Parameter?: { Value?: string } };
        return new TextEncoder().encode(out.Parameter?.Value ?? "");
      }
      const out = await this.#call("secretsmanager", "secretsmanager.GetSecretValue", {
        SecretId: name,
      }) as { SecretString?: string; SecretBinary?: string };
      if (typeof out.SecretBinary === "string") {
        return Uint8Array.from(atob(out.SecretBinary), (c) => c.charCodeAt(0));
      }
      return new TextEncoder().encode(out.SecretString ?? "");
    } catch (err) {
      if (isTimeout(err)) {
        throw timeoutError({
          endpoint: this.#endpointName(from),
          timeoutMs: this.#timeoutMs,
          what: `${from === "ssm" ? "Parameter Store" : "Secrets Manager"} ${name}`,
          cause: err,
        });
      }
      throw classifyAwsError(err, from, name);
    }
  }

  #endpointName(service: "ssm" | "secretsmanager"): string {
    return this.#endpoints[service] ?? `AWS (${this.#region})`;
  }
}

/**
 * The service's dual-stack endpoint (IPv6-only nodes need one), as the AWS SDK resolves it with
 * `useDualstackEndpoint`: Parameter Store's is under `api.aws`, Secrets Manager's regional
 * endpoint is dual-stack itself.
 */
export function dualStackEndpoint(service: "ssm" | "secretsmanager", region: string): string {
  return service === "ssm"
    ? `https://ssm.${region}.api.aws/`
    : `https://secretsmanager.${region}.amazonaws.com/`;
}

const notFound = new AwsResponseError({ status: 400, code: "ParameterNotFound", message: "" });

/** Worth a second try: no answer, a stalled answer, throttling or a server error. */
function transient(err: unknown): boolean {
  if (err instanceof UnavailableError) return true; // ours: a stalled answer
  if (!(err instanceof AwsResponseError)) return !(err instanceof PodminError);
  return err.status >= 500 || err.status === 429 || /Throttl/.test(err.code);
}

function classifyAwsError(err: unknown, from: string, name: string): Error {
  if (err instanceof PodminError) return err; // ours already: no credentials, too large
  const e = err instanceof AwsResponseError
    ? { name: err.code, message: err.message, status: err.status as number | undefined }
    : { name: (err as Error)?.name, message: (err as Error)?.message, status: undefined };
  const where = `${from === "ssm" ? "Parameter Store" : "Secrets Manager"} ${name}`;
  if (e.name === "ParameterNotFound" || e.name === "ResourceNotFoundException") {
    return new NotFoundError(`${where} does not exist`, {
      hint: `create it, e.g. aws ssm put-parameter --type SecureString --name ${name}`,
    });
  }
  const status = e.status;
  if (status === undefined || status >= 500 || status === 429 || /Throttl/.test(e.name ?? "")) {
    return new UnavailableError(`${where}: ${e?.message ?? String(err)}`, { cause: err });
  }
  return new PermanentStoreError(`${where}: ${e?.name}: ${e?.message}`, {
    cause: err,
    hint: "check the node role's access to this name (and kms:Decrypt for customer keys)",
  });
}

/** Reads declared app values from AWS Parameter Store and Secrets Manager. */

import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { GetParameterCommand, GetParametersCommand, SSMClient } from "@aws-sdk/client-ssm";
import { NotFoundError, PermanentStoreError, UnavailableError } from "../../core/errors.ts";
import {
  awsRequestHandler,
  isTimeout,
  requestTimeoutMs,
  timeoutError,
} from "../../core/request_bounds.ts";
import type { SecretRef } from "../../core/resources.ts";

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

/** The AWS implementation (endpoint from AWS_ENDPOINT_URL when set). */
export class AwsValueProvider implements ValueProvider {
  readonly #ssm: SSMClient;
  readonly #sm: SecretsManagerClient;
  readonly #timeoutMs: number;
  readonly #endpoint: string;

  /** `requestTimeoutMs` bounds each attempt (default `requestTimeoutMs()`, §2.3). */
  constructor(options: { region: string; requestTimeoutMs?: number }) {
    this.#timeoutMs = options.requestTimeoutMs ?? requestTimeoutMs();
    this.#endpoint = Deno.env.get("AWS_ENDPOINT_URL") ?? `AWS (${options.region})`;
    const common = {
      region: options.region,
      maxAttempts: 2,
      requestHandler: awsRequestHandler(this.#timeoutMs),
    };
    this.#ssm = new SSMClient(common);
    this.#sm = new SecretsManagerClient(common);
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
        const got = await this.#ssm.send(
          new GetParametersCommand({ Names: chunk, WithDecryption: true }),
        );
        for (const p of got.Parameters ?? []) {
          if (p.Name) out.set(p.Name, new TextEncoder().encode(p.Value ?? ""));
        }
        for (const name of got.InvalidParameters ?? []) {
          out.set(name, classifyAwsError({ name: "ParameterNotFound" }, "ssm", name));
        }
        for (const name of chunk) {
          if (!out.has(name)) {
            out.set(name, classifyAwsError({ name: "ParameterNotFound" }, "ssm", name));
          }
        }
      } catch (err) {
        const e = isTimeout(err)
          ? timeoutError({
            endpoint: this.#endpoint,
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
        const out = await this.#ssm.send(
          new GetParameterCommand({ Name: name, WithDecryption: true }),
        );
        return new TextEncoder().encode(out.Parameter?.Value ?? "");
      }
      const out = await this.#sm.send(new GetSecretValueCommand({ SecretId: name }));
      if (out.SecretBinary) return out.SecretBinary;
      return new TextEncoder().encode(out.SecretString ?? "");
    } catch (err) {
      if (isTimeout(err)) {
        throw timeoutError({
          endpoint: this.#endpoint,
          timeoutMs: this.#timeoutMs,
          what: `${from === "ssm" ? "Parameter Store" : "Secrets Manager"} ${name}`,
          cause: err,
        });
      }
      throw classifyAwsError(err, from, name);
    }
  }
}

function classifyAwsError(err: unknown, from: string, name: string): Error {
  const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const where = `${from === "ssm" ? "Parameter Store" : "Secrets Manager"} ${name}`;
  if (e?.name === "ParameterNotFound" || e?.name === "ResourceNotFoundException") {
    return new NotFoundError(`${where} does not exist`, {
      hint: `create it, e.g. aws ssm put-parameter --type SecureString --name ${name}`,
    });
  }
  const status = e?.$metadata?.httpStatusCode;
  if (
    status === undefined || status >= 500 || status === 429 || e?.name === "ThrottlingException"
  ) {
    return new UnavailableError(`${where}: ${e?.message ?? String(err)}`, { cause: err });
  }
  return new PermanentStoreError(`${where}: ${e?.name}: ${e?.message}`, {
    cause: err,
    hint: "check the node role's access to this name (and kms:Decrypt for customer keys)",
  });
}

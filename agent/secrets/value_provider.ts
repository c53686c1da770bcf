/** Reads declared app values from AWS Parameter Store and Secrets Manager. */

import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
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

/**
 * Signed AWS requests over Deno's `fetch`, for the calls the agent makes on every node (S3
 * objects, Parameter Store, Secrets Manager). The AWS SDK is not loaded for them: its clients
 * alone hold about 31 MiB of a process's memory, half of the agent's budget (issue 15).
 * The CLI's administrative calls (buckets, EC2, Auto Scaling) keep the SDK.
 */

import { EMPTY_SHA256, presignV4, signV4 } from "./aws_sigv4.ts";
import { type CredentialSource, sharedCredentials } from "./aws_credentials.ts";
import { sha256Hex } from "../kit/digest.ts";
import { headBoundedFetch } from "../kit/request_bounds.ts";

/** The AWS services the agent and the registry call without the SDK, by their SDK service ID. */
export type AwsServiceId = "S3" | "SSM" | "Secrets Manager";

/**
 * The configured endpoint of one service, resolved as the AWS SDKs resolve it from the
 * environment: `AWS_ENDPOINT_URL_<SERVICE_ID>` (the service ID upper-cased, words joined by `_`:
 * `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL_SSM`, `AWS_ENDPOINT_URL_SECRETS_MANAGER`), else
 * `AWS_ENDPOINT_URL`; none when `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is `true`. Undefined: the
 * caller uses AWS's own endpoint.
 */
export function configuredEndpoint(
  service: AwsServiceId,
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): string | undefined {
  if (env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")?.toLowerCase() === "true") return undefined;
  const specific = `AWS_ENDPOINT_URL_${service.toUpperCase().split(" ").join("_")}`;
  return env(specific) || env("AWS_ENDPOINT_URL") || undefined;
}

/** An AWS error answer: HTTP status, the service's error code and message. */
export class AwsResponseError extends Error {
  readonly status: number;
  /** e.g. `NoSuchKey`, `PreconditionFailed`, `ParameterNotFound` ("" when the body had none). */
  readonly code: string;

  constructor(options: { status: number; code: string; message: string }) {
    super(options.message || `HTTP ${options.status}${options.code ? ` ${options.code}` : ""}`);
    this.name = options.code || `HTTP${options.status}`;
    this.status = options.status;
    this.code = options.code;
  }
}

/** One request to sign and send. */
export interface AwsCall {
  method: string;
  url: URL;
  /** Lower-case names; all are signed. */
  headers?: Record<string, string>;
  body?: Uint8Array;
  service: string;
  /** S3's signing rules (payload hash header, path signed as sent). */
  s3?: boolean;
}

/** Options of `AwsRequester`. */
export interface AwsRequesterOptions {
  region: string;
  /** Per-attempt bound on the response head, in milliseconds. */
  timeoutMs: number;
  /** Default: the process-wide chain of core/aws/aws_credentials.ts. */
  credentials?: CredentialSource;
}

/** Signs and sends AWS requests; answers with the raw `Response`, whatever its status. */
export class AwsRequester {
  readonly region: string;
  readonly #credentials: CredentialSource;
  readonly #fetch: typeof fetch;

  constructor(options: AwsRequesterOptions) {
    this.region = options.region;
    this.#credentials = options.credentials ?? sharedCredentials();
    this.#fetch = headBoundedFetch(options.timeoutMs);
  }

  /** Sends one signed request. Network failures and timeouts throw; HTTP errors do not. */
  async send(call: AwsCall): Promise<Response> {
    const credentials = await this.#credentials();
    const headers = signV4({
      method: call.method,
      url: call.url,
      headers: call.headers ?? {},
      payloadSha256: call.body ? sha256Hex(call.body) : EMPTY_SHA256,
      credentials,
      region: this.region,
      service: call.service,
      s3: call.s3,
    });
    const body = call.body as Uint8Array<ArrayBuffer> | undefined;
    return await this.#fetch(call.url, { method: call.method, headers, body });
  }

  /**
   * A presigned URL with the requester's current credentials (a session token, when they have
   * one, is part of the URL as SigV4 requires). Its lifetime is `expiresSeconds`, shortened to
   * the credentials' remaining validity: S3 refuses a URL whose session has expired anyway.
   */
  async presign(call: AwsPresignCall): Promise<URL> {
    const credentials = await this.#credentials();
    const now = call.now ?? new Date();
    let seconds = call.expiresSeconds;
    if (credentials.expiration) {
      const left = Math.floor((credentials.expiration.getTime() - now.getTime()) / 1000);
      seconds = Math.max(1, Math.min(seconds, left));
    }
    return presignV4({
      method: call.method,
      url: call.url,
      credentials,
      region: this.region,
      service: call.service,
      expiresSeconds: seconds,
      now,
    });
  }
}

/** One URL to presign (`presignV4`): a bodiless request, `host` its only signed header. */
export interface AwsPresignCall {
  method: string;
  url: URL;
  service: string;
  /** Upper bound of the URL's lifetime, in seconds; never past the credentials' own expiry. */
  expiresSeconds: number;
  /** Signing time (default now). */
  now?: Date;
}

/** Largest error body read; AWS error documents are a few hundred bytes. */
const ERROR_BODY_BYTES = 64 * 1024;

/**
 * The error of a non-2xx answer, from S3's XML (`<Code>`, `<Message>`) or the JSON protocols'
 * `__type` / `message`. A body without either (HEAD answers have none) gives the status alone.
 */
export async function responseError(r: Response): Promise<AwsResponseError> {
  let text = "";
  try {
    if (r.body) {
      const reader = r.body.getReader();
      const chunks: string[] = [];
      let size = 0;
      const decoder = new TextDecoder();
      while (size < ERROR_BODY_BYTES) {
        const { value, done } = await reader.read();
        if (done) break;
        size += value.byteLength;
        chunks.push(decoder.decode(value, { stream: true }));
      }
      await reader.cancel().catch(() => {});
      text = chunks.join("");
    }
  } catch {
    // the status alone still classifies the error
  }
  return new AwsResponseError({ status: r.status, ...errorFields(text) });
}

/** The code and message of an AWS error body (XML or JSON). */
export function errorFields(text: string): { code: string; message: string } {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    try {
      const j = JSON.parse(trimmed) as Record<string, unknown>;
      const type = String(j.__type ?? j.code ?? j.Code ?? "");
      return {
        code: type.slice(type.lastIndexOf("#") + 1).split(":")[0],
        message: String(j.message ?? j.Message ?? ""),
      };
    } catch {
      return { code: "", message: trimmed.slice(0, 200) };
    }
  }
  return { code: xmlText(trimmed, "Code") ?? "", message: xmlText(trimmed, "Message") ?? "" };
}

/** The text of the first `<tag>` element in `xml`, entities decoded; undefined when absent. */
export function xmlText(xml: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return m ? xmlDecode(m[1]) : undefined;
}

/** The inner XML of every `<tag>…</tag>` element (not nested in itself). */
export function xmlElements(xml: string, tag: string): string[] {
  const out: string[] = [];
  const re = new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g");
  for (let m = re.exec(xml); m; m = re.exec(xml)) out.push(m[1]);
  return out;
}

/** Decodes XML's five named entities and numeric character references. */
export function xmlDecode(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g, (_, e: string) => {
    switch (e) {
      case "amp":
        return "&";
      case "lt":
        return "<";
      case "gt":
        return ">";
      case "quot":
        return '"';
      case "apos":
        return "'";
    }
    return String.fromCodePoint(e[1] === "x" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
  });
}

/** Escapes text for an XML element. */
export function xmlEscape(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

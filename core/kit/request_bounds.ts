/**
 * The time bound of every network request Podmin makes (S3, SSM, Secrets Manager, upstream
 * registries), and the idle bound of every streamed body (spec §2.3).
 *
 * One attempt that gets no answer within the bound fails with `UnavailableError` naming the
 * endpoint and the bound; a body that delivers no byte within the bound fails the same way.
 */

import { concatBytes } from "./bytes.ts";
import { parseDuration } from "./duration.ts";
import { UnavailableError } from "./errors.ts";
import { checkSize } from "./limits.ts";

/** Default per-attempt bound: 30 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** Environment variable that overrides the bound, e.g. `PODMIN_REQUEST_TIMEOUT=5s`. */
export const REQUEST_TIMEOUT_ENV = "PODMIN_REQUEST_TIMEOUT";

/** The per-attempt bound: `$PODMIN_REQUEST_TIMEOUT` when set, else 30 s. */
export function requestTimeoutMs(): number {
  const text = Deno.env.get(REQUEST_TIMEOUT_ENV);
  if (text === undefined || text === "") return DEFAULT_REQUEST_TIMEOUT_MS;
  return parseDuration(text, REQUEST_TIMEOUT_ENV);
}

/**
 * The AWS SDK `requestHandler` options that really bound an attempt: without
 * `throwOnRequestTimeout` the SDK only logs a warning and keeps waiting.
 */
export function awsRequestHandler(timeoutMs: number): {
  requestTimeout: number;
  connectionTimeout: number;
  throwOnRequestTimeout: true;
} {
  return { requestTimeout: timeoutMs, connectionTimeout: timeoutMs, throwOnRequestTimeout: true };
}

/**
 * A `fetch` whose attempt fails with a `TimeoutError` when no response head arrives within
 * `timeoutMs`; the request is aborted then, which closes its connection. The body is not bounded
 * here (a large object may take longer than the bound): `idleBounded` bounds its reads.
 */
export function headBoundedFetch(timeoutMs: number): typeof fetch {
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const deadline = new AbortController();
    const timer = setTimeout(
      () => deadline.abort(new DOMException(`no response within ${timeoutMs} ms`, "TimeoutError")),
      timeoutMs,
    );
    const given = init?.signal ?? (input instanceof Request ? input.signal : undefined);
    const signal = given ? AbortSignal.any([given, deadline.signal]) : deadline.signal;
    try {
      return await fetch(input, { ...init, signal });
    } finally {
      clearTimeout(timer);
    }
  };
}

/** True when an AWS SDK or fetch error is a timeout (of ours or of the SDK). */
export function isTimeout(err: unknown): boolean {
  const e = err as { name?: string; code?: string };
  return e?.name === "TimeoutError" || e?.code === "ETIMEDOUT";
}

/** The error of an attempt that got no answer in time. */
export function timeoutError(
  options: { endpoint: string; timeoutMs: number; what: string; key?: string; cause?: unknown },
): UnavailableError {
  return new UnavailableError(
    `${options.what}: no answer from ${options.endpoint} within ${options.timeoutMs} ms`,
    {
      key: options.key,
      cause: options.cause,
      hint: `the endpoint accepted the request but did not answer; check it and the network ` +
        `(the bound is ${REQUEST_TIMEOUT_ENV}, default ${DEFAULT_REQUEST_TIMEOUT_MS / 1000}s)`,
    },
  );
}

/**
 * Wraps a body so that a read waiting longer than `idleMs` for the next chunk fails with the
 * error `onIdle` returns; the source is cancelled then (which closes its connection).
 */
export function idleBounded(
  body: ReadableStream<Uint8Array>,
  options: { idleMs: number; onIdle: () => Error },
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const idle = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(options.onIdle()), options.idleMs);
      });
      try {
        const { value, done } = await Promise.race([reader.read(), idle]);
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (err) {
        reader.cancel(err).catch(() => {});
        controller.error(err);
      } finally {
        clearTimeout(timer);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/**
 * Reads a whole body, each read bounded by `idleMs`; with `maxBytes`, a body that grows past it
 * fails with `TooLargeError` (naming `what`) once it does, whatever its declared length.
 */
export async function readAllBounded(
  body: ReadableStream<Uint8Array>,
  options: { idleMs: number; onIdle: () => Error; maxBytes?: number; what?: string },
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const stream = idleBounded(body, options);
  for await (const chunk of stream) {
    chunks.push(chunk);
    size += chunk.byteLength;
    if (options.maxBytes !== undefined) {
      checkSize({ what: options.what ?? "the body", size, limit: options.maxBytes });
    }
  }
  return concatBytes(chunks, size);
}

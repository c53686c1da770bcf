/** `s3://BUCKET/KEY`: the one parser of an exact S3 object's URL (a flag naming one object). */

import { UsageError } from "../kit/errors.ts";

/** One S3 object: its bucket and its key. */
export interface S3Object {
  bucket: string;
  key: string;
}

/** A text that is not an exact `s3://BUCKET/KEY`. */
export class S3ObjectUrlError extends UsageError {}

const OBJECT_URL = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/(.+)$/;

/**
 * Parses `s3://BUCKET/KEY` naming one object: not a prefix (the key does not end with `/`), no
 * empty, `.` or `..` key segment (a key is untrusted input that may become a path). The error
 * names `flagName` (e.g. `--otel-ca`) when given.
 */
export function parseS3ObjectUrl(text: string, flagName?: string): S3Object {
  const m = OBJECT_URL.exec(text);
  if (
    !m || m[1].includes("..") || m[2].split("/").some((s) => s === "" || s === "." || s === "..")
  ) {
    const subject = flagName ? `${flagName} ${JSON.stringify(text)}` : JSON.stringify(text);
    throw new S3ObjectUrlError(`${subject} is not an exact s3://BUCKET/KEY`, {
      hint: "name one object, e.g. s3://my-trust-bundles/podmin/prod.pem",
    });
  }
  return { bucket: m[1], key: m[2] };
}

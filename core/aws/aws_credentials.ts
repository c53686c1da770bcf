/**
 * Where Podmin's own AWS calls (core/aws/aws_request.ts) find credentials, in the AWS SDK's order:
 * the environment, then profile `AWS_PROFILE` of the shared credentials and config files (static
 * keys, or a `credential_process` run here), then the EC2 instance role through IMDSv2 (how every
 * node's agent gets them). A profile that needs more (SSO, an assumed role, web identity) is
 * handed to the AWS SDK's provider chain when the program registered it
 * (core/aws/aws_sdk_fallback.ts: the CLI does, the agent does not and says how to give it keys).
 */

import * as os from "node:os";
import * as path from "node:path";
import type { AwsCredentials } from "./aws_sigv4.ts";
import { PermanentStoreError } from "../kit/errors.ts";
import { sdkCredentialProvider } from "./aws_sdk_fallback.ts";

/** Returns current credentials; temporary ones are cached until shortly before they expire. */
export type CredentialSource = () => Promise<AwsCredentials>;

/** Credentials expiring within this many milliseconds are fetched anew. */
const REFRESH_BEFORE_MS = 5 * 60_000;
/** Per-request bound of an IMDS call (the SDK's default is 1 s too). */
const IMDS_TIMEOUT_MS = 1000;
/** Bound of a `credential_process` run. */
const PROCESS_TIMEOUT_MS = 30_000;

/** No source had credentials; the message says which were tried. */
export class NoCredentialsError extends PermanentStoreError {
  constructor(tried: string[], cause?: unknown, hint?: string) {
    const why = cause instanceof Error ? `: ${cause.message}` : "";
    super(`no AWS credentials (tried ${tried.join(", ")})${why}`, {
      cause,
      hint: hint ??
        "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run with an instance role",
    });
  }
}

/** The default chain, cached: one instance per process is enough (see `sharedCredentials`). */
export function credentialChain(
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
): CredentialSource {
  let cached: AwsCredentials | undefined;
  let pending: Promise<AwsCredentials> | undefined;
  return async () => {
    if (cached && !expiresSoon(cached)) return cached;
    pending ??= resolveChain(env).finally(() => pending = undefined);
    cached = await pending;
    return cached;
  };
}

let shared: CredentialSource | undefined;

/** The process-wide default chain (so the instance role is fetched once, not per client). */
export function sharedCredentials(): CredentialSource {
  return shared ??= credentialChain();
}

function expiresSoon(c: AwsCredentials): boolean {
  return c.expiration !== undefined && c.expiration.getTime() - Date.now() < REFRESH_BEFORE_MS;
}

async function resolveChain(env: (name: string) => string | undefined): Promise<AwsCredentials> {
  const tried: string[] = [];
  const id = env("AWS_ACCESS_KEY_ID");
  const secret = env("AWS_SECRET_ACCESS_KEY");
  tried.push("environment");
  if (id && secret) {
    return { accessKeyId: id, secretAccessKey: secret, sessionToken: env("AWS_SESSION_TOKEN") };
  }
  const profile = env("AWS_PROFILE") || "default";
  const home = env("HOME") ?? os.homedir();
  const files = [
    env("AWS_SHARED_CREDENTIALS_FILE") || path.join(home, ".aws", "credentials"),
    env("AWS_CONFIG_FILE") || path.join(home, ".aws", "config"),
  ];
  tried.push(`profile ${profile}`);
  let needsSdk = Boolean(
    env("AWS_WEB_IDENTITY_TOKEN_FILE") || env("AWS_CONTAINER_CREDENTIALS_FULL_URI") ||
      env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
  );
  for (const [i, file] of files.entries()) {
    const section = await readProfile(file, i === 0 ? profile : configSection(profile));
    if (!section) continue;
    if (section.aws_access_key_id && section.aws_secret_access_key) {
      return {
        accessKeyId: section.aws_access_key_id,
        secretAccessKey: section.aws_secret_access_key,
        sessionToken: section.aws_session_token,
      };
    }
    if (section.credential_process) {
      tried.push(`credential_process of profile ${profile}`);
      try {
        return await processCredentials(section.credential_process);
      } catch (err) {
        throw new NoCredentialsError(tried, err);
      }
    }
    if (
      section.role_arn || section.sso_session || section.sso_start_url ||
      section.web_identity_token_file
    ) needsSdk = true;
  }
  if (needsSdk) {
    tried.push("the AWS SDK's provider chain");
    return await sdkChain(tried, profile);
  }
  if (env("AWS_EC2_METADATA_DISABLED")?.toLowerCase() !== "true") {
    tried.push("EC2 instance metadata");
    try {
      return await instanceRole(imdsEndpoint(env));
    } catch (err) {
      throw new NoCredentialsError(tried, err);
    }
  }
  throw new NoCredentialsError(tried);
}

/**
 * The instance metadata endpoint, as the SDK picks it: `$AWS_EC2_METADATA_SERVICE_ENDPOINT`, else
 * by `$AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE` (`IPv4`, the default: 169.254.169.254; `IPv6`:
 * fd00:ec2::254, which IPv6-only nodes need; vmconfig sets the mode in the agent's environment).
 */
export function imdsEndpoint(env: (name: string) => string | undefined): string {
  const explicit = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (explicit) return explicit.replace(/\/+$/, "");
  const mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE") || "IPv4";
  if (mode === "IPv4") return "http://169.254.169.254";
  if (mode === "IPv6") return "http://[fd00:ec2::254]";
  throw new Error(
    `AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE is ${JSON.stringify(mode)}: use IPv4 or IPv6`,
  );
}

/** The `[profile NAME]` section of the config file (`[default]` stays as it is). */
function configSection(profile: string): string {
  return profile === "default" ? "default" : `profile ${profile}`;
}

/** One INI section as key → value, or undefined when the file or section is absent. */
async function readProfile(
  file: string,
  section: string,
): Promise<Record<string, string> | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch {
    return undefined;
  }
  let current: string | undefined;
  let found: Record<string, string> | undefined;
  for (const raw of text.split(/\r?\n/)) {
    // As the SDK reads it: a comment starts with ; or # at the start or after white space.
    const line = raw.split(/(?:^|\s)[;#]/)[0].trim();
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = header[1].trim();
      if (current === section) found ??= {};
      continue;
    }
    const kv = /^([A-Za-z0-9_.-]+)\s*=\s*(.*)$/.exec(line);
    if (kv && current === section && found) found[kv[1].toLowerCase()] = kv[2].trim();
  }
  return found;
}

async function sdkChain(tried: string[], profile: string): Promise<AwsCredentials> {
  const provider = sdkCredentialProvider();
  if (!provider) {
    throw new NoCredentialsError(
      tried,
      new Error(`profile ${profile} needs the AWS SDK (SSO, an assumed role or web identity)`),
      "this program resolves static keys, credential_process and the instance role; add " +
        `'credential_process = aws configure export-credentials --profile ${profile} ` +
        "--format process' to a profile and use that one, or set AWS_ACCESS_KEY_ID/" +
        "AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN",
    );
  }
  try {
    const c = await provider();
    return {
      accessKeyId: c.accessKeyId,
      secretAccessKey: c.secretAccessKey,
      sessionToken: c.sessionToken,
      expiration: c.expiration,
    };
  } catch (err) {
    throw new NoCredentialsError(tried, err);
  }
}

/**
 * Runs a profile's `credential_process` (through `sh -c`, as the AWS CLI does) and reads its
 * answer: `{"Version": 1, "AccessKeyId", "SecretAccessKey", "SessionToken"?, "Expiration"?}`.
 */
async function processCredentials(command: string): Promise<AwsCredentials> {
  const out = await new Deno.Command("sh", {
    args: ["-c", command],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(PROCESS_TIMEOUT_MS),
  }).output();
  const stderr = new TextDecoder().decode(out.stderr).trim().slice(0, 300);
  if (!out.success) {
    throw new Error(
      `credential_process ${JSON.stringify(command)} exited ${out.code}` +
        (out.signal ? ` (${out.signal})` : "") + (stderr ? `: ${stderr}` : ""),
    );
  }
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(new TextDecoder().decode(out.stdout));
  } catch {
    throw new Error(`credential_process ${JSON.stringify(command)} printed no JSON`);
  }
  if (body.Version !== 1) {
    throw new Error(`credential_process answered Version ${String(body.Version)}, not 1`);
  }
  if (typeof body.AccessKeyId !== "string" || typeof body.SecretAccessKey !== "string") {
    throw new Error("credential_process answered no AccessKeyId/SecretAccessKey");
  }
  const expiration = typeof body.Expiration === "string" ? new Date(body.Expiration) : undefined;
  if (expiration && Number.isNaN(expiration.getTime())) {
    throw new Error(`credential_process answered a bad Expiration ${body.Expiration}`);
  }
  return {
    accessKeyId: body.AccessKeyId,
    secretAccessKey: body.SecretAccessKey,
    sessionToken: typeof body.SessionToken === "string" ? body.SessionToken : undefined,
    expiration,
  };
}

/** The instance role's credentials through IMDSv2 (token, role name, credentials). */
async function instanceRole(endpoint: string): Promise<AwsCredentials> {
  const call = async (method: string, p: string, headers: Record<string, string>) => {
    const r = await fetch(`${endpoint}${p}`, {
      method,
      headers,
      signal: AbortSignal.timeout(IMDS_TIMEOUT_MS),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`IMDS ${method} ${p}: HTTP ${r.status}`);
    return text;
  };
  const token = await call("PUT", "/latest/api/token", {
    "x-aws-ec2-metadata-token-ttl-seconds": "21600",
  });
  const auth = { "x-aws-ec2-metadata-token": token };
  const base = "/latest/meta-data/iam/security-credentials/";
  const role = (await call("GET", base, auth)).split("\n")[0].trim();
  if (!role) throw new Error("IMDS: the instance has no role");
  const body = JSON.parse(await call("GET", `${base}${encodeURIComponent(role)}`, auth)) as {
    AccessKeyId?: string;
    SecretAccessKey?: string;
    Token?: string;
    Expiration?: string;
  };
  if (!body.AccessKeyId || !body.SecretAccessKey) {
    throw new Error(`IMDS: no keys in the credentials of role ${role}`);
  }
  return {
    accessKeyId: body.AccessKeyId,
    secretAccessKey: body.SecretAccessKey,
    sessionToken: body.Token,
    expiration: body.Expiration ? new Date(body.Expiration) : undefined,
  };
}

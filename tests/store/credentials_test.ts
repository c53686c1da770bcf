/**
 * Where the agent's own AWS client finds credentials (core/aws/aws_credentials.ts), each source
 * checked by a signed S3 request that a moto with IAM enforced answers (it recomputes every
 * signature and checks the session token: a wrong one is refused), with the keys of an IAM user
 * or of an assumed role created in that moto: the environment, a shared credentials file's
 * profile, a config file's `[profile NAME]`, a `credential_process` profile, an assumed-role
 * profile through the AWS SDK's chain (moto's STS; only where the program registered the SDK,
 * as the CLI does), and the instance role through IMDSv2 — the emulator of the vmconfig tests,
 * which answers only token-bearing requests. Temporary credentials are fetched once and reused;
 * with no source at all the error names what was tried and how to fix it.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import {
  credentialChain,
  imdsEndpoint,
  NoCredentialsError,
} from "../../core/aws/aws_credentials.ts";
import { registerSdkCredentials, sdkCredentialProvider } from "../../core/aws/aws_sdk_fallback.ts";
import { PermanentStoreError } from "../../core/kit/errors.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { type DedicatedMoto, dedicatedMoto } from "../support/moto.ts";
import {
  assumedRole,
  MOTO_ACCOUNT,
  type RoleCredentials,
  type UserKeys,
  userWithPolicy,
} from "../iam/aws_iam.ts";
import { startImds } from "../support/imds_emulator.ts";

type Env = Record<string, string>;

/** A chain reading only `vars` (no HOME files unless given), with IMDS off unless enabled. */
function chainOf(vars: Env) {
  return credentialChain((n) => vars[n]);
}

/** This file's moto, IAM enforced: a bucket, an IAM user's keys and an assumed role's. */
interface Enforcing {
  m: DedicatedMoto;
  bucket: string;
  user: UserKeys;
  role: RoleCredentials;
}

let enforcing: Promise<Enforcing> | undefined;

/**
 * Starts this file's moto once: the bucket, a user allowed S3 and `sts:AssumeRole`, and the role
 * `podmin-operator` (the assumed-role profile's) assumed once, all before IAM is enforced.
 */
function enforcingMoto(): Promise<Enforcing> {
  enforcing ??= (async () => {
    const m = await dedicatedMoto();
    const bucket = await m.createBucket();
    const policy = JSON.stringify({
      Version: "2012-10-17",
      Statement: [{ Effect: "Allow", Action: ["s3:*", "sts:AssumeRole"], Resource: "*" }],
    });
    const user = await userWithPolicy({ endpoint: m.endpoint, user: "podmin-creds", policy });
    // The user may assume the role (its trust policy names the user: moto, enforcing, checks it).
    const role = await assumedRole({
      endpoint: m.endpoint,
      role: "podmin-operator",
      policy,
      principal: `arn:aws:iam::${MOTO_ACCOUNT}:user/podmin-creds`,
    });
    await m.enforceIam(true);
    return { m, bucket, user, role };
  })();
  return enforcing;
}

let keys = 0;

/** A signed PUT + GET through `S3Store` with the chain's credentials, on the enforcing moto. */
async function roundTrip(vars: Env): Promise<string> {
  const { m, bucket } = await enforcingMoto();
  const store = new S3Store({
    bucket,
    region: "us-east-1",
    endpoint: m.endpoint,
    credentials: chainOf(vars),
    retry: { attempts: 1, baseMs: 1, maxMs: 1 },
  });
  const key = `k${keys++}`;
  await store.put(key, new TextEncoder().encode("signed"));
  const r = await store.get(key);
  assert.ok(!r.notModified);
  return new TextDecoder().decode(r.body);
}

/** The same secret with its first character changed (never equal to it). */
function otherSecret(secret: string): string {
  return `${secret.startsWith("x") ? "y" : "x"}${secret.slice(1)}`;
}

async function withHome<T>(files: Record<string, string>, f: (home: string) => Promise<T>) {
  const home = await Deno.makeTempDir({ prefix: "podmin-creds-" });
  try {
    await Deno.mkdir(path.join(home, ".aws"));
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(path.join(home, ".aws", name), text);
    }
    return await f(home);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

const NO_IMDS = { AWS_EC2_METADATA_DISABLED: "true" };

Deno.test("credentials [moto, IAM enforced]: the enforcing moto refuses a wrong secret, a wrong session token and an unknown key", async () => {
  const { user, role } = await enforcingMoto();
  const env = { ...NO_IMDS, AWS_ACCESS_KEY_ID: user.AWS_ACCESS_KEY_ID };
  for (
    const [vars, why] of [
      [
        { ...env, AWS_SECRET_ACCESS_KEY: otherSecret(user.AWS_SECRET_ACCESS_KEY) },
        /SignatureDoesNotMatch/,
      ],
      [{
        ...NO_IMDS,
        AWS_ACCESS_KEY_ID: role.accessKeyId,
        AWS_SECRET_ACCESS_KEY: role.secretAccessKey,
        AWS_SESSION_TOKEN: `${role.sessionToken}x`,
      }, /InvalidToken/],
      [
        { ...NO_IMDS, AWS_ACCESS_KEY_ID: "AKIDUNKNOWN", AWS_SECRET_ACCESS_KEY: "x" },
        /InvalidAccessKeyId/,
      ],
    ] as const
  ) {
    const err = await roundTrip(vars).then(() => undefined, (e) => e);
    assert.ok(err instanceof PermanentStoreError, `${JSON.stringify(vars)}: ${err}`);
    assert.match(err.message, why);
  }
  // The right ones pass.
  assert.equal(
    await roundTrip({ ...env, AWS_SECRET_ACCESS_KEY: user.AWS_SECRET_ACCESS_KEY }),
    "signed",
  );
});

Deno.test("credentials: the environment comes first, session token included", async () => {
  const c = await chainOf({
    ...NO_IMDS,
    AWS_ACCESS_KEY_ID: "AKIDENV",
    AWS_SECRET_ACCESS_KEY: "env-secret",
    AWS_SESSION_TOKEN: "env-token",
  })();
  assert.deepEqual(c, {
    accessKeyId: "AKIDENV",
    secretAccessKey: "env-secret",
    sessionToken: "env-token",
  });
  const { user, role } = await enforcingMoto();
  assert.equal(await roundTrip({ ...NO_IMDS, ...user }), "signed");
  assert.equal(
    await roundTrip({
      ...NO_IMDS,
      AWS_ACCESS_KEY_ID: role.accessKeyId,
      AWS_SECRET_ACCESS_KEY: role.secretAccessKey,
      AWS_SESSION_TOKEN: role.sessionToken,
    }),
    "signed",
  );
});

Deno.test("credentials: AWS_PROFILE picks its section of the shared credentials file", async () => {
  const { user } = await enforcingMoto();
  await withHome({
    credentials: "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n\n" +
      `# a comment\n[ci]\naws_access_key_id=${user.AWS_ACCESS_KEY_ID} ; trailing comment\n` +
      `aws_secret_access_key=${user.AWS_SECRET_ACCESS_KEY}\n`,
  }, async (home) => {
    const vars = { ...NO_IMDS, HOME: home, AWS_PROFILE: "ci" };
    const c = await chainOf(vars)();
    assert.equal(c.accessKeyId, user.AWS_ACCESS_KEY_ID);
    assert.equal(c.secretAccessKey, user.AWS_SECRET_ACCESS_KEY);
    assert.equal((await chainOf({ ...NO_IMDS, HOME: home })()).accessKeyId, "AKIDDEFAULT");
    assert.equal(await roundTrip(vars), "signed");
  });
});

Deno.test("credentials: keys in the config file's [profile NAME] section are found", async () => {
  const { user } = await enforcingMoto();
  await withHome({
    config: `[profile ops]\nregion = us-east-1\naws_access_key_id = ${user.AWS_ACCESS_KEY_ID}\n` +
      `aws_secret_access_key = ${user.AWS_SECRET_ACCESS_KEY}\n`,
  }, async (home) => {
    const vars = { ...NO_IMDS, HOME: home, AWS_PROFILE: "ops" };
    const c = await chainOf(vars)();
    assert.equal(c.accessKeyId, user.AWS_ACCESS_KEY_ID);
    assert.equal(await roundTrip(vars), "signed");
  });
});

Deno.test("credentials: a credential_process profile is run, its answer checked and reused until it expires", async () => {
  // It answers an assumed role's temporary keys: moto checks the session token it passes on.
  const { role } = await enforcingMoto();
  await withHome({}, async (home) => {
    const script = path.join(home, "creds.sh");
    const runs = path.join(home, "runs");
    const expiry = new Date(Date.now() + 3600_000).toISOString();
    await Deno.writeTextFile(
      script,
      `#!/bin/sh
echo run >> ${runs}
` +
        `echo '${
          JSON.stringify({
            Version: 1,
            AccessKeyId: role.accessKeyId,
            SecretAccessKey: role.secretAccessKey,
            SessionToken: role.sessionToken,
            Expiration: expiry,
          })
        }'
`,
    );
    await Deno.chmod(script, 0o755);
    await Deno.writeTextFile(
      path.join(home, ".aws", "config"),
      `[profile proc]
credential_process = ${script}

` +
        `[profile broken]
credential_process = sh -c 'echo denied >&2; exit 3'

` +
        `[profile garbled]
credential_process = echo '{"Version":2}'
`,
    );
    const vars = { ...NO_IMDS, HOME: home, AWS_PROFILE: "proc" };
    const chain = chainOf(vars);
    const c = await chain();
    assert.equal(c.accessKeyId, role.accessKeyId);
    assert.equal(c.sessionToken, role.sessionToken);
    assert.equal(c.expiration?.toISOString(), expiry);
    await chain();
    assert.equal((await Deno.readTextFile(runs)).trim().split("\n").length, 1, "run once");
    assert.equal(await roundTrip(vars), "signed");

    const broken = await chainOf({ ...vars, AWS_PROFILE: "broken" })().catch((e) => e);
    assert.ok(broken instanceof NoCredentialsError);
    assert.match(broken.message, /credential_process of profile broken.*exited 3: denied/);
    const garbled = await chainOf({ ...vars, AWS_PROFILE: "garbled" })().catch((e) => e);
    assert.match(garbled.message, /answered Version 2, not 1/);
  });
});

/** Sets process environment variables for the AWS SDK's chain (which reads no other). */
async function withProcessEnv<T>(vars: Record<string, string | undefined>, f: () => Promise<T>) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const apply = (v: Record<string, string | undefined>) => {
    for (const [k, x] of Object.entries(v)) {
      x === undefined ? Deno.env.delete(k) : Deno.env.set(k, x);
    }
  };
  apply(vars);
  try {
    return await f();
  } finally {
    apply(saved);
  }
}

Deno.test("credentials: an assumed-role profile goes to the AWS SDK's chain where the program registered it (the CLI), and is refused with a way out where not (the agent)", async () => {
  const { m, user } = await enforcingMoto();
  await withHome({
    // The source profile holds the IAM user's keys: the SDK's AssumeRole is signed with them.
    config: `[profile base]\naws_access_key_id = ${user.AWS_ACCESS_KEY_ID}\n` +
      `aws_secret_access_key = ${user.AWS_SECRET_ACCESS_KEY}\n\n` +
      "[profile assumer]\nrole_arn = arn:aws:iam::123456789012:role/podmin-operator\n" +
      "source_profile = base\nregion = us-east-1\n",
  }, async (home) => {
    const vars = { ...NO_IMDS, HOME: home, AWS_PROFILE: "assumer" };
    // The CLI's module registers the SDK's chain when it is imported (cli/main.ts imports it).
    await import("../../cli/aws_sdk_credentials.ts");
    const cliProvider = sdkCredentialProvider();
    assert.ok(cliProvider, "the CLI registered the SDK's chain");
    registerSdkCredentials(undefined); // as in the agent, which registers none
    try {
      const refused = await chainOf(vars)().catch((e) => e);
      assert.ok(refused instanceof NoCredentialsError, String(refused));
      assert.match(refused.message, /profile assumer needs the AWS SDK/);
      assert.match(refused.hint ?? "", /credential_process = aws configure export-credentials/);
    } finally {
      registerSdkCredentials(cliProvider);
    }

    await withProcessEnv({
      HOME: home,
      AWS_PROFILE: "assumer",
      AWS_CONFIG_FILE: path.join(home, ".aws", "config"),
      AWS_ACCESS_KEY_ID: undefined,
      AWS_SECRET_ACCESS_KEY: undefined,
      AWS_ENDPOINT_URL: m.endpoint,
    }, async () => {
      const c = await chainOf(vars)();
      // moto's STS answered AssumeRole: temporary keys with a session token and an expiry.
      assert.match(c.accessKeyId, /^ASIA/);
      assert.ok(c.sessionToken);
      assert.ok(c.expiration && c.expiration.getTime() > Date.now());
      assert.equal(await roundTrip(vars), "signed");
    });
  });
});

Deno.test("credentials: the instance role through IMDSv2, fetched once and then reused", async () => {
  const { role } = await enforcingMoto();
  const imds = startImds({
    instanceId: "i-0abc",
    availabilityZone: "us-east-1a",
    enis: [],
    roleCredentials: role,
  });
  try {
    await withHome({}, async (home) => {
      const vars = { HOME: home, AWS_EC2_METADATA_SERVICE_ENDPOINT: imds.endpoint };
      const chain = chainOf(vars);
      const c = await chain();
      assert.equal(c.accessKeyId, role.accessKeyId);
      assert.equal(c.sessionToken, role.sessionToken);
      assert.ok(c.expiration && c.expiration.getTime() > Date.now() + 3600_000);
      assert.deepEqual(imds.requests, [
        "PUT /latest/api/token",
        "GET /latest/meta-data/iam/security-credentials/",
        "GET /latest/meta-data/iam/security-credentials/podmin-node",
      ]);
      await Promise.all([chain(), chain(), chain()]);
      assert.equal(imds.requests.length, 3, "cached credentials are reused, not fetched again");
      assert.equal(await roundTrip(vars), "signed");
    });
  } finally {
    await imds.close();
  }
});

Deno.test("credentials: none anywhere is a permanent error that says what was tried", async () => {
  await withHome({}, async (home) => {
    // An endpoint nothing listens on: IMDS is tried and fails fast.
    const vars = { HOME: home, AWS_EC2_METADATA_SERVICE_ENDPOINT: "http://127.0.0.1:9" };
    const err = await chainOf(vars)().then(() => undefined, (e) => e);
    assert.ok(err instanceof NoCredentialsError, String(err));
    assert.match(err.message, /tried environment, profile default, EC2 instance metadata/);
    assert.match(err.hint ?? "", /AWS_PROFILE or AWS_ACCESS_KEY_ID/);

    const off = await chainOf({ HOME: home, ...NO_IMDS })().then(() => undefined, (e) => e);
    assert.ok(off instanceof NoCredentialsError);
    assert.doesNotMatch(off.message, /instance metadata/);

    const storeErr = await roundTrip(vars).then(() => undefined, (e) => e);
    assert.ok(storeErr instanceof PermanentStoreError, String(storeErr));
    assert.match(storeErr.message, /no AWS credentials for s3:\/\//);
  });
});

Deno.test("credentials: the IMDS endpoint follows the SDK's settings (explicit endpoint, else IPv4 or IPv6 mode)", async () => {
  const of = (vars: Env) => imdsEndpoint((n) => vars[n]);
  assert.equal(of({}), "http://169.254.169.254");
  assert.equal(of({ AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: "IPv4" }), "http://169.254.169.254");
  // What vmconfig sets on IPv6-only nodes (DETECTED_IMDS_MODE).
  assert.equal(of({ AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: "IPv6" }), "http://[fd00:ec2::254]");
  assert.equal(
    of({
      AWS_EC2_METADATA_SERVICE_ENDPOINT: "http://127.0.0.1:8080/",
      AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: "IPv6",
    }),
    "http://127.0.0.1:8080",
  );
  await withHome({}, async (home) => {
    const bad = await chainOf({ HOME: home, AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: "ipv7" })()
      .catch((e) => e);
    assert.ok(bad instanceof NoCredentialsError);
    assert.match(bad.message, /"ipv7": use IPv4 or IPv6/);
  });
});

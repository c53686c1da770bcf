/**
 * Where the agent's own AWS client finds credentials (core/aws_credentials.ts), each source
 * checked by a signed S3 request that moto answers: the environment, a shared credentials file's
 * profile, a config file's `[profile NAME]`, a `credential_process` profile (handed to the AWS
 * SDK's own chain), and the instance role through IMDSv2 — the emulator of the vmconfig tests,
 * which answers only token-bearing requests. Temporary credentials are fetched once and reused;
 * with no source at all the error names what was tried and how to fix it.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { credentialChain, NoCredentialsError } from "../../core/aws_credentials.ts";
import { PermanentStoreError } from "../../core/errors.ts";
import { S3Store } from "../../core/s3_store.ts";
import { moto } from "../support/moto.ts";
import { ROLE_TOKEN, startImds } from "../vmconfig/imds_emulator.ts";

type Env = Record<string, string>;

/** A chain reading only `vars` (no HOME files unless given), with IMDS off unless enabled. */
function chainOf(vars: Env) {
  return credentialChain((n) => vars[n]);
}

/** A signed PUT + GET through `S3Store` with the chain's credentials. */
async function roundTrip(vars: Env): Promise<string> {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const store = new S3Store({
    bucket,
    region: "us-east-1",
    endpoint: m.endpoint,
    credentials: chainOf(vars),
    retry: { attempts: 1, baseMs: 1, maxMs: 1 },
  });
  await store.put("k", new TextEncoder().encode("signed"));
  const r = await store.get("k");
  assert.ok(!r.notModified);
  return new TextDecoder().decode(r.body);
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
  assert.equal(
    await roundTrip({ ...NO_IMDS, AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b" }),
    "signed",
  );
});

Deno.test("credentials: AWS_PROFILE picks its section of the shared credentials file", async () => {
  await withHome({
    credentials: "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n\n" +
      "# a comment\n[ci]\naws_access_key_id=AKIDCI ; trailing comment\naws_secret_access_key=s\n",
  }, async (home) => {
    const vars = { ...NO_IMDS, HOME: home, AWS_PROFILE: "ci" };
    const c = await chainOf(vars)();
    assert.equal(c.accessKeyId, "AKIDCI");
    assert.equal(c.secretAccessKey, "s");
    assert.equal((await chainOf({ ...NO_IMDS, HOME: home })()).accessKeyId, "AKIDDEFAULT");
    assert.equal(await roundTrip(vars), "signed");
  });
});

Deno.test("credentials: keys in the config file's [profile NAME] section are found", async () => {
  await withHome({
    config: "[profile ops]\nregion = us-east-1\naws_access_key_id = AKIDCONFIG\n" +
      "aws_secret_access_key = c\n",
  }, async (home) => {
    const c = await chainOf({ ...NO_IMDS, HOME: home, AWS_PROFILE: "ops" })();
    assert.equal(c.accessKeyId, "AKIDCONFIG");
  });
});

Deno.test("credentials: a credential_process profile is resolved by the AWS SDK's chain", async () => {
  await withHome({}, async (home) => {
    const script = path.join(home, "creds.sh");
    const expiry = new Date(Date.now() + 3600_000).toISOString();
    await Deno.writeTextFile(
      script,
      `#!/bin/sh\necho '{"Version":1,"AccessKeyId":"AKIDPROC","SecretAccessKey":"p",` +
        `"SessionToken":"proc-token","Expiration":"${expiry}"}'\n`,
    );
    await Deno.chmod(script, 0o755);
    await Deno.writeTextFile(
      path.join(home, ".aws", "config"),
      `[profile proc]\ncredential_process = ${script}\n`,
    );
    // The SDK's provider reads the process environment, not the chain's.
    const saved = { home: Deno.env.get("HOME"), profile: Deno.env.get("AWS_PROFILE") };
    const id = Deno.env.get("AWS_ACCESS_KEY_ID");
    const secret = Deno.env.get("AWS_SECRET_ACCESS_KEY");
    Deno.env.set("HOME", home);
    Deno.env.set("AWS_PROFILE", "proc");
    Deno.env.delete("AWS_ACCESS_KEY_ID");
    Deno.env.delete("AWS_SECRET_ACCESS_KEY");
    try {
      const c = await chainOf({ ...NO_IMDS, HOME: home, AWS_PROFILE: "proc" })();
      assert.equal(c.accessKeyId, "AKIDPROC");
      assert.equal(c.sessionToken, "proc-token");
      assert.equal(c.expiration?.toISOString(), expiry);
    } finally {
      const restore = (n: string, v: string | undefined) =>
        v === undefined ? Deno.env.delete(n) : Deno.env.set(n, v);
      restore("HOME", saved.home);
      restore("AWS_PROFILE", saved.profile);
      restore("AWS_ACCESS_KEY_ID", id);
      restore("AWS_SECRET_ACCESS_KEY", secret);
    }
  });
});

Deno.test("credentials: the instance role through IMDSv2, fetched once and then reused", async () => {
  const imds = startImds({ instanceId: "i-0abc", availabilityZone: "us-east-1a", enis: [] });
  try {
    await withHome({}, async (home) => {
      const vars = { HOME: home, AWS_EC2_METADATA_SERVICE_ENDPOINT: imds.endpoint };
      const chain = chainOf(vars);
      const c = await chain();
      assert.equal(c.accessKeyId, "testing");
      assert.equal(c.sessionToken, ROLE_TOKEN);
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

/**
 * The node role's generated IAM policy, enforced by moto: a moto IAM user holds exactly the
 * policy `podmin setup` generates for the node role, and the agent and its registry run with
 * that user's keys. What a node needs succeeds; what it must not do is denied by IAM, not by
 * Podmin's own code.
 *
 * moto authorizes S3 per bucket and key, so the S3 statements are checked resource by resource.
 * It authorizes SSM and Secrets Manager calls against the resource "*" only, which no
 * resource-scoped statement matches: the parameter and secret statements cannot be checked on
 * moto (it denies them all), so this test covers the bucket.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import {
  DEPLOYMENT_INDEX,
  IDENTITY_WRITES,
  INFRA_CONFIG,
} from "../../core/bucket/bucket_layout.ts";
import { generatedNodePolicy, userWithPolicy } from "./aws_iam.ts";
import { dedicatedMoto } from "../support/moto.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { nodeAgentArgs, podmin, spawnAgent, waitFor } from "../support/programs.ts";
import { startRegistry } from "../support/registry.ts";

const DEPLOYMENT = `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: web}
spec:
  nodeGroup: workers
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: main
          image: registry.podmin.internal/apps/hello:1.0
`;

/** The outcome of one S3 call: "ok" or the error name. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (err) {
    return (err as Error).name;
  }
}

Deno.test("iam [moto, enforced]: with the node role's generated policy the agent converges and serves images; writing desired state, listing and deleting images are denied", async () => {
  const m = await dedicatedMoto();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-iam-" });
  const admin = {
    AWS_ENDPOINT_URL: m.endpoint,
    AWS_ACCESS_KEY_ID: "testing",
    AWS_SECRET_ACCESS_KEY: "testing",
    AWS_REGION: "us-east-1",
  };
  let agent: Deno.ChildProcess | undefined;
  let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
  try {
    // The operator's side, before IAM is enforced: desired state and an image.
    const bucket = await m.createBucket();
    const url = `s3://${bucket}`;
    await Deno.writeTextFile(path.join(tmp, "web.yaml"), DEPLOYMENT);
    const applied = await podmin(["--bucket", url, "apply", "-f", `${tmp}/web.yaml`], admin);
    assert.equal(applied.code, 0, applied.stderr);
    await writeOciLayout({
      dir: path.join(tmp, "hello"),
      ref: "1.0",
      platforms: [{ arch: "amd64", files: { hello: new TextEncoder().encode("hello") } }],
    });
    const pushed = await podmin(
      ["--bucket", url, "push", `oci:${tmp}/hello:1.0`, "apps/hello:1.0"],
      admin,
    );
    assert.equal(pushed.code, 0, pushed.stderr);

    const policy = await generatedNodePolicy({ bucket, cluster: "test" });
    const keys = await userWithPolicy({ endpoint: m.endpoint, user: "podmin-node", policy });
    await m.enforceIam(true);
    const node = { ...admin, ...keys };
    const s3 = new S3Client({
      region: "us-east-1",
      endpoint: m.endpoint,
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: {
        accessKeyId: keys.AWS_ACCESS_KEY_ID,
        secretAccessKey: keys.AWS_SECRET_ACCESS_KEY,
      },
    });

    // Enforcement is on: the unprivileged default keys are no IAM user's.
    assert.equal(
      await outcome(
        new S3Client({
          region: "us-east-1",
          endpoint: m.endpoint,
          forcePathStyle: true,
          maxAttempts: 1,
          credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
        }).send(new GetObjectCommand({ Bucket: bucket, Key: DEPLOYMENT_INDEX })),
      ),
      "InvalidAccessKeyId",
    );

    // The agent, with the node's keys: reads desired state, converges, reports no error.
    const base = path.join(tmp, "node");
    agent = spawnAgent(
      [
        ...nodeAgentArgs({ bucket: url, nodeGroup: "workers", base }),
        "--registry-listen",
        "off",
        "--interval",
        "200ms",
      ],
      node,
    );
    await waitFor("the agent converging with the node's keys", async () => {
      try {
        const s = JSON.parse(await Deno.readTextFile(path.join(base, "state", "status.json")));
        return s.converged === true;
      } catch {
        return false;
      }
    }, 60_000);
    const manifests = [...Deno.readDirSync(path.join(base, "manifests"))].map((e) => e.name);
    assert.deepEqual(manifests, ["podmin_default_web.json"]);

    // The agent's registry, with the node's keys: the manifest and its layers are served.
    registry = await startRegistry(url, { env: node });
    const res = await fetch(`http://${registry.address}/v2/apps/hello/manifests/1.0`, {
      headers: { Accept: "application/vnd.oci.image.manifest.v1+json" },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const manifest = await res.json();
    for (const d of [manifest.config, ...manifest.layers] as { digest: string }[]) {
      const blob: Response = await fetch(
        `http://${registry.address}/v2/apps/hello/blobs/${d.digest}`,
      );
      assert.equal(blob.status, 200);
      const bytes = new Uint8Array(await blob.arrayBuffer());
      assert.equal(`sha256:${createHash("sha256").update(bytes).digest("hex")}`, d.digest);
    }

    // The agent's own prefixes are writable.
    assert.equal(
      await outcome(
        s3.send(new PutObjectCommand({ Bucket: bucket, Key: "dns/nodes/workers/i-1", Body: "{}" })),
      ),
      "ok",
    );
    assert.equal(
      await outcome(
        s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: "dns/nodes/workers/i-1" })),
      ),
      "ok",
    );
    // Under identity/, exactly the CA state and the leader lease (spec §8.1).
    for (const key of IDENTITY_WRITES) {
      assert.equal(
        await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: "{}" }))),
        "ok",
        key,
      );
    }
    assert.equal(
      await outcome(
        s3.send(new PutObjectCommand({ Bucket: bucket, Key: "identity/probe", Body: "{}" })),
      ),
      "AccessDenied",
      "other identity/ keys",
    );
    assert.equal(
      await outcome(
        s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: IDENTITY_WRITES[0] })),
      ),
      "AccessDenied",
      "no delete under identity/",
    );

    // Denied by IAM: desired state, listing, deleting images, the infrastructure's files.
    const denied = {
      "write deployments/": () =>
        s3.send(
          new PutObjectCommand({ Bucket: bucket, Key: DEPLOYMENT_INDEX, Body: "{}" }),
        ),
      "list the bucket": () => s3.send(new ListObjectsV2Command({ Bucket: bucket })),
      "delete under apps/": () =>
        s3.send(
          new DeleteObjectCommand({ Bucket: bucket, Key: `apps/tags/hello/1.0` }),
        ),
      "read infra/": () => s3.send(new GetObjectCommand({ Bucket: bucket, Key: INFRA_CONFIG })),
      "write apps/": () =>
        s3.send(new PutObjectCommand({ Bucket: bucket, Key: "apps/x", Body: "x" })),
      "read another bucket": () =>
        s3.send(
          new GetObjectCommand({ Bucket: `${bucket}-other`, Key: DEPLOYMENT_INDEX }),
        ),
    };
    for (const [what, p] of Object.entries(denied)) {
      assert.equal(await outcome(p()), "AccessDenied", what);
    }
  } finally {
    if (agent) {
      agent.kill("SIGTERM");
      await agent.output();
    }
    await registry?.stop();
    await m.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

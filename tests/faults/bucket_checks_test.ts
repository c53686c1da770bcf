/** The kill -9 trials' bucket checks see what they must: a missing spec, a torn object, a dangling tag. */

import assert from "node:assert/strict";
import { sha256Hex } from "../../core/kit/digest.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import { bucketProblems } from "./bucket_checks.ts";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

Deno.test("faults: bucket checks report a missing spec, a torn object and a dangling tag", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-bucket-checks-" });
  try {
    await createFsBucket(`${tmp}/b`);
    const store = new FsStore({ root: `${tmp}/b`, mustExist: true });
    assert.deepEqual(await bucketProblems(store), []);
    await store.put(
      "deployments/index.json",
      enc({
        apiVersion: "podmin.dev/v1",
        kind: "DeploymentIndex",
        generation: 1,
        deployments: [{
          namespace: "default",
          name: "web",
          nodeGroup: "workers",
          spec: `sha256:${"b".repeat(64)}`,
        }],
      }),
    );
    await store.put(`apps/_blobs/sha256/${"c".repeat(64)}`, new Uint8Array([1, 2]));
    const layer = new Uint8Array([7]);
    const manifest = enc({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: `sha256:${sha256Hex(layer)}`,
        size: 1,
      },
      layers: [],
    });
    await store.put("apps/x/_tags/1", manifest);
    const problems = (await bucketProblems(store)).join("\n");
    assert.match(problems, /deployment default\/web: .*missing/);
    assert.match(problems, /cccc.*content does not match its digest/);
    assert.match(problems, /tagged manifest missing/);
    assert.match(problems, /referenced blob missing/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

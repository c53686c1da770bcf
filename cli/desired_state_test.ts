import assert from "node:assert/strict";
import { DEPLOYMENT_INDEX } from "../core/bucket/bucket_layout.ts";
import { parseDeploymentIndex } from "../core/bucket/deployment_index.ts";
import { PreconditionFailedError } from "../core/kit/errors.ts";
import { FsStore } from "../core/store/fs_store.ts";
import { getIfExists, type ObjectStore } from "../core/store/object_store.ts";
import { parseResource } from "../core/model/resources.ts";
import { applyResources, deleteResource } from "./desired_state.ts";

const web = parseResource({
  apiVersion: "podmin.dev/v1",
  kind: "Deployment",
  metadata: { name: "web" },
  spec: { nodeGroup: "g", template: { spec: { containers: [{ name: "c", image: "i" }] } } },
});

Deno.test("delete: a write whose response was lost (then 412 on retry) still reports success", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fs = new FsStore({ root: dir, durable: false });
    await applyResources({ store: fs, resources: [web] });
    let lose = true;
    // The first index write lands but its response is lost; the retry sees 412.
    const flaky: ObjectStore = Object.assign(Object.create(fs), {
      url: fs.url,
      get: fs.get.bind(fs),
      head: fs.head.bind(fs),
      async put(k: string, b: Uint8Array, o?: never) {
        const r = await fs.put(k, b, o);
        if (lose && k === DEPLOYMENT_INDEX) {
          lose = false;
          throw new PreconditionFailedError("lost response, retry lost the race");
        }
        return r;
      },
    });
    await deleteResource({ store: flaky, kind: "Deployment", namespace: "default", name: "web" });
    const index = parseDeploymentIndex((await getIfExists(fs, DEPLOYMENT_INDEX))!.body);
    assert.deepEqual(index.deployments, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const deployment = (name: string) =>
  parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      nodeGroup: "g",
      template: { spec: { containers: [{ name: "c", image: `i/${name}` }] } },
    },
  });

Deno.test("apply: specs are written several at once, and a failed spec write leaves the index unwritten", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fs = new FsStore({ root: dir, durable: false });
    let specsInFlight = 0;
    let most = 0;
    let fail = true;
    const store: ObjectStore = Object.assign(Object.create(fs), {
      url: fs.url,
      get: fs.get.bind(fs),
      head: fs.head.bind(fs),
      async put(k: string, b: Uint8Array, o?: never) {
        if (!k.startsWith("deployments/specs/")) return await fs.put(k, b, o);
        specsInFlight++;
        most = Math.max(most, specsInFlight);
        try {
          // Every spec write waits a little, so the writes overlap when they run at once.
          await new Promise((r) => setTimeout(r, 20));
          if (fail && new TextDecoder().decode(b).includes("i/d3")) {
            throw new Error("disk full (test)");
          }
          return await fs.put(k, b, o);
        } finally {
          specsInFlight--;
        }
      },
    });
    const resources = Array.from({ length: 6 }, (_, i) => deployment(`d${i}`));
    await assert.rejects(applyResources({ store, resources }), /disk full/);
    assert.equal(await getIfExists(fs, DEPLOYMENT_INDEX), undefined, "no index without its specs");
    assert.ok(most > 1, `spec writes overlapped (at most ${most} at once)`);
    fail = false;
    const changes = await applyResources({ store, resources });
    assert.deepEqual(changes.map((c) => `${c.name} ${c.action} r${c.revision}`), [
      "d0 created r1",
      "d1 created r1",
      "d2 created r1",
      "d3 created r1",
      "d4 created r1",
      "d5 created r1",
    ]);
    const index = parseDeploymentIndex((await getIfExists(fs, DEPLOYMENT_INDEX))!.body);
    assert.equal(index.deployments.length, 6);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

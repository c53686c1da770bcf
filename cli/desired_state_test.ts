import assert from "node:assert/strict";
import { DEPLOYMENT_INDEX } from "../core/bucket/bucket_layout.ts";
import { parseDeploymentIndex } from "../core/bucket/deployment_index.ts";
import { PreconditionFailedError } from "../core/kit/errors.ts";
import { FsStore } from "../core/store/fs_store.ts";
import { getIfExists, type ObjectStore } from "../core/store/object_store.ts";
import { workerDeployment } from "../tests/support/fixtures.ts";
import { applyResources, deleteResource } from "./desired_state.ts";

const web = workerDeployment("web");

/** `fs` with its `put` replaced (`fsPut` is the real one). */
function withPut(
  fs: FsStore,
  put: (fsPut: ObjectStore["put"], ...args: Parameters<ObjectStore["put"]>) => ReturnType<
    ObjectStore["put"]
  >,
): ObjectStore {
  const fsPut: ObjectStore["put"] = fs.put.bind(fs);
  return Object.assign(Object.create(fs), {
    url: fs.url,
    get: fs.get.bind(fs),
    head: fs.head.bind(fs),
    put: (...args: Parameters<ObjectStore["put"]>) => put(fsPut, ...args),
  });
}

Deno.test("delete: a write whose response was lost (then 412 on retry) still reports success", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fs = new FsStore({ root: dir, durable: false });
    await applyResources({ store: fs, resources: [web] });
    let lose = true;
    // The first index write lands but its response is lost; the retry sees 412.
    const flaky = withPut(fs, async (put, k, b, o) => {
      const r = await put(k, b, o);
      if (lose && k === DEPLOYMENT_INDEX) {
        lose = false;
        throw new PreconditionFailedError("lost response, retry lost the race");
      }
      return r;
    });
    await deleteResource({ store: flaky, kind: "Deployment", namespace: "default", name: "web" });
    const index = parseDeploymentIndex((await getIfExists(fs, DEPLOYMENT_INDEX))!.body);
    assert.deepEqual(index.deployments, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("apply: specs are written several at once, and a failed spec write leaves the index unwritten", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fs = new FsStore({ root: dir, durable: false });
    let specsInFlight = 0;
    let most = 0;
    let fail = true;
    const store = withPut(fs, async (put, k, b, o) => {
      if (!k.startsWith("deployments/specs/")) return await put(k, b, o);
      specsInFlight++;
      most = Math.max(most, specsInFlight);
      try {
        // Every spec write waits a little, so the writes overlap when they run at once.
        await new Promise((r) => setTimeout(r, 20));
        if (fail && new TextDecoder().decode(b).includes("r/apps/d3:1")) {
          throw new Error("disk full (test)");
        }
        return await put(k, b, o);
      } finally {
        specsInFlight--;
      }
    });
    const resources = Array.from({ length: 6 }, (_, i) => workerDeployment(`d${i}`));
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

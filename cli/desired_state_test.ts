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

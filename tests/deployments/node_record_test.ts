/**
 * The agent's node record under dns/nodes/: written while it runs (its Deployments at their spec
 * digests, converged), removed on a clean shutdown (SIGTERM), left to go stale after a crash.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { applyResources } from "../../cli/desired_state.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { parseNodeRecord } from "../../core/bucket/node_record.ts";
import { parseResource } from "../../core/model/resources.ts";
import { nodeAgentArgs, spawnAgent, waitFor } from "../support/programs.ts";

const KEY = "dns/nodes/workers/node-a.json";

Deno.test("node record: written with the node's Deployments, removed on SIGTERM, left after SIGKILL", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-record-" });
  try {
    const bucketDir = path.join(tmp, "bucket");
    await createFsBucket(bucketDir);
    const store = new FsStore({ root: bucketDir });
    await applyResources({
      store,
      resources: [parseResource({
        apiVersion: "podmin.dev/v1",
        kind: "Deployment",
        metadata: { name: "web" },
        spec: {
          nodeGroup: "workers",
          template: { spec: { containers: [{ name: "web", image: "r/apps/web:1" }] } },
        },
      })],
    });
    const args = [
      ...nodeAgentArgs({ bucket: `file://${bucketDir}`, nodeGroup: "workers", base: tmp }),
      "--node-id",
      "node-a",
      "--node-address",
      "2600:1f18:0:0::10",
      "--ipv6-prefix",
      "2600:1f18:0:1:abcd::/80",
      "--registry-listen",
      "off",
      "--interval",
      "200ms",
    ];
    const read = async () => {
      const got = await getIfExists(store, KEY);
      return got && parseNodeRecord(got.body, KEY);
    };

    let agent = spawnAgent(args);
    let record: Awaited<ReturnType<typeof read>>;
    await waitFor("a converged node record", async () => {
      record = await read();
      return record?.converged === true;
    }, 30_000);
    assert.equal(record!.address, "2600:1f18::10");
    assert.equal(record!.podPrefix, "2600:1f18:0:1:abcd::/80");
    assert.equal(record!.deployments.length, 1);
    assert.match(record!.deployments[0].spec ?? "", /^sha256:[0-9a-f]{64}$/);
    agent.kill("SIGTERM");
    assert.equal((await agent.status).code, 0);
    await agent.stderr.cancel().catch(() => {});
    assert.equal(await read(), undefined, "a clean shutdown removes the record");

    agent = spawnAgent(args);
    await waitFor("the record again", async () => !!(await read()), 30_000);
    agent.kill("SIGKILL");
    await agent.status;
    await agent.stderr.cancel().catch(() => {});
    assert.ok(await read(), "a crashed agent's record stays (it goes stale by its heartbeat)");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

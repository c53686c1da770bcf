/**
 * The cluster-scale simulation at 200 agents, as a test (issue 33 item 4; spec §7.9 "Changes over
 * the mesh"): the bench's fleet (tests/bench/cluster_scale_fleet.ts: worker processes of simulated
 * agents built from the product's pieces, real TLS gRPC mesh) on moto, every S3 request counted by
 * the forwarder in front of it. Counts only, never durations: each apply costs the cluster at most
 * 50 S3 requests (node records, written at a bounded rate after it, and the apply's own writes
 * excluded) — the coordinator reads each new spec once and no agent reads the index or a spec —,
 * every agent writes the new manifest on notifications (none left behind, none by direct polling),
 * and no worker process aborts.
 */

import assert from "node:assert/strict";
import { applyResources } from "../../cli/desired_state.ts";
import { openStore } from "../../core/store/store_url.ts";
import { countingProxy } from "../bench/counting_proxy.ts";
import {
  appDeployment,
  appService,
  Fleet,
  nodeGroupOf,
  writeFleetCaFiles,
} from "../bench/cluster_scale_fleet.ts";
import { manifestFileName } from "../../agent/deployments/static_pod.ts";
import { countingStore } from "../support/counting_store.ts";
import { moto } from "../support/moto.ts";

const NODES = 200;
const GROUPS = 4;
const APPLIES = 2;
const REGION = "us-east-1";

async function until(what: string, f: () => Promise<boolean>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

Deno.test("cluster scale [moto]: 200 agents, each apply ≤ 50 S3 requests with no agent left behind and no abort", async () => {
  const m = await moto();
  const proxy = countingProxy(m.endpoint);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-scale-test-" });
  const bucket = await m.createBucket();
  const store = openStore(`s3://${bucket}`, { region: REGION });
  let fleet: Fleet | undefined;
  try {
    const { clusterCaFile, workloadKeyFile } = await writeFleetCaFiles(
      tmp,
      "podmin cluster CA scale test",
    );
    const apps = Array.from(
      { length: GROUPS },
      (_, g) => appDeployment(`app-g${g}`, nodeGroupOf(g, GROUPS)),
    );
    await applyResources({
      store,
      resources: [...apps, ...apps.map((d) => appService(d.metadata.name))],
    });
    const appFiles = Object.fromEntries(
      apps.map((d) => [d.spec.nodeGroup, manifestFileName("default", d.metadata.name)]),
    );
    fleet = await Fleet.start({
      config: {
        bucket,
        cluster: "scale",
        region: REGION,
        clusterCaFile,
        workloadKeyFile,
        mesh: true,
        batched: true,
        pollMs: 2_000,
        secretsMs: 60_000,
        leaseMs: 6_000,
      },
      nodes: NODES,
      workers: 2,
      groups: GROUPS,
      prefix: "node",
      shm: tmp,
      startSpreadMs: 20_000,
      env: {
        AWS_ENDPOINT_URL: proxy.endpoint,
        AWS_ACCESS_KEY_ID: "testing",
        AWS_SECRET_ACCESS_KEY: "testing",
        AWS_REGION: REGION,
      },
    });
    const mesh = fleet;
    await until("every agent converged and on notifications", async () => {
      const s = await mesh.status(appFiles);
      return s.wrote === NODES && s.converged === NODES && s.fresh === NODES;
    }, 240_000);

    for (let r = 0; r < APPLIES; r++) {
      await until("every agent on notifications", async () => {
        return (await mesh.status()).fresh === NODES;
      }, 120_000);
      proxy.reset();
      const cli = countingStore(store); // the apply's own writes go to moto directly: not counted
      const a = await mesh.apply(cli.store, `r${r}`, 120_000);
      const counts = new Map<string, number>();
      for (const [what, n] of proxy.counts()) {
        const kind = what.replace(`${bucket}/`, "").replace(/sha256\/[0-9a-f]{64}/, "sha256/*")
          .replace(/dns\/nodes\/.*$/, "dns/nodes/*");
        counts.set(kind, (counts.get(kind) ?? 0) + n);
      }
      let requests = 0;
      for (const [kind, n] of counts) {
        if (kind.startsWith("s3 ") && kind !== "s3 PUT dns/nodes/*") requests += n;
      }
      const specGets = counts.get("s3 GET deployments/specs/sha256/*") ?? 0;
      console.log(
        `cluster scale: apply ${r}: ${requests} S3 requests until the last of ${NODES} manifests ` +
          `(${JSON.stringify(Object.fromEntries(counts))}); ${a.direct} by direct polling, ` +
          `${a.missing} missing`,
      );
      assert.equal(a.missing, 0, "no agent left behind");
      assert.equal(a.direct, 0, "every agent wrote on notifications");
      assert.ok(requests <= 50, `${requests} S3 requests for one apply`);
      assert.ok(specGets <= GROUPS, `${specGets} spec reads: the coordinator's, once per spec`);
    }
    const s = await mesh.status();
    assert.equal(s.alive, NODES);
    assert.equal(mesh.aborts(), 0, "no worker process aborted");
    await mesh.stop();
    assert.equal(mesh.aborts(), 0, "nor while stopping");
    fleet = undefined;
  } finally {
    fleet?.kill();
    await proxy.close();
    await m.stop();
    await Deno.remove(tmp, { recursive: true });
  }
});

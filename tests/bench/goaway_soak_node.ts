/**
 * One mesh node of the GOAWAY soak (tests/bench/goaway_soak.ts) as a program: the product's
 * `MeshNode` on loopback over a filesystem bucket, printing one JSON line per newer snapshot
 * (`term`, `version`, `streams`: streams its member opened so far). SIGTERM stops it the way an
 * agent stops (`stop()`: calls ended, lease released, server closed), SIGUSR1 the way a test
 * crashes one (`crash()`), then it exits 0; any other end is the runtime's.
 *
 * Usage: `deno run --allow-all tests/bench/goaway_soak_node.ts CONFIG.json` (a `SoakNodeConfig`).
 */

import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import { parseClusterCa } from "../../agent/mesh/node_tls.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { openStore } from "../../core/store/store_url.ts";

/** What a soak node is told. */
export interface SoakNodeConfig {
  nodeId: string;
  /** `file:///…` of the shared bucket. */
  bucket: string;
  /** The cluster CA, certificate and key PEM. */
  caPem: string;
  leaseMs: number;
}

if (import.meta.main) {
  // Asked to end before the node started: nothing to close yet.
  let node: MeshNode | undefined = undefined;
  Deno.addSignalListener("SIGTERM", async () => {
    await node?.stop();
    Deno.exit(0);
  });
  Deno.addSignalListener("SIGUSR1", () => {
    node?.crash();
    Deno.exit(0);
  });
  const config = JSON.parse(await Deno.readTextFile(Deno.args[0])) as SoakNodeConfig;
  const mesh: MeshNode = new MeshNode({
    store: openStore(config.bucket),
    cluster: "soak",
    nodeGroup: "workers",
    nodeId: config.nodeId,
    ca: await parseClusterCa(config.caPem),
    listen: "127.0.0.1:0",
    advertiseHost: "127.0.0.1",
    leaseMs: config.leaseMs,
    heartbeatMs: 1_000,
    graceMs: 3_000,
    onSnapshot: (s) =>
      console.log(JSON.stringify({
        event: "snapshot",
        term: s.term,
        version: s.version,
        streams: mesh.member.streamsOpened,
      })),
    log: silentLogger,
  });
  node = mesh;
  await mesh.start();
  console.log(JSON.stringify({ event: "started" }));
}

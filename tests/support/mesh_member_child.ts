/**
 * A mesh member alone, as a program (for tests/support/member_process.ts): it streams to the
 * coordinator its configuration names, as an agent's `MeshMember` does, and prints one JSON line
 * per event on stdout (`started`, `snapshot`). Run in a child process so that a runtime abort
 * (an nghttp2 assertion, a segmentation fault) is seen by the test as an exit code or a signal.
 *
 * Usage: `deno run --allow-all tests/support/mesh_member_child.ts CONFIG.json`, the configuration
 * being a `MemberChildConfig`.
 */

import { MeshMember } from "../../agent/mesh/member.ts";
import type { NodeTls } from "../../agent/mesh/node_tls.ts";
import { createLogger } from "../../core/kit/log.ts";

/** What the child is told: its node identity and the coordinator it connects to. */
export interface MemberChildConfig {
  nodeId: string;
  caPem: string;
  certPem: string;
  keyPem: string;
  /** `host:port` of the coordinator. */
  endpoint: string;
  /** The coordinator certificate's DNS name. */
  serverName: string;
  /** Report heartbeat (ms). */
  heartbeatMs?: number;
}

function emit(event: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ event, at: performance.now(), ...fields }));
}

if (import.meta.main) {
  const config = JSON.parse(await Deno.readTextFile(Deno.args[0])) as MemberChildConfig;
  const tls = { ...config, serial: "0", notAfter: new Date(0), renewAt: 0 } as NodeTls;
  const member = new MeshMember({
    nodeId: config.nodeId,
    nodeGroup: "workers",
    tls: () => tls,
    coordinator: () =>
      Promise.resolve({
        nodeId: "coordinator",
        term: 1,
        endpoint: config.endpoint,
        serverName: config.serverName,
      }),
    heartbeatMs: config.heartbeatMs ?? 1_000,
    onSnapshot: (s) => emit("snapshot", { term: s.term, version: s.version }),
    log: createLogger("mesh-member"),
  });
  Deno.addSignalListener("SIGTERM", () => {
    member.stop();
    emit("stopped");
    Deno.exit(0);
  });
  member.start();
  emit("started");
}

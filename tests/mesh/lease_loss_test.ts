/**
 * A mesh coordinator that loses its lease while its server stays up (spec §7.9, failure
 * behaviour): cut off from the bucket, it steps down when its lease runs out on its own clock, its
 * members see their calls end (they do not stay "connected" to a node that no longer coordinates),
 * contend, and a new coordinator of a higher term takes over while the old node keeps running.
 */

import assert from "node:assert/strict";
import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import { parseClusterCa } from "../../agent/mesh/node_tls.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { UnavailableError } from "../../core/kit/errors.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { openStore } from "../../core/store/store_url.ts";
import { moto } from "../support/moto.ts";

/** `inner`, until `cut()`: then every request fails as an unreachable bucket does. */
function partitionable(inner: ObjectStore) {
  let cut = false;
  const guard = <T>(op: () => Promise<T>) =>
    cut ? Promise.reject(new UnavailableError("partitioned from the bucket")) : op();
  const store: ObjectStore = {
    url: inner.url,
    get: (k, o) => guard(() => inner.get(k, o)),
    head: (k) => guard(() => inner.head(k)),
    put: (k, b, o) => guard(() => inner.put(k, b, o)),
    putStream: (k, b, o) => guard(() => inner.putStream(k, b, o)),
    getStream: (k, o) => guard(() => inner.getStream(k, o)),
    delete: (k, o) => guard(() => inner.delete(k, o)),
    list: (p) => {
      if (cut) throw new UnavailableError("partitioned from the bucket");
      return inner.list(p);
    },
  };
  return { store, cut: () => (cut = true) };
}

async function until(what: string, f: () => boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

Deno.test("mesh [moto]: a coordinator cut off from the bucket steps down; its members see it and a new coordinator takes over", async () => {
  const m = await moto();
  const shared = openStore(`s3://${await m.createBucket()}`);
  const { certPem, keyPem } = await newCaPem("podmin cluster CA test");
  const ca = await parseClusterCa(certPem + keyPem);
  const nodes = Array.from({ length: 4 }, (_, i) => {
    const link = partitionable(shared);
    const mesh = new MeshNode({
      store: link.store,
      cluster: "test",
      nodeGroup: "workers",
      nodeId: `node-${i}`,
      ca,
      listen: "127.0.0.1:0",
      advertiseHost: "127.0.0.1",
      leaseMs: 3_000,
      heartbeatMs: 500,
      onSnapshot: () => {},
      log: silentLogger,
    });
    return { mesh, link };
  });
  const [first, ...others] = nodes;
  try {
    await first.mesh.start();
    await until("node-0 coordinates", () => first.mesh.coordinator !== undefined);
    await Promise.all(others.map((n) => n.mesh.start()));
    await until("every member connected", () => nodes.every((n) => n.mesh.member.connected()));
    const oldTerm = others[0].mesh.member.snapshot!.term;

    first.link.cut();
    await until("node-0 stepped down", () => first.mesh.coordinator === undefined);
    await until(
      "every other member on a new coordinator's snapshot",
      () =>
        others.every((n) =>
          n.mesh.member.connected() && (n.mesh.member.snapshot?.term ?? 0) > oldTerm
        ),
    );
    const leaders = others.filter((n) => n.mesh.coordinator);
    assert.equal(leaders.length, 1, "one new coordinator");
    assert.notEqual(others[0].mesh.member.state.connectedTo, "node-0");
  } finally {
    // Members leave first, so no client session is open when the servers close (GOAWAY).
    for (const n of nodes) n.mesh.member.stop();
    for (const n of nodes) await n.mesh.stop().catch(() => {});
  }
});

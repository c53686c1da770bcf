import assert from "node:assert/strict";
import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { Service } from "../../core/model/resources.ts";
import type { ServiceSnapshot } from "./service_snapshot.ts";
import type { KnownService } from "../services/services_view.ts";
import { type ApplyResult, noChanges } from "./dataplane.ts";
import { clusterServiceSnapshot } from "./cluster_service_snapshot.ts";
import { NodeDataplane, readDataplaneRunStatus } from "./node_dataplane.ts";

const CIDR = "fd00:504d::/112";

function known(name: string, vip: string, ports: Service["spec"]["ports"]): KnownService {
  return {
    entry: { namespace: "default", name, vip, spec: `sha256:${"0".repeat(64)}` },
    spec: {
      apiVersion: "podmin.dev/v1",
      kind: "Service",
      metadata: { name, namespace: "default" },
      spec: { selector: { app: name }, ports },
    } as Service,
  };
}

const web = known("web", "fd00:504d::10", [
  { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
  { port: 53, targetPort: 5353, protocol: "UDP" },
]);
const api = known("api", "fd00:504d::11", [{ port: 443, targetPort: 8443, protocol: "TCP" }]);

function mesh(endpoints: ClusterSnapshot["endpoints"], version = 3): ClusterSnapshot {
  return { term: 2, version, nodes: 2, endpoints };
}

Deno.test("cluster service snapshot: Services joined with mesh endpoints; none ready is an empty list", () => {
  const { snapshot, skipped } = clusterServiceSnapshot({
    services: [web, api],
    serviceCIDR: CIDR,
    mesh: mesh({ "default/web": ["2600:1f18::a", "2600:1f18::b"], "default/gone": ["2600::1"] }),
  });
  assert.deepEqual(skipped, []);
  assert.equal(snapshot.generation, 3);
  assert.equal(snapshot.serviceCIDR, CIDR);
  assert.deepEqual(snapshot.services.map((s) => [s.name, s.vip, s.backends]), [
    ["web", "fd00:504d::10", ["2600:1f18::a", "2600:1f18::b"]],
    ["api", "fd00:504d::11", []],
  ]);
  assert.deepEqual(snapshot.services[0].ports, [
    { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
    { port: 53, targetPort: 5353, protocol: "UDP" },
  ]);
});

Deno.test("cluster service snapshot: an endpoint no dataplane may use is left out and named", () => {
  const { snapshot, skipped } = clusterServiceSnapshot({
    services: [web],
    serviceCIDR: CIDR,
    mesh: mesh({ "default/web": ["2600:1f18::a", "fd00:504d::99", "fe80::1"] }),
  });
  assert.deepEqual(snapshot.services[0].backends, ["2600:1f18::a"]);
  assert.equal(skipped.length, 2);
  assert.match(skipped[0], /default\/web: fd00:504d::99 is inside serviceCIDR/);
  assert.match(skipped[1], /default\/web: .*fe80::1 is link-local/);
});

/** A dataplane that records what it was given; fails when told to. */
function recorder() {
  const applied: ServiceSnapshot[] = [];
  let fail: string | undefined;
  let closed = false;
  return {
    applied,
    failNext(message: string) {
      fail = message;
    },
    get closed() {
      return closed;
    },
    apply(snapshot: unknown): Promise<ApplyResult> {
      if (fail) {
        const message = fail;
        fail = undefined;
        return Promise.reject(new Error(message));
      }
      const s = snapshot as ServiceSnapshot;
      applied.push(s);
      return Promise.resolve({ ...noChanges(), loaded: s.services.length > 0 });
    },
    close() {
      closed = true;
      return Promise.resolve();
    },
  };
}

Deno.test("node dataplane: nothing applied before the first mesh snapshot; then every change; status says which version", async () => {
  const stateDir = await Deno.makeTempDir();
  const dp = recorder();
  let current: ClusterSnapshot | undefined;
  let services: KnownService[] = [web];
  const node = new NodeDataplane({
    dataplane: dp,
    services: {
      services: () => services,
      get serviceCIDR() {
        return CIDR;
      },
      get generation() {
        return 7;
      },
    },
    meshSnapshot: () => current,
    stateDir,
    log: silentLogger,
    hintDelayMs: 1,
    scanIntervalMs: 60_000,
  });
  try {
    node.start();
    await node.idle();
    assert.equal(dp.applied.length, 0, "endpoints unknown is not 'no endpoints'");
    await node.idle();
    let status = await readDataplaneRunStatus(stateDir);
    assert.equal(status?.waiting, "no endpoint mesh snapshot yet");
    assert.equal(status?.applied, undefined);

    current = mesh({ "default/web": ["2600:1f18::a"] }, 5);
    node.hint();
    await node.idle();
    assert.deepEqual(dp.applied.at(-1)!.services[0].backends, ["2600:1f18::a"]);
    status = await readDataplaneRunStatus(stateDir);
    assert.deepEqual(
      [status?.applied?.term, status?.applied?.version, status?.applied?.servicesGeneration],
      [2, 5, 7],
    );
    assert.equal(status?.applied?.backends, 1);
    assert.equal(status?.waiting, undefined);

    // A failed apply keeps the last applied version in the status, with the error.
    dp.failNext("kernel says no");
    current = mesh({ "default/web": [] }, 6);
    node.hint();
    await node.idle();
    status = await readDataplaneRunStatus(stateDir);
    assert.match(status?.error ?? "", /kernel says no/);
    assert.equal(status?.applied?.version, 5);

    // The last Service deleted: an empty snapshot (the dataplane detaches).
    services = [];
    node.hint();
    await node.idle();
    assert.deepEqual(dp.applied.at(-1)!.services, []);
    status = await readDataplaneRunStatus(stateDir);
    assert.equal(status?.applied?.loaded, false);
    assert.equal(status?.error, undefined);
  } finally {
    await node.stop();
  }
  assert.ok(!dp.closed, "a stopping agent leaves its dataplane serving");
  await Deno.remove(stateDir, { recursive: true });
});

import assert from "node:assert/strict";
import type { KnownService } from "../services/services_view.ts";
import { localEndpoints } from "./local_endpoints.ts";
import type { PodInfo } from "./pod_proto.ts";

const svc = (namespace: string, name: string, selector: Record<string, string>): KnownService => ({
  entry: { namespace, name, spec: `sha256:${"0".repeat(64)}`, vip: "fd00:504d::1" },
  spec: {
    apiVersion: "podmin.dev/v1",
    kind: "Service",
    metadata: { namespace, name },
    spec: { selector, ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }] },
  },
});
const pod = (o: Partial<PodInfo>): PodInfo => ({
  namespace: "shop",
  name: "web-node",
  uid: crypto.randomUUID(),
  labels: { app: "web" },
  phase: "Running",
  ready: true,
  ips: ["fd00:706d:6e:1::3"],
  ...o,
});

Deno.test("local endpoints: Ready Pods of the Service's namespace carrying its selector, IPv6 only", () => {
  const services = [svc("shop", "web", { app: "web" }), svc("shop", "db", { app: "db" })];
  const pods = [
    pod({}),
    pod({ name: "web-2", ips: ["fd00:706d:6e:1:0:0:0:4", "10.0.0.4"] }), // canonicalised; IPv4 left out
    pod({ name: "web-pending", ready: false, ips: ["fd00:706d:6e:1::9"] }), // a stale IP while Pending
    pod({ name: "web-elsewhere", namespace: "other", ips: ["fd00:706d:6e:1::7"] }),
    pod({ name: "web-unlabelled", labels: {}, ips: ["fd00:706d:6e:1::8"] }),
  ];
  assert.deepEqual(localEndpoints(pods, services), {
    "shop/web": ["fd00:706d:6e:1::3", "fd00:706d:6e:1::4"],
  });
  // An empty selector selects nothing.
  assert.deepEqual(localEndpoints(pods, [svc("shop", "all", {})]), {});
});

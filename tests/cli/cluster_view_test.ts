/**
 * The cluster as the bucket holds it (issue 16, item 2 without node records): `podmin images`,
 * `podmin status` and apply's warning for a Podmin image reference absent from the store.
 */

import {
  type NodeRecord,
  nodeRecordKey,
  serializeNodeRecord,
} from "../../core/bucket/node_record.ts";
import { openStore } from "../../core/store/store_url.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { DEPLOYMENT_INDEX } from "../../core/bucket/bucket_layout.ts";
import assert from "node:assert/strict";
import { writeOciLayout } from "../support/oci_image.ts";
import { cli, freshBucket, HELLO, tempFile } from "./harness.ts";

async function pushHello(bucket: string, tag: string): Promise<void> {
  const dir = await Deno.makeTempDir();
  await writeOciLayout({
    dir,
    ref: tag,
    platforms: [{ arch: "amd64", files: { hello: new TextEncoder().encode(tag) } }],
  });
  const r = await cli("--bucket", bucket, "push", `oci:${dir}:${tag}`, `apps/hello:${tag}`);
  assert.equal(r.code, 0, r.err);
}

Deno.test("cli: apply warns, without failing, about a Podmin image the store lacks", async () => {
  const bucket = await freshBucket();
  const first = await cli("--bucket", bucket, "apply", "-f", HELLO);
  assert.equal(first.code, 0, first.err);
  assert.match(
    first.err,
    /^warning: deployment default\/hello: spec\.template\.spec\.containers\[0\]\.image registry\.podmin\.internal\/apps\/hello:1\.0 is not in the image store$/m,
  );
  assert.match(first.err, /hint: push it first: podmin push SOURCE apps\/hello:1\.0/);
  assert.match(first.out, /deployment default\/hello created/);
  await pushHello(bucket, "1.0");
  const second = await cli("--bucket", bucket, "apply", "-f", HELLO);
  assert.equal(second.code, 0, second.err);
  assert.doesNotMatch(second.err, /warning/);
  // Upstream references are not Podmin images: no warning.
  const upstream = await tempFile(
    (await Deno.readTextFile(HELLO)).replace(
      "registry.podmin.internal/apps/hello:1.0",
      "docker.io/library/nginx:1.27",
    ),
  );
  const third = await cli("--bucket", bucket, "apply", "-f", upstream);
  assert.doesNotMatch(third.err, /warning/);
});

Deno.test("cli: images lists repositories and tags of the store", async () => {
  const bucket = await freshBucket();
  const empty = await cli("--bucket", bucket, "images");
  assert.equal(empty.code, 0, empty.err);
  assert.match(empty.err, /no images in the store/);
  await pushHello(bucket, "1.0");
  await pushHello(bucket, "1.1");
  const r = await cli("--bucket", bucket, "images");
  assert.equal(r.code, 0, r.err);
  const lines = r.out.split("\n");
  assert.match(lines[0], /^REPOSITORY\s+TAG\s+DIGEST\s*$/);
  assert.match(lines[1], /^registry\.podmin\.internal\/apps\/hello\s+1\.0\s+sha256:[0-9a-f]{12}$/);
  assert.match(lines[2], /^registry\.podmin\.internal\/apps\/hello\s+1\.1\s+sha256:[0-9a-f]{12}$/);
  assert.equal(lines.length, 3);
  const json = JSON.parse((await cli("--bucket", bucket, "images", "-o", "json")).out);
  assert.deepEqual(
    json.map((i: { repository: string; tag: string }) => `${i.repository}:${i.tag}`),
    [
      "apps/hello:1.0",
      "apps/hello:1.1",
    ],
  );
});

Deno.test("cli: status summarises Deployments, Services, absent images and the missing node records", async () => {
  const bucket = await freshBucket();
  await cli("--bucket", bucket, "apply", "-f", HELLO);
  const r = await cli("--bucket", bucket, "status");
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^Bucket:\s+file:\/\/.*\/bucket$/m);
  assert.match(
    r.out,
    /^Nodes:\s+no node records \(no agent has reported to dns\/nodes\/\)$/m,
  );
  assert.match(r.out, /^Deployments:\s+1 \(NodeGroup default: 1\)$/m);
  assert.match(r.out, /^Services:\s+1$/m);
  assert.match(r.out, /^Images missing from the store:\s*$/m);
  assert.match(r.out, /^ {2}registry\.podmin\.internal\/apps\/hello:1\.0 \(default\/hello\)$/m);
  await pushHello(bucket, "1.0");
  const after = await cli("--bucket", bucket, "status");
  assert.match(after.out, /^Images missing from the store:\s+none$/m);
  assert.match(after.out, /^Images:\s+1 repository, 1 tag$/m);
});

Deno.test("cli: get nodes lists the agents' records (heartbeat age, stale, convergence); status sums them", async () => {
  const bucket = await freshBucket();
  const store = openStore(bucket);
  const now = Date.now();
  const record = (nodeId: string, heartbeatAgoMs: number, converged: boolean): NodeRecord => ({
    apiVersion: "podmin.dev/v1",
    kind: "NodeRecord",
    nodeGroup: "workers",
    nodeId,
    address: "2600:1f18::10",
    podPrefix: "2600:1f18:0:1:abcd::/80",
    agentVersion: "0.1.0",
    startedAt: new Date(now - 3600_000).toISOString(),
    heartbeat: new Date(now - heartbeatAgoMs).toISOString(),
    indexGeneration: 3,
    converged,
    deployments: [
      { namespace: "default", name: "web", spec: `sha256:${"a".repeat(64)}` },
      ...(converged
        ? []
        : [{ namespace: "default", name: "api", pending: "no valid workload certificate yet" }]),
    ],
  });
  for (
    const r of [
      record("node-a", 5_000, true),
      record("node-b", 60_000, false),
      record("node-c", 2 * 3600_000, true),
    ]
  ) {
    await store.put(nodeRecordKey(r), serializeNodeRecord(r));
  }
  await store.put("dns/nodes/workers/node-x.json", new TextEncoder().encode("{not json"));
  const r = await cli("--bucket", bucket, "get", "nodes", "-o", "wide");
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^NODEGROUP\s+NODE\s+ADDRESS\s+HEARTBEAT\s+STATUS\s+DEPLOYMENTS/m);
  assert.match(r.out, /^workers\s+node-a\s+2600:1f18::10\s+5s ago\s+Converged\s+1\/1/m);
  assert.match(
    r.out,
    /^workers\s+node-b\s+.*NotConverged\s+1\/2\s+.*default\/api: no valid workload certificate yet/m,
  );
  assert.match(r.out, /^workers\s+node-c\s+.*2h ago\s+Stale/m);
  assert.match(
    r.err,
    /warning: unreadable node record dns\/nodes\/workers\/node-x\.json: .*not JSON/,
  );
  const status = await cli("--bucket", bucket, "status");
  assert.match(status.out, /^Nodes:\s+2 reporting \(1 converged\), 1 stale$/m);
  const names = await cli("--bucket", bucket, "get", "nodes", "-o", "name");
  assert.equal(names.out.trim(), "node/node-a\nnode/node-b\nnode/node-c");

  // With discovery, records carry Ready Deployments and endpoints: describe and get show them.
  assert.equal((await cli("--bucket", bucket, "apply", "-f", HELLO)).code, 0);
  const withHello = {
    ...record("node-a", 1_000, true),
    deployments: [{
      namespace: "default",
      name: "hello",
      spec: `sha256:${"b".repeat(64)}`,
      ready: true,
    }],
    endpoints: { "default/hello": ["fd00:706d:6e:1::3"] },
  };
  await store.put(nodeRecordKey(withHello), serializeNodeRecord(withHello));
  const svc = await cli("--bucket", bucket, "get", "services");
  assert.match(svc.out, /^NAMESPACE\s+NAME\s+VIP\s+PORTS\s+ENDPOINTS/m);
  assert.match(svc.out, /^default\s+hello\s+\S+\s+\S+\s+1\s/m);
  const d = await cli("--bucket", bucket, "describe", "deployment", "hello");
  assert.match(d.out, /^ {2}node-a \(workers\): spec sha256:b{12}… \(not the current\), Ready$/m);
  const ds = await cli("--bucket", bucket, "describe", "service", "hello");
  assert.match(ds.out, /^Endpoints:\s+fd00:706d:6e:1::3$/m);

  // status: where each Deployment runs at its current spec.
  const index = JSON.parse(
    new TextDecoder().decode((await getIfExists(store, DEPLOYMENT_INDEX))!.body),
  );
  const current = index.deployments.find((e: { name: string }) => e.name === "hello").spec;
  const onDefault = (nodeId: string, spec: string) => ({
    ...record(nodeId, 1_000, true),
    nodeGroup: "default",
    deployments: [{ namespace: "default", name: "hello", spec, ready: true }],
  });
  for (const r of [onDefault("node-d", current), onDefault("node-e", `sha256:${"c".repeat(64)}`)]) {
    await store.put(nodeRecordKey(r), serializeNodeRecord(r));
  }
  const where = await cli("--bucket", bucket, "status");
  assert.match(
    where.out,
    /^ {2}default\/hello: current spec on 1 of 2 node\(s\) of NodeGroup default, Ready on 1 \(not yet: node-e\)$/m,
  );
});

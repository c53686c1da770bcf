/**
 * The simulated kubelet Pods API (tests/support/pods_api_server.ts) against its two clients: the
 * product's `PodsWatch` / `PodsApiClient` (agent/discovery/pods_api.ts), unchanged, and the Go
 * `podsapi` peer built from kubelet's own modules (tests/peers/podsapi: grpc-go client of
 * `k8s.io/kubelet/pkg/apis/pods/v1alpha1`, Pods decoded with `v1.Pod.Unmarshal`).
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import { decodePod, type PodInfo } from "../../agent/discovery/pod_proto.ts";
import { PodsApiClient, PodsWatch } from "../../agent/discovery/pods_api.ts";
import { fields, lengthDelimited } from "../../agent/discovery/protobuf_wire.ts";
import { UnavailableError } from "../../core/kit/errors.ts";
import { PodsApiServer, type SimPod } from "../support/pods_api_server.ts";
import { testWith } from "../support/requirements.ts";

const web: SimPod = {
  namespace: "shop",
  name: "web-node-1",
  uid: "b-uid",
  labels: { app: "web", "podmin.dev/deployment": "web" },
  ready: true,
  ips: ["fd00:706d::a", "10.0.0.7"],
};
const api: SimPod = {
  namespace: "shop",
  name: "api-node-1",
  uid: "a-uid",
  labels: { app: "api" },
  phase: "Pending",
  ready: false,
  ips: [],
};

/** What the product should read from a simulated Pod. */
function expected(p: SimPod): PodInfo {
  return {
    namespace: p.namespace,
    name: p.name,
    uid: p.uid,
    labels: p.labels ?? {},
    phase: p.phase ?? "Running",
    ready: p.ready ?? false,
    ips: p.ips ?? [],
  };
}

const byUid = (pods: PodInfo[]) => [...pods].sort((a, b) => (a.uid < b.uid ? -1 : 1));

/** A PodsWatch whose changes can be awaited (no sleeps). */
function watched(socket: string) {
  let waiters: { f: () => boolean; resolve(): void }[] = [];
  const watch = new PodsWatch({
    socket,
    maxBackoffMs: 200,
    onChange: () => {
      waiters = waiters.filter((w) => (w.f() ? (w.resolve(), false) : true));
    },
  });
  const until = (f: () => boolean) =>
    f() ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ f, resolve }));
  return { watch, until };
}

async function tempSocket(): Promise<{ dir: string; socket: string }> {
  const dir = await Deno.makeTempDir({ prefix: "podmin-podsapi-" });
  return { dir, socket: path.join(dir, "pods-api.sock") };
}

Deno.test("simulated Pods API: PodsWatch syncs, follows ADDED/MODIFIED/DELETED and resyncs after a dropped stream", async () => {
  const { dir, socket } = await tempSocket();
  const server = await PodsApiServer.start(socket);
  server.set(web);
  server.set(api);
  const { watch, until } = watched(socket);
  try {
    watch.start();
    await until(() => watch.view().synced);
    assert.deepEqual(byUid(watch.view().pods), [expected(api), expected(web)]);
    // Initial ADDED events sorted by UID, then INITIAL_SYNC_COMPLETE.
    assert.equal(server.counters.eventsSent, 3);

    // The Pending Pod turns Ready with an address: one MODIFIED event.
    const ready = { ...api, phase: "Running", ready: true, ips: ["fd00:706d::b"] };
    server.set(ready);
    await until(() => watch.view().pods.some((p) => p.uid === api.uid && p.ready));
    assert.deepEqual(byUid(watch.view().pods), [expected(ready), expected(web)]);

    // DELETED carries only name, namespace and UID; the Pod leaves the view.
    server.delete(web.uid);
    await until(() => watch.view().pods.length === 1);
    assert.deepEqual(watch.view().pods, [expected(ready)]);

    // kubelet drops the watcher; meanwhile a Pod comes and one goes. The reconnect resyncs
    // completely: the view equals kubelet's, nothing stale survives.
    server.endWatches();
    server.delete(api.uid);
    const other = { ...web, name: "web-node-2", uid: "c-uid", ips: ["fd00:706d::c"] };
    server.set(other);
    await until(() => watch.view().pods.length === 1 && watch.view().pods[0].uid === other.uid);
    assert.deepEqual(watch.view().pods, [expected(other)]);
    assert.equal(server.counters.watches, 2, "one reconnect");
  } finally {
    watch.stop();
    await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("simulated Pods API: FAILED_PRECONDITION while initializing, NOT_FOUND for an unknown UID, GetPod by UID", async () => {
  const { dir, socket } = await tempSocket();
  const server = await PodsApiServer.start(socket);
  server.set(web);
  const client = new PodsApiClient(socket);
  const generic = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
  const getPod = (uid: string) =>
    new Promise<PodInfo>((resolve, reject) =>
      generic.makeUnaryRequest(
        "/v1alpha1.Pods/GetPod",
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => new Uint8Array(b),
        lengthDelimited(1, new TextEncoder().encode(uid)),
        (err, value) => {
          if (err) return reject(err);
          // GetPodResponse { bytes pod = 1; }
          const pod = [...fields(value!)].find((f) => f.field === 1 && f.wire === 2);
          if (!pod) return reject(new Error("GetPodResponse without a pod"));
          resolve(decodePod(pod.value as Uint8Array));
        },
      )
    );
  const { watch, until } = watched(socket);
  try {
    server.initializing = true;
    await assert.rejects(client.list(), (e: Error) => {
      assert.ok(e instanceof UnavailableError);
      assert.match(e.message, /Kubelet is initializing/);
      return true;
    });
    // A watch started while kubelet initializes keeps retrying and syncs once it is ready.
    watch.start();
    await server.until(() => server.counters.watches >= 2);
    assert.match(watch.view().error ?? "", /Kubelet is initializing/);
    assert.equal(watch.view().synced, false);
    server.initializing = false;
    await until(() => watch.view().synced);
    assert.deepEqual(watch.view().pods, [expected(web)]);
    assert.deepEqual(await client.list(), [expected(web)]);

    assert.deepEqual(await getPod(web.uid), expected(web));
    await assert.rejects(getPod("nope"), (e: grpc.ServiceError) => {
      assert.equal(e.code, grpc.status.NOT_FOUND);
      return true;
    });
  } finally {
    watch.stop();
    client.close();
    generic.close();
    await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

const BIN = Deno.env.get("PODMIN_TEST_BIN") ?? "/opt/podmin-test/bin";

/** The Go podsapi peer (its directory is named by the digest of its sources). */
function podsapiBinary(): string {
  try {
    for (const e of Deno.readDirSync(path.join(BIN, "node"))) {
      if (e.name.startsWith("podsapi-")) return path.join(BIN, "node", e.name, "podsapi");
    }
  } catch { /* not built */ }
  return path.join(BIN, "node", "podsapi-missing", "podsapi");
}
const PODSAPI = podsapiBinary();

testWith(
  "simulated Pods API [real peer]: kubelet's Go client and v1.Pod.Unmarshal read the same Pods",
  { files: [new URL(`file://${PODSAPI}`)] },
  async () => {
    const { dir, socket } = await tempSocket();
    const server = await PodsApiServer.start(socket);
    server.set(web);
    server.set(api);
    try {
      const out = await new Deno.Command(PODSAPI, {
        args: ["--socket", socket, "--timeout", "10s"],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      const lines = new TextDecoder().decode(out.stdout).trim().split("\n").map((l) =>
        JSON.parse(l)
      );
      const line = (p: SimPod) => ({
        name: p.name,
        namespace: p.namespace,
        uid: p.uid,
        phase: p.phase ?? "Running",
        ready: p.ready ?? false,
        ips: p.ips?.length ? p.ips : null,
      });
      // ListPods sorted by UID, as kubelet sends them.
      assert.deepEqual(lines, [line(api), line(web)]);
      assert.equal(server.counters.lists, 1);
    } finally {
      await server.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

/**
 * The simulated kubelet Pods API (tests/support/pods_api_server.ts) against a session recorded
 * from a real kubelet (tests/node/real_node_test.ts records one: the agent's `PodsWatch` across a
 * kubelet restart mid-watch and a re-created static Pod; the recording is kept in
 * tests/mesh/fixtures/). Replayed on the simulator, the product's watch must see the same views
 * and the simulator must send the same events as kubelet did. The recorder and replay themselves
 * are checked on a session the simulator plays.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { PodsWatch } from "../../agent/discovery/pods_api.ts";
import {
  connectionLines,
  distinctViews,
  type PodsApiRecording,
  RecordingProxy,
  replayOnSimulator,
  viewLines,
} from "../support/pods_api_recorder.ts";
import { PodsApiServer, type SimPod } from "../support/pods_api_server.ts";
import { waitFor } from "../support/programs.ts";

const FIXTURE = new URL("./fixtures/kubelet_pods_api_session.json", import.meta.url);

const web: SimPod = {
  namespace: "shop",
  name: "web-node-1",
  uid: "0b1c",
  labels: { app: "web" },
  phase: "Pending",
  ready: false,
  ips: [],
};

Deno.test("pods api replay: a session played by the simulator (restart, initializing, re-created Pod) replays to the same views and events", async () => {
  const dir = await Deno.makeTempDir({ prefix: "podmin-pods-replay-" });
  const peer = path.join(dir, "peer.sock");
  let sim = await PodsApiServer.start(peer);
  const proxy = await RecordingProxy.start({
    listen: path.join(dir, "proxy.sock"),
    upstream: peer,
  });
  const views: string[][] = [];
  const watch: PodsWatch = new PodsWatch({
    socket: path.join(dir, "proxy.sock"),
    maxBackoffMs: 1_000,
    onChange: () => views.push(viewLines(watch.view().pods)),
  });
  const synced = (n: number) => () =>
    proxy.connections.filter((c) => c.events.some((e) => e.type === "INITIAL_SYNC_COMPLETE"))
      .length >= n;
  try {
    sim.set(web);
    watch.start();
    await waitFor("first sync", synced(1));
    sim.set({ ...web, phase: "Running", ready: true, ips: ["fd00::5"] });
    await waitFor("the Pod Ready", () => views.length >= 2);
    // A restart: the server gone, then starting ("initializing"), then serving again.
    await sim.stop();
    await waitFor(
      "a refused connect",
      () => proxy.connections.length >= 2 && !!proxy.connections[1].end,
    );
    sim = await PodsApiServer.start(peer);
    sim.initializing = true;
    sim.set({ ...web, phase: "Running", ready: false, ips: ["fd00::5"] });
    const n = proxy.connections.length;
    await waitFor(
      "an initializing answer",
      () => proxy.connections.length > n && !!proxy.connections[n].end,
    );
    sim.initializing = false;
    await waitFor("the resync", synced(2));
    sim.set({ ...web, phase: "Running", ready: true, ips: ["fd00::5"] });
    // The Pod re-created (same UID, as a static Pod from the same manifest), with a new address.
    sim.delete(web.uid);
    sim.set({ ...web, ips: [] });
    sim.set({ ...web, phase: "Running", ready: true, ips: ["fd00::6"] });
    await waitFor(
      "the re-created Pod's address",
      () => watch.view().pods.some((p) => p.ips[0] === "fd00::6"),
    );
  } finally {
    watch.stop();
    await waitFor("the cancel", () => proxy.connections.every((c) => c.end !== undefined))
      .finally(() => proxy.stop());
    await sim.stop();
  }
  const recording: PodsApiRecording = {
    peer: "simulator",
    connections: proxy.connections,
    views,
  };
  const kinds = recording.connections.map((c) => connectionLines(c).at(-1));
  assert.ok(kinds.includes("failed before sync: server gone"), kinds.join("; "));
  assert.ok(kinds.includes("failed before sync: initializing"), kinds.join("; "));
  try {
    const replay = await replayOnSimulator(recording, { dir });
    assert.deepEqual(distinctViews(replay.views), distinctViews(views));
    assert.deepEqual(
      replay.connections.map(connectionLines),
      recording.connections.map(connectionLines),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pods api replay: the real kubelet's recorded session replays on the simulator to the same views and events", async () => {
  const recording: PodsApiRecording = JSON.parse(await Deno.readTextFile(FIXTURE));
  const dir = await Deno.makeTempDir({ prefix: "podmin-pods-replay-" });
  try {
    const replay = await replayOnSimulator(recording, { dir });
    assert.deepEqual(distinctViews(replay.views), distinctViews(recording.views));
    assert.deepEqual(
      replay.connections.map(connectionLines),
      recording.connections.map(connectionLines),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

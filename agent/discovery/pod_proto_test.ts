import assert from "node:assert/strict";
import { decodePod, decodeWatchEvent } from "./pod_proto.ts";
import { lengthDelimited, WireError } from "./protobuf_wire.ts";
import { concatBytes } from "../../core/kit/bytes.ts";

const enc = new TextEncoder();
const str = (field: number, s: string) => lengthDelimited(field, enc.encode(s));
const join = (...parts: Uint8Array[]) =>
  concatBytes(parts, parts.reduce((n, p) => n + p.length, 0));
const msg = (field: number, ...parts: Uint8Array[]) => lengthDelimited(field, join(...parts));

/** A v1.Pod the way kubelet encodes one, with fields discovery skips in between. */
function pod(o: { ready: boolean; ips: string[] }) {
  return join(
    msg(
      1,
      str(1, "web-node-1"),
      str(2, "web-"), // generateName: skipped
      str(3, "shop"),
      str(5, "0b7c-uid"),
      Uint8Array.of(0x38, 0x05), // generation = 5 (varint): skipped
      msg(11, str(1, "app"), str(2, "web")),
      msg(11, str(1, "tier"), str(2, "front")),
    ),
    msg(2, str(1, "ignored spec")),
    msg(
      3,
      str(1, "Running"),
      msg(2, str(1, "Initialized"), str(2, "True")),
      msg(2, str(1, "Ready"), str(2, o.ready ? "True" : "False")),
      str(6, o.ips[0] ?? ""),
      ...o.ips.map((ip) => msg(12, str(1, ip))),
    ),
  );
}

Deno.test("decodePod reads name, namespace, uid, labels, phase, readiness and IPs, skipping the rest", () => {
  const p = decodePod(pod({ ready: true, ips: ["fd00::1", "10.0.0.1"] }));
  assert.deepEqual(p, {
    namespace: "shop",
    name: "web-node-1",
    uid: "0b7c-uid",
    labels: { app: "web", tier: "front" },
    phase: "Running",
    ready: true,
    ips: ["fd00::1", "10.0.0.1"],
  });
  assert.equal(decodePod(pod({ ready: false, ips: [] })).ready, false);
});

Deno.test("watch events decode; malformed bytes are refused, not half-read", () => {
  const added = join(Uint8Array.of(0x08, 0x01), msg(2, pod({ ready: true, ips: ["fd00::2"] })));
  const e = decodeWatchEvent(added);
  assert.equal(e.type, "ADDED");
  assert.deepEqual(e.pod?.ips, ["fd00::2"]);
  assert.deepEqual(decodeWatchEvent(Uint8Array.of(0x08, 0x04)), {
    type: "INITIAL_SYNC_COMPLETE",
    pod: undefined,
  });
  const whole = pod({ ready: true, ips: ["fd00::3"] });
  assert.throws(() => decodePod(whole.subarray(0, whole.length - 3)), WireError);
  assert.throws(() => decodeWatchEvent(Uint8Array.of(0x08, 0x09)), /unknown WatchPods event type/);
  assert.throws(() => decodePod(Uint8Array.of(0x0f)), WireError); // wire type 7
  assert.throws(() => decodePod(new Uint8Array()), /without metadata/);
});

Deno.test("decodePod reads annotations and kubelet's reasons: waiting, last exit, the Pod's", () => {
  const crashing = join(
    msg(
      1,
      str(1, "web-b-node-1"),
      str(5, "uid-2"),
      msg(12, str(1, "podmin.dev/spec"), str(2, "sha256:abc")),
    ),
    msg(
      3,
      str(1, "Running"),
      msg(
        8,
        str(1, "web"),
        msg(2, msg(1, str(1, "CrashLoopBackOff"), str(2, "back-off 10s"))),
        // lastState.terminated: exitCode 1 (varint), reason "Error"
        msg(3, msg(3, Uint8Array.of(0x08, 0x01), str(3, "Error"))),
      ),
      msg(8, str(1, "sidecar"), msg(2, msg(2))), // running, nothing to say
    ),
  );
  const p = decodePod(crashing);
  assert.deepEqual(p.annotations, { "podmin.dev/spec": "sha256:abc" });
  assert.equal(p.reason, "web: CrashLoopBackOff (last exit 1: Error)");
  const rejected = join(
    msg(1, str(1, "web-b-node-1"), str(5, "uid-3")),
    msg(
      3,
      str(1, "Failed"),
      str(3, "Pod was rejected: insufficient memory"),
      str(4, "OutOfmemory"),
    ),
  );
  assert.equal(decodePod(rejected).reason, "OutOfmemory: Pod was rejected: insufficient memory");
  assert.equal(decodePod(pod({ ready: true, ips: [] })).reason, undefined);
});

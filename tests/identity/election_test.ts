/**
 * Workload CA leader election with three real agents on moto (spec §8.5): exactly one leader;
 * when the leader is killed another takes over after the lease expires, with a higher term; a
 * leader paused past its lease (SIGSTOP) and resumed (SIGCONT) writes nothing after the takeover;
 * the state's leaderTerm never goes backwards and no write is lost (every S3 version is kept).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { parseLeaseDocument } from "../../core/bucket/bucket_lease.ts";
import { WORKLOAD_CA_LEASE, WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import { parseWorkloadCaState } from "../../core/bucket/workload_ca_state.ts";
import { moto } from "../support/moto.ts";
import { waitFor } from "../support/programs.ts";
import {
  caKeyFile,
  enableVersioning,
  readLease,
  readState,
  startAgent,
  stopAgent,
  type TestAgent,
  versions,
} from "./identity_cluster.ts";

Deno.test("election [moto, 3 agents]: one leader, takeover on kill, a paused leader stops writing", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  await enableVersioning(bucket);
  const key = await caKeyFile();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-election-" });
  const agents: TestAgent[] = ["node-a", "node-b", "node-c"].map((nodeId) =>
    startAgent({ bucket, nodeId, base: path.join(tmp, nodeId), keyFile: key.file })
  );
  const byId = (id: string) => agents.find((a) => a.nodeId === id)!;
  const leaders = async (among: TestAgent[]) => {
    const out: string[] = [];
    for (const a of among) if ((await a.identity())?.leader) out.push(a.nodeId);
    return out;
  };
  try {
    // 1. Exactly one leader; the lease names it; the CA is bootstrapped.
    await waitFor("a bootstrapped CA and every agent's first pass", async () => {
      const s = await readState(bucket);
      if (!s?.certificates.some((c) => c.role === "active")) return false;
      // (An agent whose first lease write lost the creation race sees the holder next pass.)
      const ids = await Promise.all(agents.map((a) => a.identity()));
      return ids.every((i) => i?.state?.certificates.length && i.lease?.holder);
    }, 60_000);
    const lease1 = (await readLease(bucket))!;
    const first = byId(lease1.holder);
    assert.deepEqual(await leaders(agents), [first.nodeId], "exactly one agent says it leads");
    for (const a of agents.filter((x) => x !== first)) {
      const id = (await a.identity())!;
      assert.equal(id.leader, false);
      assert.equal(id.lease?.holder, first.nodeId);
    }

    // 2. Kill -9 the leader: another takes over once the lease expired, with a higher term.
    await stopAgent(first, "SIGKILL");
    const rest = agents.filter((a) => a !== first);
    await waitFor("a takeover after the leader was killed", async () => {
      const l = await readLease(bucket);
      return !!l && l.holder !== first.nodeId && l.term > lease1.term;
    }, 30_000);
    const lease2 = (await readLease(bucket))!;
    const second = byId(lease2.holder);
    await waitFor("the new leader's identity.json", async () => {
      const id = await second.identity();
      return !!id?.leader && id.term === lease2.term;
    });
    await waitFor("the new leader's fence write", async () => {
      return (await readState(bucket))?.leaderTerm === lease2.term;
    });

    // 3. Pause the new leader past its lease; the third takes over; resume the paused one.
    Deno.kill(second.child.pid, "SIGSTOP");
    const third = rest.find((a) => a !== second)!;
    let lease3 = lease2;
    try {
      await waitFor("a takeover from the paused leader", async () => {
        const l = await readLease(bucket);
        if (l && l.holder === third.nodeId && l.term > lease2.term) lease3 = l;
        return lease3 !== lease2;
      }, 30_000);
      await waitFor("the third leader's fence write", async () => {
        return (await readState(bucket))?.leaderTerm === lease3.term;
      });
    } finally {
      Deno.kill(second.child.pid, "SIGCONT");
    }
    const resumedAt = new Date().toISOString();
    // The resumed agent runs passes again and reports it does not lead.
    await waitFor("the resumed agent's next pass", async () => {
      const id = await second.identity();
      return !!id && id.lastPass > resumedAt && !id.leader;
    }, 30_000);
    // The third leader keeps rotating: several more state writes, all with its term.
    const fenceGeneration = (await readState(bucket))!.generation;
    await waitFor("further rotation writes by the third leader", async () => {
      return ((await readState(bucket))?.generation ?? 0) >= fenceGeneration + 3;
    }, 60_000);
    assert.deepEqual(await leaders([second, third]), [third.nodeId]);

    // 4. The whole history of the state object: no lost or forked write, terms never go
    //    backwards, and no former leader wrote after its successor's first write.
    const states = (await versions(bucket, WORKLOAD_CA_STATE)).map(parseWorkloadCaState);
    assert.ok(states.length >= 5, `${states.length} state versions`);
    states.forEach((s, i) => assert.equal(s.generation, i + 1, "generations 1, 2, 3, … in order"));
    for (let i = 1; i < states.length; i++) {
      assert.ok(
        states[i].leaderTerm >= states[i - 1].leaderTerm,
        `leaderTerm went backwards at ${i}`,
      );
    }
    const writers = new Map<number, Set<string>>();
    for (const s of states) {
      writers.set(s.leaderTerm, (writers.get(s.leaderTerm) ?? new Set()).add(s.writtenBy!));
    }
    for (const [term, who] of writers) assert.equal(who.size, 1, `term ${term}: one writer`);
    const firstOf = (term: number) => states.findIndex((s) => s.leaderTerm === term);
    // Writes by a former leader, with its former term, after its successor's first write.
    const after = (term: number, who: string, itsTerm: number) =>
      states.slice(firstOf(term)).filter((s) => s.writtenBy === who && s.leaderTerm <= itsTerm)
        .length;
    assert.ok(firstOf(lease2.term) > 0 && firstOf(lease3.term) > firstOf(lease2.term));
    assert.equal(after(lease2.term, first.nodeId, lease1.term), 0, "the killed leader: nothing");
    assert.equal(after(lease3.term, second.nodeId, lease2.term), 0, "the paused leader: nothing");

    // The lease history: terms never go backwards; each term has one holder.
    const leases = (await versions(bucket, WORKLOAD_CA_LEASE)).map(parseLeaseDocument);
    const holders = new Map<number, Set<string>>();
    for (let i = 0; i < leases.length; i++) {
      if (i) assert.ok(leases[i].term >= leases[i - 1].term, "lease term went backwards");
      holders.set(leases[i].term, (holders.get(leases[i].term) ?? new Set()).add(leases[i].holder));
    }
    for (const [term, who] of holders) assert.equal(who.size, 1, `lease term ${term}: one holder`);

    // 5. SIGTERM the leader: it releases the lease (no delete) and exits.
    await stopAgent(third, "SIGTERM");
    assert.equal((await third.child.status).code, 0);
    // The remaining agent may take the released lease over before this read: look for the
    // released version in the lease's history rather than at the latest one.
    const afterStop = (await versions(bucket, WORKLOAD_CA_LEASE)).map(parseLeaseDocument);
    assert.ok(
      afterStop.some((l) => l.holder === third.nodeId && l.released),
      "the stopped leader wrote a released lease",
    );
    // The remaining agent takes over at once (no lease duration to wait).
    await waitFor("a takeover of the released lease", async () => {
      const l = await readLease(bucket);
      return !!l && l.holder === second.nodeId && !l.released;
    }, 10_000);
  } finally {
    for (const a of agents) await stopAgent(a, "SIGKILL");
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    await Deno.remove(key.dir, { recursive: true }).catch(() => {});
  }
});

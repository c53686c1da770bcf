/**
 * A kubelet without the local Pods API (the default catalogue once pinned 1.35.1, which has none):
 * the agent says so in one line, naming the kubelet version, in its status, its node record and
 * `podmin get nodes`, instead of reporting zero endpoints as if healthy. A kubelet whose socket
 * does not answer is named the same way with the watch's error.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { createBucket, openStore } from "../../core/store/store_url.ts";
import { parseNodeRecord } from "../../core/bucket/node_record.ts";
import {
  agent,
  meshAgentArgs,
  nodeAgentArgs,
  podmin,
  spawnAgent,
  waitFor,
} from "../support/programs.ts";
import { testClusterCa } from "./discovery_cluster.ts";

async function runUntilProblem(kubeletVersion: string | undefined, want: RegExp): Promise<void> {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-podsapi-problem-" });
  const bucket = `file://${tmp}/bucket`;
  await createBucket(bucket);
  const caFile = path.join(tmp, "cluster-ca.pem");
  await Deno.writeTextFile(caFile, (await testClusterCa()).pem, { mode: 0o600 });
  const child = spawnAgent([
    ...nodeAgentArgs({ bucket, nodeGroup: "workers", base: tmp }),
    ...meshAgentArgs({ nodeId: "i-0podsapi", caFile, podsSocket: `${tmp}/no-kubelet.sock` }),
    "--registry-listen",
    "off",
    ...(kubeletVersion ? ["--kubelet-version", kubeletVersion] : []),
  ]);
  const store = openStore(bucket);
  const key = "dns/nodes/workers/i-0podsapi.json";
  try {
    let problem: string | undefined;
    await waitFor("a node record naming the problem", async () => {
      const got = await store.get(key).catch(() => undefined);
      if (!got || got.notModified) return false;
      problem = parseNodeRecord(got.body, key).problem;
      return problem !== undefined;
    }, 60_000);
    assert.match(problem!, want);
    assert.ok(!problem!.includes("\n"), "one line");
    const nodes = await podmin(["--bucket", bucket, "get", "nodes"]);
    assert.equal(nodes.code, 0, nodes.stderr);
    assert.match(nodes.stdout, /i-0podsapi/);
    const warning = nodes.stderr.split("\n").filter((l) =>
      l.startsWith("warning: node i-0podsapi:")
    );
    assert.equal(warning.length, 1, nodes.stderr);
    assert.match(warning[0], want);
    await waitFor("the agent's status", async () => {
      const s = await agent(["status", "--state-dir", `${tmp}/state`]);
      return s.stdout.split("\n").some((l) => l.startsWith("Discovery:") && want.test(l));
    });
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await child.stderr.cancel().catch(() => {});
    await Deno.remove(tmp, { recursive: true });
  }
}

Deno.test("discovery: a kubelet older than 1.36 is named by the status, the node record and get nodes", async () => {
  await runUntilProblem(
    "1.35.1",
    /kubelet 1\.35\.1 has no local Pods API \(it needs 1\.36 with gate PodsAPI, or 1\.37\+\)/,
  );
});

Deno.test("discovery: a Pods API socket that does not answer is named with the kubelet version", async () => {
  await runUntilProblem(
    "1.36.3",
    /kubelet 1\.36\.3 Pods API \S+no-kubelet\.sock unreachable \(.+\)/,
  );
});

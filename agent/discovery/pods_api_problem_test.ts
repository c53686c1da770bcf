import assert from "node:assert/strict";
import { kubeletMinor, lacksPodsApi, podsApiProblem } from "./pods_api_problem.ts";

const socket = "/var/lib/kubelet/pods-api/pods-api.sock";

Deno.test("pods api problem: a kubelet older than 1.36 is named at once, on one line", () => {
  const p = podsApiProblem({ kubeletVersion: "1.35.1", synced: false, socket });
  assert.equal(
    p,
    "kubelet 1.35.1 has no local Pods API (it needs 1.36 with gate PodsAPI, or 1.37+): " +
      "this node reports no Service endpoints",
  );
  // Even a synced view of an old kubelet cannot be (it has no socket): the version decides.
  assert.match(podsApiProblem({ kubeletVersion: "v1.30.0", synced: true, socket })!, /1\.30\.0/);
});

Deno.test("pods api problem: 1.36+ is fine until the watch fails, then the error is named", () => {
  assert.equal(podsApiProblem({ kubeletVersion: "1.36.3", synced: false, socket }), undefined);
  assert.equal(podsApiProblem({ kubeletVersion: "1.37.2", synced: true, socket }), undefined);
  const p = podsApiProblem({
    kubeletVersion: "1.36.3",
    synced: false,
    error: "14 UNAVAILABLE: No connection established.\nLast error: connect ENOENT",
    socket,
  })!;
  assert.ok(!p.includes("\n"), "one line");
  assert.match(
    p,
    /^kubelet 1\.36\.3 Pods API \/var\/lib\/kubelet\/pods-api\/pods-api\.sock unreachable \(14 UNAVAILABLE: .* ENOENT\)/,
  );
  assert.match(podsApiProblem({ synced: false, error: "x", socket })!, /^kubelet Pods API /);
  // A synced view clears it.
  assert.equal(podsApiProblem({ synced: true, error: "old", socket }), undefined);
});

Deno.test("pods api problem: versions are parsed strictly", () => {
  assert.deepEqual(kubeletMinor("1.36.3"), [1, 36]);
  assert.deepEqual(kubeletMinor("v1.37.2"), [1, 37]);
  assert.equal(kubeletMinor("1.36"), undefined);
  assert.equal(kubeletMinor("latest"), undefined);
});

Deno.test("lacksPodsApi: only a known kubelet older than 1.36", () => {
  assert.equal(lacksPodsApi("1.35.4"), true);
  assert.equal(lacksPodsApi("v1.36.3"), false);
  assert.equal(lacksPodsApi("1.37.0"), false);
  assert.equal(lacksPodsApi(undefined), false);
});

/**
 * `podmin rollout history | undo | status | pause | resume` on a file:// bucket: revisions recorded
 * by apply, undo to the one before or to a named one (each a new revision), the errors that say
 * what to do, a status with no node reporting, pause and resume (the rollout object).
 */

import assert from "node:assert/strict";
import { cli, freshBucket, tempFile } from "./harness.ts";

const web = (tag: string) =>
  tempFile(`apiVersion: podmin.dev/v1
kind: Deployment
metadata:
  name: web
spec:
  nodeGroup: workers
  template:
    spec:
      containers:
        - name: web
          image: registry.example/web:${tag}
`);

Deno.test("rollout: history counts every new spec, undo applies an earlier one as a new revision", async () => {
  const bucket = await freshBucket();
  const apply = async (tag: string) => {
    const r = await cli("--bucket", bucket, "apply", "-f", await web(tag));
    assert.equal(r.code, 0, r.err);
    return r.out;
  };
  assert.match(await apply("1"), /deployment default\/web created \(revision 1\)$/);
  const second = await apply("2");
  assert.match(
    second,
    /configured \(revision 2\)\n {2}rollout started; follow it: podmin rollout status web -n default$/,
  );
  assert.match(await apply("2"), /unchanged$/, "the same spec is no new revision");
  await apply("3");

  const undo = await cli("--bucket", bucket, "rollout", "undo", "web");
  assert.equal(undo.code, 0, undo.err);
  assert.match(undo.out, /rolled back to revision 2 \(now revision 4\)/);
  const to = await cli(
    "--bucket",
    bucket,
    "rollout",
    "undo",
    "deployment/web",
    "--to-revision",
    "1",
  );
  assert.equal(to.code, 0, to.err);
  assert.match(to.out, /rolled back to revision 1 \(now revision 5\)/);

  const history = await cli("--bucket", bucket, "rollout", "history", "web");
  assert.equal(history.code, 0, history.err);
  const lines = history.out.trim().split("\n");
  assert.match(lines[0], /^REVISION\s+APPLIED\s+SPEC\s+IMAGES/);
  assert.deepEqual(
    lines.slice(1).map((l) =>
      l.split(/\s+/).filter((x) => !x.startsWith("sha256") && !/^\d{4}-/.test(x)).join(" ")
    ),
    [
      "1 registry.example/web:1",
      "2 registry.example/web:2",
      "3 registry.example/web:3",
      "4 registry.example/web:2",
      "5 registry.example/web:1 (current)",
    ],
  );

  const missing = await cli("--bucket", bucket, "rollout", "undo", "web", "--to-revision", "9");
  assert.equal(missing.code, 2);
  assert.match(missing.err, /no such revision.*\n.*the kept revisions: 1, 2, 3, 4, 5/);
  const status = await cli("--bucket", bucket, "rollout", "status", "web");
  assert.equal(status.code, 3, "in progress: no node reports");
  assert.match(status.out, /no live node of its NodeGroup reports; 0 of 0 node\(s\) up to date/);
  const unknown = await cli("--bucket", bucket, "rollout", "status", "api");
  assert.equal(unknown.code, 1);
  assert.match(unknown.err, /deployment default\/api not found/);
});

Deno.test("rollout: a Deployment with a single revision has nothing to undo", async () => {
  const bucket = await freshBucket();
  assert.equal((await cli("--bucket", bucket, "apply", "-f", await web("1"))).code, 0);
  const undo = await cli("--bucket", bucket, "rollout", "undo", "web");
  assert.equal(undo.code, 2);
  assert.match(undo.err, /has no earlier revision/);
  const usage = await cli("--bucket", bucket, "rollout", "restart", "web");
  assert.equal(usage.code, 2);
  assert.match(usage.err, /expected: rollout status\|history\|undo\|pause\|resume DEPLOYMENT/);
});

Deno.test("rollout: pause and resume write the Deployment's rollout object; status says paused", async () => {
  const bucket = await freshBucket();
  assert.equal((await cli("--bucket", bucket, "apply", "-f", await web("1"))).code, 0);
  const pause = await cli("--bucket", bucket, "rollout", "pause", "web");
  assert.equal(pause.code, 0, pause.err);
  assert.match(pause.out, /deployment default\/web rollout paused; continue it with/);
  const again = await cli("--bucket", bucket, "rollout", "pause", "web");
  assert.match(again.out, /rollout paused already/);
  const key = new URL(`${bucket}/objects/dns.d/rollouts.d/default.d/web.json.o`).pathname;
  assert.ok(await Deno.stat(key), "the object is under dns/rollouts/");
  const status = await cli("--bucket", bucket, "rollout", "status", "web", "-o", "json");
  assert.equal(JSON.parse(status.out).paused, true);
  const text = await cli("--bucket", bucket, "rollout", "status", "web");
  assert.match(text.out, /paused: no node is admitted until 'podmin rollout resume web'/);
  const resume = await cli("--bucket", bucket, "rollout", "resume", "web");
  assert.match(resume.out, /deployment default\/web rollout resumed$/m);
  const after = await cli("--bucket", bucket, "rollout", "status", "web", "-o", "json");
  assert.equal(JSON.parse(after.out).paused, false);
  const unknown = await cli("--bucket", bucket, "rollout", "pause", "api");
  assert.equal(unknown.code, 1);
  assert.match(unknown.err, /deployment default\/api not found/);
});

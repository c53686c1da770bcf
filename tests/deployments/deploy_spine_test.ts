/**
 * The deploy spine end to end: `podmin apply/delete` writes desired state,
 * `podmin-agent run` converges a node's static Pod directory to it. Run
 * against S3 on moto and against the filesystem store.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { DEPLOYMENT_INDEX } from "../../core/bucket/bucket_layout.ts";
import { parseDeploymentIndex } from "../../core/bucket/deployment_index.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { createBucket, openStore } from "../../core/store/store_url.ts";
import { moto } from "../support/moto.ts";
import { agent, nodeAgentArgs, podmin, spawnAgent, waitFor } from "../support/programs.ts";

interface Cluster {
  url: string;
  store: ObjectStore;
  tmp: string;
  cleanup(): Promise<void>;
}

const backends: { name: string; open(): Promise<Cluster> }[] = [
  {
    name: "s3 (moto)",
    async open() {
      const m = await moto();
      await m.reset();
      const bucket = await m.createBucket();
      const tmp = await Deno.makeTempDir({ prefix: "podmin-spine-" });
      const url = `s3://${bucket}`;
      return {
        url,
        store: openStore(url),
        tmp,
        cleanup: () => Deno.remove(tmp, { recursive: true }),
      };
    },
  },
  {
    name: "filesystem",
    async open() {
      await moto(); // the agent's value provider still talks to (moto's) SSM
      const tmp = await Deno.makeTempDir({ prefix: "podmin-spine-" });
      const url = `file://${tmp}/bucket`;
      await createBucket(url);
      return {
        url,
        store: openStore(url),
        tmp,
        cleanup: () => Deno.remove(tmp, { recursive: true }),
      };
    },
  },
];

function deploymentYaml(
  name: string,
  nodeGroup: string,
  image = "registry.podmin.internal/apps/web:1",
) {
  return `apiVersion: podmin.dev/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  nodeGroup: ${nodeGroup}
  template:
    metadata:
      labels: {app: ${name}}
    spec:
      containers:
        - name: main
          image: ${image}
          ports: [{containerPort: 8080}]
`;
}

/** Node directories of one simulated node. */
function node(tmp: string, name: string) {
  const base = path.join(tmp, name);
  return {
    manifests: path.join(base, "manifests"),
    args: (c: Cluster, nodeGroup: string) => [
      ...nodeAgentArgs({ bucket: c.url, nodeGroup, base }),
      "--registry-listen",
      "off",
    ],
    state: path.join(base, "state"),
  };
}

async function writeFile(dir: string, name: string, text: string): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  const p = path.join(dir, name);
  await Deno.writeTextFile(p, text);
  return p;
}

async function listDir(dir: string): Promise<string[]> {
  try {
    return (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();
  } catch {
    return [];
  }
}

for (const backend of backends) {
  const t = (name: string, fn: (c: Cluster) => Promise<void>) =>
    Deno.test(`deploy spine [${backend.name}]: ${name}`, async () => {
      const c = await backend.open();
      try {
        await fn(c);
      } finally {
        await c.cleanup();
      }
    });

  t(
    "apply → matching agent writes the manifest, others nothing; delete removes it; foreign files untouched",
    async (c) => {
      const file = await writeFile(c.tmp, "web.yaml", deploymentYaml("web", "workers"));
      const applied = await podmin(["--bucket", c.url, "apply", "-f", file]);
      assert.equal(applied.code, 0, applied.stderr);
      assert.match(applied.stdout, /deployment default\/web created/);

      const worker = node(c.tmp, "worker-1");
      const other = node(c.tmp, "edge-1");
      const foreign = await writeFile(
        worker.manifests,
        "kube-tunnel.yaml",
        "apiVersion: v1\nkind: Pod\n",
      );
      const lookalike = await writeFile(
        worker.manifests,
        "podmin_default_stray.json",
        JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "stray" } }),
      );

      const w = await agent([...worker.args(c, "workers"), "--once"]);
      assert.equal(w.code, 0, w.stderr);
      const o = await agent([...other.args(c, "edge"), "--once"]);
      assert.equal(o.code, 0, o.stderr);
      assert.deepEqual(await listDir(other.manifests), []);
      assert.deepEqual(await listDir(worker.manifests), [
        "kube-tunnel.yaml",
        "podmin_default_stray.json",
        "podmin_default_web.json",
      ]);

      const pod = JSON.parse(
        await Deno.readTextFile(path.join(worker.manifests, "podmin_default_web.json")),
      );
      assert.equal(pod.kind, "Pod");
      assert.equal(pod.metadata.name, "web");
      assert.equal(pod.metadata.namespace, "default");
      assert.equal(pod.metadata.annotations["podmin.dev/owner"], "podmin-agent");
      assert.match(pod.metadata.annotations["podmin.dev/spec"], /^sha256:[0-9a-f]{64}$/);
      assert.equal(pod.metadata.labels.app, "web");
      assert.equal(pod.metadata.labels["podmin.dev/nodegroup"], "workers");
      assert.equal(pod.spec.containers[0].image, "registry.podmin.internal/apps/web:1");
      const tlsMount = pod.spec.containers[0].volumeMounts.find((m: { name: string }) =>
        m.name === "podmin-tls"
      );
      assert.deepEqual(tlsMount, {
        name: "podmin-tls",
        mountPath: "/var/run/secrets/podmin.dev/tls",
        readOnly: true,
      });

      const deleted = await podmin(["--bucket", c.url, "delete", "deployment", "web"]);
      assert.equal(deleted.code, 0, deleted.stderr);
      assert.equal((await agent([...worker.args(c, "workers"), "--once"])).code, 0);
      assert.deepEqual(await listDir(worker.manifests), [
        "kube-tunnel.yaml",
        "podmin_default_stray.json",
      ]);
      assert.equal(await Deno.readTextFile(foreign), "apiVersion: v1\nkind: Pod\n");
      assert.ok((await Deno.readTextFile(lookalike)).includes("stray"));

      const again = await podmin(["--bucket", c.url, "delete", "deployment", "web"]);
      assert.equal(again.code, 1);
      assert.match(again.stderr, /error: deployment default\/web not found\nhint: /);
    },
  );

  t("apply is idempotent and an agent restart rewrites nothing unchanged", async (c) => {
    const file = await writeFile(
      c.tmp,
      "two.yaml",
      deploymentYaml("a", "workers") + "---\n" + deploymentYaml("b", "workers"),
    );
    assert.equal((await podmin(["--bucket", c.url, "apply", "-f", file])).code, 0);
    const before = (await c.store.head(DEPLOYMENT_INDEX)).etag;
    const second = await podmin(["--bucket", c.url, "apply", "-f", file]);
    assert.equal(second.code, 0);
    assert.match(second.stdout, /deployment default\/a unchanged\ndeployment default\/b unchanged/);
    assert.equal((await c.store.head(DEPLOYMENT_INDEX)).etag, before, "no index write");

    const n = node(c.tmp, "n");
    assert.equal((await agent([...n.args(c, "workers"), "--once"])).code, 0);
    const stat = async () =>
      await Promise.all(["podmin_default_a.json", "podmin_default_b.json"].map(async (f) => {
        const s = await Deno.stat(path.join(n.manifests, f));
        return `${s.ino}:${s.mtime?.getTime()}`;
      }));
    const first = await stat();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal((await agent([...n.args(c, "workers"), "--once"])).code, 0);
    assert.deepEqual(await stat(), first, "a restarted agent rewrote unchanged manifests");
  });

  t(
    "a truncated index or a corrupt spec keeps the previous manifests and reports why",
    async (c) => {
      const file = await writeFile(
        c.tmp,
        "web.yaml",
        deploymentYaml("web", "workers") + "---\n" + deploymentYaml("api", "workers"),
      );
      assert.equal((await podmin(["--bucket", c.url, "apply", "-f", file])).code, 0);
      const n = node(c.tmp, "n");
      assert.equal((await agent([...n.args(c, "workers"), "--once"])).code, 0);
      const good = await getIfExists(c.store, DEPLOYMENT_INDEX);

      await c.store.put(DEPLOYMENT_INDEX, good!.body.subarray(0, good!.body.length / 2));
      const bad = await agent([...n.args(c, "workers"), "--once"]);
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /rejected deployments\/index.json/);
      assert.deepEqual(await listDir(n.manifests), [
        "podmin_default_api.json",
        "podmin_default_web.json",
      ]);
      const status = await agent(["status", "--state-dir", n.state]);
      assert.equal(status.code, 1);
      assert.match(status.stdout, /Converged: {3}no/);
      assert.match(status.stdout, /Error: .*not valid JSON/);

      // Restore the index, then corrupt one spec object: only that Deployment is held back.
      await c.store.put(DEPLOYMENT_INDEX, good!.body);
      const index = parseDeploymentIndex(good!.body);
      const web = index.deployments.find((e) => e.name === "web")!;
      await c.store.put(
        `deployments/specs/sha256/${web.spec.slice(7)}.json`,
        new TextEncoder().encode('{"x":1}'),
      );
      const changed = await writeFile(
        c.tmp,
        "api2.yaml",
        deploymentYaml("api", "workers", "registry.podmin.internal/apps/api:2"),
      );
      assert.equal((await podmin(["--bucket", c.url, "apply", "-f", changed])).code, 0);
      const partial = await agent([...n.args(c, "workers"), "--once"]);
      assert.equal(partial.code, 1);
      assert.match(partial.stderr, /default\/web: .*content has sha256/);
      const api = await Deno.readTextFile(path.join(n.manifests, "podmin_default_api.json"));
      assert.match(api, /apps\/api:2/, "the healthy Deployment still converged");
      assert.ok(await Deno.stat(path.join(n.manifests, "podmin_default_web.json")), "web kept");
    },
  );

  t("bad operator input: precise errors, nothing written", async (c) => {
    const file = await writeFile(
      c.tmp,
      "bad.yaml",
      deploymentYaml("ok", "workers") +
        "---\napiVersion: podmin.dev/v1\nkind: Deployment\nmetadata: {name: Bad}\nspec: {}\n",
    );
    const r = await podmin(["--bucket", c.url, "apply", "-f", file]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /bad\.yaml:\d+:\d+: document 2: metadata\.name: invalid value "Bad"/);
    assert.match(r.stderr, /bad\.yaml:\d+:\d+: document 2: spec\.nodeGroup: required/);
    assert.doesNotMatch(r.stderr, /^ {4}at /m, "no stack trace without --debug");
    assert.equal(await getIfExists(c.store, DEPLOYMENT_INDEX), undefined);
    const usage = await podmin(["--bucket", c.url, "apply"]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /no resource file given/);
  });
}

Deno.test("deploy spine [s3 (moto)]: 2 concurrent CLIs × 50 applies → the index holds all 100", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-race-" });
  try {
    for (let i = 0; i < 100; i++) {
      await writeFile(tmp, `d${i}.yaml`, deploymentYaml(`d${i}`, "workers"));
    }
    const entry = new URL("../../cli/main.ts", import.meta.url).pathname;
    const cli = (from: number) =>
      new Deno.Command("bash", {
        args: [
          "-c",
          `for i in $(seq ${from} ${
            from + 49
          }); do "$DENO" run -A "$ENTRY" --bucket s3://${bucket} apply -f "${tmp}/d$i.yaml" >/dev/null || exit 1; done`,
        ],
        env: { DENO: Deno.execPath(), ENTRY: entry },
        stdout: "null",
        stderr: "piped",
      }).output();
    const [a, b] = await Promise.all([cli(0), cli(50)]);
    assert.equal(a.code, 0, new TextDecoder().decode(a.stderr));
    assert.equal(b.code, 0, new TextDecoder().decode(b.stderr));
    const index = parseDeploymentIndex(
      (await getIfExists(openStore(`s3://${bucket}`), DEPLOYMENT_INDEX))!.body,
    );
    assert.equal(index.deployments.length, 100);
    assert.equal(index.generation, 100, "one index write per apply");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("deploy spine [s3 (moto)]: moto down while the agent runs, then the bucket missing → nothing removed; it converges after", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-outage-" });
  const c: Cluster = {
    url: `s3://${bucket}`,
    store: openStore(`s3://${bucket}`),
    tmp,
    cleanup: async () => {},
  };
  const n = node(tmp, "n");
  const child = spawnAgent([...n.args(c, "workers"), "--interval", "200ms"]);
  const manifest = path.join(n.manifests, "podmin_default_web.json");
  const statusFile = path.join(n.state, "status.json");
  /** Waits for a status written by a pass that began after `since` and whose errors match. */
  const statusAfter = (what: string, since: number, errors: RegExp) => {
    let last = "";
    return waitFor(what, async () => {
      try {
        last = await Deno.readTextFile(statusFile);
        const s = JSON.parse(last);
        return Date.parse(s.lastAttempt) > since && errors.test(s.errors.join("\n")) &&
          s.converged === false;
      } catch {
        return false; // not written yet, or caught mid-rename
      }
    }, 60_000).catch((err) => {
      throw new Error(`${(err as Error).message}; last status: ${last}`);
    });
  };
  try {
    const file = await writeFile(tmp, "web.yaml", deploymentYaml("web", "workers"));
    assert.equal((await podmin(["--bucket", c.url, "apply", "-f", file])).code, 0);
    await waitFor(
      "the manifest",
      async () => (await listDir(n.manifests)).includes("podmin_default_web.json"),
    );
    const before = await Deno.readTextFile(manifest);

    const down = Date.now();
    await m.stop();
    // The agent has polled the unreachable endpoint and reported it.
    await statusAfter("the agent reporting the outage", down, /unavailable/);
    assert.equal(await Deno.readTextFile(manifest), before, "manifest kept during the outage");

    // moto comes back empty: the bucket is missing until the operator restores it.
    const up = Date.now();
    await m.start();
    await statusAfter("the agent reporting the missing bucket", up, /does not exist/);
    assert.equal(
      await Deno.readTextFile(manifest),
      before,
      "manifest kept while the bucket is missing",
    );
    await m.createBucket(bucket);
    const file2 = await writeFile(
      tmp,
      "api.yaml",
      deploymentYaml("web", "workers") + "---\n" + deploymentYaml("api", "workers"),
    );
    assert.equal((await podmin(["--bucket", c.url, "apply", "-f", file2])).code, 0);
    // Between the bucket's return and this apply the index is absent, which is the empty index
    // (spec §5.2): the agent may remove web and write it again. The status file can be the
    // previous pass's while a pass writes api before web, so both files are waited for.
    await waitFor("convergence after the outage", async () => {
      const s = JSON.parse(await Deno.readTextFile(statusFile));
      const files = await listDir(n.manifests);
      return s.converged && files.includes("podmin_default_api.json") &&
        files.includes("podmin_default_web.json");
    }, 60_000);
    assert.equal(await Deno.readTextFile(manifest), before);
  } finally {
    // An agent that already died is reported below with its log (not as a failed kill).
    try {
      child.kill("SIGTERM");
    } catch { /* exited */ }
    const out = await child.output();
    const log = new TextDecoder().decode(out.stderr);
    await Deno.remove(tmp, { recursive: true });
    assert.equal(out.code, 0, log);
    // Logged once per kind of problem, not once per failed poll (the outage and the missing
    // bucket are one kind: reading the index); then its recovery.
    const problems = log.split("\n").filter((l) => l.includes('"msg":"problem"'))
      .map((l) => JSON.parse(l).kind as string);
    assert.equal(
      problems.filter((k) => k === "reading deployments/index.json").length,
      1,
      `the index problem is logged once:\n${log}`,
    );
    assert.equal(new Set(problems).size, problems.length, `a kind logged twice:\n${log}`);
    assert.match(log, /"msg":"recovered","kind":"reading deployments\/index.json"/);
  }
});

/**
 * kill -9 of `podmin apply`, `podmin delete` and `podmin push` at seeded random moments past the
 * command's first change to the bucket, which the test sees by polling it (the commands print no
 * progress for small objects) — 0–20 ms after it, or at a random moment across the rest of the
 * run as measured by a first run — on the filesystem store or on moto. After every kill the
 * bucket must be sound (`bucket_checks.ts`: indexes parse, specs exist with their digests, no
 * torn object, no tag pointing at a missing manifest or blob), and a re-run of the same command
 * must succeed and leave the state it asked for.
 */

import * as path from "node:path";
import { createFsBucket } from "../../core/store/fs_store.ts";
import { readDeploymentIndex } from "../../core/bucket/deployment_index.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { readSpec } from "../../core/bucket/spec_objects.ts";
import { openStore } from "../../core/store/store_url.ts";
import { moto } from "../support/moto.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { agent as runAgent, podmin, type Ran } from "../support/programs.ts";
import { type Attack, Findings, Rand } from "./campaign.ts";
import { bucketProblems } from "./bucket_checks.ts";
import { killAfter, timeRun } from "./kill_run.ts";

const DEPLOYMENTS = Array.from({ length: 12 }, (_, i) => `app${i}`);

function resources(tag: string): string {
  const docs = DEPLOYMENTS.map((name) =>
    `apiVersion: podmin.dev/v1\nkind: Deployment\nmetadata: {name: ${name}, labels: {app: ${name}}}\n` +
    `spec:\n  nodeGroup: workers\n  template:\n    metadata: {labels: {app: ${name}}}\n` +
    `    spec: {containers: [{name: c, image: "registry.podmin.internal/apps/${name}:${tag}"}]}\n`
  );
  docs.push(
    "apiVersion: podmin.dev/v1\nkind: Service\nmetadata: {name: web}\n" +
      "spec: {selector: {app: app0}, ports: [{port: 80, targetPort: 8080}]}\n",
  );
  return docs.join("---\n");
}

/** Incompressible bytes from the seeded generator (a layer that takes a while to upload). */
function noise(r: Rand, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 4) {
    const v = Math.floor(r.next() * 2 ** 32);
    b[i] = v & 255;
    b[i + 1] = (v >>> 8) & 255;
    b[i + 2] = (v >>> 16) & 255;
    b[i + 3] = v >>> 24;
  }
  return b;
}

type Command = "apply" | "delete" | "push";

/**
 * The commands of the kill trials, in turn (after the three measuring runs). Pushes come most
 * often: on the filesystem store an apply's writes take a few milliseconds, too short for a kill
 * aimed at them by polling, while a push uploads megabytes on either store.
 */
const ROTATION: readonly Command[] = ["push", "apply", "push", "delete", "push", "apply"];

/**
 * Builds the attack on `backend`: "fs" (a filesystem bucket) or "moto" (S3), at most `trials`
 * trials (the first run of each command measures it; every later one is killed).
 */
export function killCliAttack(backend: "fs" | "moto", options: { trials: number }): Attack {
  return {
    name: `kill9-cli-${backend}`,
    tries: `kill -9 of podmin apply, delete and push at random moments (${backend} store)`,
    async run({ cases, seed, deadline }) {
      const t0 = Date.now();
      const findings = new Findings();
      const r = new Rand(seed);
      const tmp = await Deno.makeTempDir({ prefix: `podmin-fault-kill-${backend}-` });
      let url: string;
      let store: ObjectStore;
      if (backend === "fs") {
        url = `file://${tmp}/bucket`;
        await createFsBucket(`${tmp}/bucket`);
        store = openStore(url);
      } else {
        const m = await moto();
        url = `s3://${await m.createBucket()}`;
        store = openStore(url, { region: "us-east-1" });
      }
      const files = { v1: path.join(tmp, "v1.yaml"), v2: path.join(tmp, "v2.yaml") };
      await Deno.writeTextFile(files.v1, resources("1"));
      await Deno.writeTextFile(files.v2, resources("2"));
      const layout = path.join(tmp, "layout");
      const images = {
        one: await writeOciLayout({
          dir: layout,
          ref: "one",
          platforms: [{
            arch: "amd64",
            files: Object.fromEntries(
              Array.from({ length: 6 }, (_, i) => [`a${i}.bin`, noise(r, 1 << 20)]),
            ),
          }],
        }),
        multi: await writeOciLayout({
          dir: layout,
          ref: "multi",
          platforms: [
            { arch: "amd64", files: { "b.bin": noise(r, 2 << 20) } },
            { arch: "arm64", files: { "c.bin": noise(r, 2 << 20) } },
          ],
        }),
      };
      // writeOciLayout rewrites index.json per image; name both refs.
      await fixIndex(layout, images);

      const stats = {
        kills: 0,
        killed: 0,
        afterWrites: 0,
        atWrite: 0,
        finished: 0,
        byCommand: { apply: 0, delete: 0, push: 0 },
      };
      // Per command, from its measuring run: its duration and when its first write was seen.
      const durations = new Map<Command, { ms: number; firstWriteMs: number }>();
      const startup = await startupMs();
      let tried = 0;
      let current: "v1" | "v2" = "v1";
      try {
        for (; tried < Math.min(cases, options.trials) && Date.now() < deadline; tried++) {
          const command: Command = tried < 3
            ? (["apply", "push", "delete"] as const)[tried]
            : ROTATION[(tried - 3) % ROTATION.length];
          const observed = command !== "delete" && r.int(3) > 0;
          // A kill aimed at a write needs a command that writes: the other variant, and for
          // a push an image store emptied first (so every blob is uploaded again).
          const variant: "v1" | "v2" = observed
            ? (current === "v1" ? "v2" : "v1")
            : r.pick(["v1", "v2"] as const);
          const victim = r.pick(DEPLOYMENTS);
          const image = r.pick(["one", "multi"] as const);
          const tag = r.pick(["1", "2"]);
          const args = [
            "--bucket",
            url,
            ...(
              command === "apply"
                ? ["apply", "-f", files[variant]]
                : command === "delete"
                ? ["delete", "deployment", victim]
                : ["push", `oci:${layout}:${image}`, `apps/fuzz:${tag}`]
            ),
          ];
          const what = `trial ${tried} (seed ${seed}): ${args.slice(2).join(" ")}`;
          const measured = durations.get(command);
          if (measured === undefined) {
            // The first run of each command measures it (and sets up state for the others).
            const start = await fingerprint(store);
            const ran = await timeRun(args, {
              wrote: async () => await fingerprint(store) !== start,
            });
            durations.set(command, {
              ms: ran.ms,
              firstWriteMs: Math.min(ran.firstWriteMs ?? startup, ran.ms),
            });
            if (command === "apply") current = variant;
            if (ran.code !== 0 && command !== "delete") {
              findings.add("setup run failed", `${what}: ${ran.stderr.trim()}`);
            }
            continue;
          }
          // Every kill is aimed past the command's first change to the bucket (seen by polling
          // it; a kill before any write tests nothing): two thirds 0–20 ms after it, the others
          // at a random moment across the rest of the measured run.
          const d = measured.ms;
          const spread = Math.floor((d - measured.firstWriteMs) * 1.2 * r.next());
          // A push starts from an emptied image store: with every blob already there, its first
          // write would be its last (the tag), and no kill could land mid-run.
          if (command === "push") {
            for await (const info of store.list("apps/")) await store.delete(info.key);
          }
          const before = await fingerprint(store);
          const afterMs = observed ? r.int(20) : spread;
          const k = await killAfter(args, {
            ms: 10 * d,
            when: { check: async () => await fingerprint(store) !== before, afterMs },
          });
          if (k.marked && k.killed) stats.atWrite++;
          stats.kills++;
          const wrote = await fingerprint(store) !== before;
          if (k.killed) stats.killed++;
          else stats.finished++;
          if (k.killed && wrote) stats.afterWrites++;
          stats.byCommand[command]++;
          console.log(
            `  ${what} (kill ${afterMs} ms after its first write): ` +
              (k.killed
                ? (wrote ? "killed mid-run" : "killed before any write")
                : "finished first"),
          );
          for (const p of await bucketProblems(store)) {
            findings.add(
              "after kill",
              `${what} killed ${afterMs} ms after its first write: ${p}`,
            );
          }
          const again = await podmin(args);
          const problem = await converged({
            store,
            command,
            again,
            victim,
            variant,
            image,
            tag,
            images,
          });
          if (problem) findings.add("re-run did not converge", `${what}: ${problem}`);
          if (command === "apply") current = variant;
          for (const p of await bucketProblems(store)) {
            findings.add("after re-run", `${what}: ${p}`);
          }
        }
      } finally {
        await Deno.remove(tmp, { recursive: true });
      }
      console.log(
        `  measured: start-up ${startup} ms, ${
          [...durations].map(([c, m]) => `${c} ${m.ms} ms (first write at ${m.firstWriteMs} ms)`)
            .join(", ")
        }; ` +
          `${stats.kills} kill trials: ${stats.killed} killed (${stats.afterWrites} of them mid-run, ` +
          `after changing the bucket; ${stats.atWrite} past an observed first write), ${stats.finished} finished before the kill; ` +
          `apply ${stats.byCommand.apply}, delete ${stats.byCommand.delete}, ` +
          `push ${stats.byCommand.push}`,
      );
      return {
        name: this.name,
        tried,
        findings: findings.lines,
        ms: Date.now() - t0,
        kills: {
          trials: stats.kills,
          midRun: stats.afterWrites,
          beforeWrite: stats.killed - stats.afterWrites,
          finished: stats.finished,
        },
      };
    },
  };
}

/** How long `podmin version` takes (start-up and module loading), the fastest of three runs. */
export async function startupMs(agent = false): Promise<number> {
  let best = Infinity;
  for (let i = 0; i < 3; i++) {
    const t0 = Date.now();
    await (agent ? runAgent(["--help"]) : podmin(["version"]));
    best = Math.min(best, Date.now() - t0);
  }
  return best;
}

/** The keys and ETags under the prefixes the commands write, as one string. */
async function fingerprint(store: ObjectStore): Promise<string> {
  const lines = [];
  for (const prefix of ["deployments/", "services/", "apps/"]) {
    for await (const info of store.list(prefix)) lines.push(`${info.key} ${info.etag}`);
  }
  return lines.sort().join("\n");
}

/** Rewrites the layout's index.json to name both images (writeOciLayout keeps only the last). */
async function fixIndex(
  layout: string,
  images: Record<string, { digest: string; mediaType: string }>,
): Promise<void> {
  const manifests = [];
  for (const [ref, i] of Object.entries(images)) {
    const size = (await Deno.stat(path.join(layout, "blobs", "sha256", i.digest.slice(7)))).size;
    manifests.push({
      mediaType: i.mediaType,
      digest: i.digest,
      size,
      annotations: { "org.opencontainers.image.ref.name": ref },
    });
  }
  await Deno.writeTextFile(
    path.join(layout, "index.json"),
    JSON.stringify({ schemaVersion: 2, manifests }),
  );
}

/** What is wrong after the re-run, or undefined when it converged. */
async function converged(o: {
  store: ObjectStore;
  command: Command;
  again: Ran;
  victim: string;
  variant: "v1" | "v2";
  image: "one" | "multi";
  tag: string;
  images: Record<string, { digest: string }>;
}): Promise<string | undefined> {
  const index = await readDeploymentIndex(o.store);
  const entry = (name: string) =>
    index.deployments.find((e) => e.namespace === "default" && e.name === name);
  if (o.command === "delete") {
    // A delete that completed before the kill makes the re-run's target absent.
    if (o.again.code !== 0 && !/not found|does not exist|no deployment/i.test(o.again.stderr)) {
      return `exit ${o.again.code}: ${o.again.stderr.trim()}`;
    }
    return entry(o.victim) ? `${o.victim} still in the index` : undefined;
  }
  if (o.again.code !== 0) return `exit ${o.again.code}: ${o.again.stderr.trim()}`;
  if (o.command === "apply") {
    for (const name of DEPLOYMENTS) {
      const e = entry(name);
      if (!e) return `${name} missing from the index`;
      const spec = await readSpec(o.store, { kind: "Deployment", ref: e.spec });
      const want = `registry.podmin.internal/apps/${name}:${o.variant === "v1" ? "1" : "2"}`;
      const got = spec.spec.template.spec.containers[0].image;
      if (got !== want) return `${name} has image ${got}, not ${want}`;
    }
    return undefined;
  }
  const got = await getIfExists(o.store, `apps/fuzz/_tags/${o.tag}`);
  if (!got) return `tag ${o.tag} missing`;
  const digest = `sha256:${sha256Hex(got.body)}`;
  return digest === o.images[o.image].digest
    ? undefined
    : `tag ${o.tag} holds ${digest}, not ${o.images[o.image].digest}`;
}

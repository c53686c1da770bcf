/**
 * Outages of the bucket through a TCP proxy the test owns, in front of moto: refusing, resetting
 * and black-holing connections for a while, with an agent running and the CLI used during each.
 * Findings: a CLI command that does not fail within its documented bound, a manifest removed or
 * changed during the outage, a status that does not report it, or no convergence afterwards.
 */

import * as path from "node:path";
import { moto } from "../support/moto.ts";
import { faultProxy, type ProxyMode } from "../support/fault_proxy.ts";
import { nodeAgentArgs, podmin, spawnAgent, waitFor } from "../support/programs.ts";
import { type Attack, Findings } from "./campaign.ts";

/** The per-attempt bound the agent and CLI run with here, and the documented CLI bound. */
const BOUND_MS = 2_000;
const CLI_BOUND_MS = 4 * BOUND_MS + 1_000;

/** Builds the attack: each mode lasts `outageMs`. */
export function outageAttack(outageMs: number): Attack {
  return {
    name: "bucket-outages",
    tries: `refuse, reset and black-hole the bucket for ${outageMs / 1000} s each, agent running`,
    async run({ cases, deadline }) {
      const t0 = Date.now();
      const findings = new Findings();
      const m = await moto();
      await m.reset();
      const bucket = await m.createBucket();
      const proxy = faultProxy(m.port);
      const env = { AWS_ENDPOINT_URL: proxy.endpoint, PODMIN_REQUEST_TIMEOUT: `${BOUND_MS}ms` };
      const tmp = await Deno.makeTempDir({ prefix: "podmin-fault-outage-" });
      const base = path.join(tmp, "node");
      const manifest = path.join(base, "manifests", "podmin_default_web.json");
      const statusFile = path.join(base, "state", "status.json");
      const status = async () => JSON.parse(await Deno.readTextFile(statusFile));
      const agent = spawnAgent([
        ...nodeAgentArgs({ bucket: `s3://${bucket}`, nodeGroup: "workers", base }),
        "--registry-listen",
        "off",
        "--interval",
        "500ms",
      ], env);
      let tried = 0;
      try {
        const file = path.join(tmp, "web.yaml");
        await Deno.writeTextFile(
          file,
          "apiVersion: podmin.dev/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n" +
            "  nodeGroup: workers\n  template: {spec: {containers: [{name: web, image: x}]}}\n",
        );
        const applied = await podmin(["--bucket", `s3://${bucket}`, "apply", "-f", file], env);
        if (applied.code !== 0) throw new Error(`apply before the outages: ${applied.stderr}`);
        await waitFor(
          "the manifest",
          async () =>
            (await status().catch(() => ({}))).converged === true &&
            (await Deno.stat(manifest).then(() => true, () => false)),
          30_000,
        );
        const before = await Deno.readTextFile(manifest);
        const modes: ProxyMode[] = ["refuse", "reset", "black-hole"];
        for (; tried < Math.min(cases, modes.length) && Date.now() < deadline; tried++) {
          const mode = modes[tried];
          proxy.setMode(mode);
          const outageStart = Date.now();
          const c0 = Date.now();
          // Killed when far over its bound: a hang is a finding, not a stuck campaign.
          const get = await podmin(["--bucket", `s3://${bucket}`, "get", "deployments"], env, {
            signal: AbortSignal.timeout(CLI_BOUND_MS + 30_000),
          });
          const cliMs = Date.now() - c0;
          if (get.code === 0) findings.add("CLI succeeded during outage", mode);
          if (cliMs > CLI_BOUND_MS + 5_000) {
            findings.add("CLI over its bound", `${mode}: ${cliMs} ms (bound ${CLI_BOUND_MS} ms)`);
          }
          const rest = outageMs - (Date.now() - outageStart);
          if (rest > 0) await new Promise((r) => setTimeout(r, rest));
          const s = await status();
          if (s.converged !== false || s.errors.length === 0) {
            findings.add("outage not in status", `${mode}: ${JSON.stringify(s.errors)}`);
          }
          if ((await Deno.readTextFile(manifest).catch(() => "")) !== before) {
            findings.add("manifest changed during outage", mode);
          }
          proxy.setMode("pass");
          const r0 = Date.now();
          try {
            // Two polls at the loop's longest backoff (30 s) plus one bound.
            await waitFor("convergence", async () => (await status()).converged === true, 62_000);
          } catch {
            findings.add("no convergence after outage", mode);
          }
          console.log(
            `  ${mode}: CLI exited ${get.code} after ${cliMs} ms; status during: converged ` +
              `${s.converged}, ${s.errors.length} error(s); converged again ` +
              `${Date.now() - r0} ms after the outage ended`,
          );
        }
      } finally {
        agent.kill("SIGTERM");
        await agent.output(); // drains its log, so it can always exit
        proxy.close();
        await Deno.remove(tmp, { recursive: true });
      }
      return { name: this.name, tried, findings: findings.lines, ms: Date.now() - t0 };
    },
  };
}

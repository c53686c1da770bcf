/**
 * The secrets loop: keeps each local Pod's declared provider values in its
 * tmpfs directory. Values are fetched when a Deployment first appears, when
 * its declared keys change, and every refresh interval; a provider failure
 * keeps the last good generation.
 *
 * The directories are checked (root mode and owner, each Pod's layout repaired) when a Deployment
 * is first seen by this process, whenever its values were fetched, and otherwise once per
 * `verifyMs`: a restart after a crash checks everything at once, and the passes in between
 * (every 2 s on an idle node) touch no file.
 */

import * as path from "node:path";
import { checkSize, LIMITS } from "../../core/kit/limits.ts";
import type { Logger } from "../../core/kit/log.ts";
import { valueName } from "../../core/model/provider_names.ts";
import type { Deployment } from "../../core/model/resources.ts";
import { podDirName } from "../pod_dir.ts";
import { fetchValues, type ValueProvider } from "./value_provider.ts";
import {
  ensurePrivateRoot,
  prunePodDirs,
  readGeneration,
  repairLayout,
  writeGeneration,
} from "../pod_generations.ts";

/** Options of `SecretsSync`. */
export interface SecretsSyncOptions {
  cluster: string;
  secretsDir: string;
  provider: ValueProvider;
  /** Refresh interval of successfully fetched values. */
  refreshMs: number;
  /** First retry interval after a failed fetch (doubles per failure, capped at `refreshMs`). */
  retryMs?: number;
  /** Source of jitter in [0, 1) (default Math.random). */
  random?: () => number;
  /** Longest time between checks of a directory whose values were not fetched (default 60 s). */
  verifyMs?: number;
  log: Logger;
}

/** Default longest time between checks of the values directories: 60 s (the manifests' full scan). */
export const VERIFY_MS = 60_000;

/** The outcome of one sync. */
export interface SecretsResult {
  /** `namespace/name` of Deployments whose current generation has every declared key. */
  ready: Set<string>;
  /** Problems, one line each. */
  errors: string[];
  /** Deployments that got a new generation in this sync. */
  rotated: string[];
}

interface PodState {
  keys: string;
  nextFetch: number;
  /** Consecutive failed fetches. */
  failures: number;
  /** When the Pod's directory is next checked, and whether it held every key then. */
  nextVerify?: number;
  ready?: boolean;
}

/** The declared keys of a Deployment, as one comparable string. */
function keysOf(d: Deployment): string {
  return d.spec.secrets!.map((s) => `${s.from}:${s.key}`).join(",");
}

/** Keeps value generations of local Deployments current. */
export class SecretsSync {
  readonly #options: SecretsSyncOptions;
  readonly #state = new Map<string, PodState>();
  /** When the root's mode and owner are next checked. */
  #nextRootCheck = -Infinity;

  constructor(options: SecretsSyncOptions) {
    this.#options = options;
  }

  /**
   * Brings every Deployment's values up to date (as far as the provider
   * allows). Deployments are handled concurrently, so one slow provider call
   * does not hold the others back; any failure is reported per Deployment and
   * never thrown.
   */
  async sync(deployments: Deployment[], now = Date.now()): Promise<SecretsResult> {
    const result: SecretsResult = { ready: new Set(), errors: [], rotated: [] };
    const withSecrets = deployments.filter((d) => d.spec.secrets?.length);
    if (!withSecrets.length) return result;
    if (now >= this.#nextRootCheck || withSecrets.some((d) => this.#due(d, now))) {
      try {
        await ensurePrivateRoot({
          dir: this.#options.secretsDir,
          what: "values",
          log: this.#options.log,
        });
        this.#nextRootCheck = now + (this.#options.verifyMs ?? VERIFY_MS);
      } catch (err) {
        this.#nextRootCheck = -Infinity;
        result.errors.push(
          `values directory ${this.#options.secretsDir}: ${(err as Error).message}`,
        );
        return result;
      }
    }
    const fetched = await this.#fetchDue(withSecrets, now);
    await Promise.all(withSecrets.map((d) => this.#syncOne(d, now, result, fetched)));
    return result;
  }

  /** True when `d`'s values are due: new, changed keys, or past their refresh time. */
  #due(d: Deployment, now: number): boolean {
    const st = this.#state.get(`${d.metadata.namespace}/${d.metadata.name}`);
    return !st || st.keys !== keysOf(d) || now >= st.nextFetch;
  }

  /**
   * Every due value of this pass in as few provider calls as it allows (Parameter Store: 10 names
   * per `GetParameters`, across all of the node's Deployments).
   */
  async #fetchDue(
    deployments: Deployment[],
    now: number,
  ): Promise<Map<string, Uint8Array | Error>> {
    const names = { ssm: new Set<string>(), secretsmanager: new Set<string>() };
    for (const d of deployments) {
      if (!this.#due(d, now)) continue;
      for (const s of d.spec.secrets!) names[s.from].add(this.#name(d, s.key));
    }
    const out = new Map<string, Uint8Array | Error>();
    for (const from of ["ssm", "secretsmanager"] as const) {
      if (!names[from].size) continue;
      for (const [k, v] of await fetchValues(this.#options.provider, from, [...names[from]])) {
        out.set(`${from}:${k}`, v);
      }
    }
    return out;
  }

  #name(d: Deployment, key: string): string {
    const { namespace, name } = d.metadata;
    return valueName({ cluster: this.#options.cluster, namespace, podName: name, key });
  }

  /**
   * The next refresh: the interval with ±20 % jitter, so a cluster's nodes (and a node's
   * Deployments) spread their calls instead of refreshing in step.
   */
  #nextRefresh(now: number): number {
    const r = this.#options.random ?? Math.random;
    return now + this.#options.refreshMs * (0.8 + 0.4 * r());
  }

  async #syncOne(
    d: Deployment,
    now: number,
    result: SecretsResult,
    fetched: Map<string, Uint8Array | Error>,
  ): Promise<void> {
    const secrets = d.spec.secrets!;
    const { namespace, name } = d.metadata;
    const ref = `${namespace}/${name}`;
    const dir = path.join(this.#options.secretsDir, podDirName(namespace, name));
    const keys = keysOf(d);
    let verified = false; // writeGeneration verifies and repairs the layout itself
    const due = this.#due(d, now);
    const known = this.#state.get(ref);
    if (!due && known?.ready !== undefined && now < (known.nextVerify ?? -Infinity)) {
      // Checked since, nothing fetched: the directory is as the last check left it.
      if (known.ready) result.ready.add(ref);
      return;
    }
    if (due) {
      try {
        const values = secrets.map((s) => {
          const v = fetched.get(`${s.from}:${this.#name(d, s.key)}`);
          if (v === undefined) throw new Error(`value ${s.key} was not fetched`);
          if (v instanceof Error) throw v;
          return v;
        });
        secrets.forEach((s, i) =>
          checkSize({
            what: `value ${s.key} (${s.from})`,
            size: values[i].byteLength,
            limit: LIMITS.valueBytes,
            hint: "store large data elsewhere (an image, an S3 object) and keep values small",
          })
        );
        const generation = new Map(secrets.map((s, i) => [s.key, values[i]]));
        if (await writeGeneration(dir, generation)) {
          result.rotated.push(ref);
          this.#options.log.info("values generation swapped", {
            deployment: ref,
            keys: generation.size,
          });
        }
        verified = true;
        this.#state.set(ref, { keys, nextFetch: this.#nextRefresh(now), failures: 0 });
      } catch (err) {
        result.errors.push(`values of ${ref}: ${(err as Error).message}`);
        // Retry sooner than the refresh, backing off while the provider keeps failing
        // (throttling included); the last good generation stays in place meanwhile.
        const failures = (this.#state.get(ref)?.failures ?? 0) + 1;
        const base = this.#options.retryMs ?? 5_000;
        const delay = Math.min(this.#options.refreshMs, base * 2 ** (failures - 1));
        const r = this.#options.random ?? Math.random;
        this.#state.set(ref, { keys, nextFetch: now + delay * (0.5 + 0.5 * r()), failures });
      }
    }
    try {
      // Every pass, fetched or not: a crash between swap and links must not hide a key forever.
      const repaired = verified ? [] : await repairLayout(dir);
      if (repaired.length) {
        this.#options.log.warn("values layout repaired", { deployment: ref, repaired });
      }
      const current = await readGeneration(dir);
      const ready = !!current && secrets.every((s) => current.has(s.key));
      if (ready) result.ready.add(ref);
      this.#verified(ref, keys, now, ready);
    } catch (err) {
      this.#verified(ref, keys, now, undefined);
      result.errors.push(`values of ${ref}: ${(err as Error).message}`);
    }
  }

  /** Records a check of `ref`'s directory (`ready` undefined: it failed, check again next pass). */
  #verified(ref: string, keys: string, now: number, ready: boolean | undefined): void {
    const st = this.#state.get(ref) ?? { keys, nextFetch: -Infinity, failures: 0 };
    st.ready = ready;
    st.nextVerify = ready === undefined ? -Infinity : now + (this.#options.verifyMs ?? VERIFY_MS);
    this.#state.set(ref, st);
  }

  /**
   * Removes value directories of Pods that no longer run here: every
   * directory except those of `keep` (`namespace/name`). Called after the
   * manifests were converged, so a Pod never loses its values while running.
   */
  async prune(keep: Set<string>): Promise<void> {
    await prunePodDirs(this.#options.secretsDir, keep);
    for (const ref of [...this.#state.keys()]) if (!keep.has(ref)) this.#state.delete(ref);
  }
}

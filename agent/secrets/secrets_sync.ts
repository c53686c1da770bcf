/**
 * The secrets loop: keeps each local Pod's declared provider values in its
 * tmpfs directory. Values are fetched when a Deployment first appears, when
 * its declared keys change, and every refresh interval; a provider failure
 * keeps the last good generation.
 */

import * as path from "node:path";
import { checkSize, LIMITS } from "../../core/limits.ts";
import type { Logger } from "../../core/log.ts";
import { valueName } from "../../core/provider_names.ts";
import type { Deployment } from "../../core/resources.ts";
import { podDirName } from "../pod_dir.ts";
import type { ValueProvider } from "./value_provider.ts";
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
  /** Retry interval after a failed fetch. */
  retryMs?: number;
  log: Logger;
}

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
}

/** Keeps value generations of local Deployments current. */
export class SecretsSync {
  readonly #options: SecretsSyncOptions;
  readonly #state = new Map<string, PodState>();

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
    try {
      await ensurePrivateRoot({
        dir: this.#options.secretsDir,
        what: "values",
        log: this.#options.log,
      });
    } catch (err) {
      result.errors.push(`values directory ${this.#options.secretsDir}: ${(err as Error).message}`);
      return result;
    }
    await Promise.all(withSecrets.map((d) => this.#syncOne(d, now, result)));
    return result;
  }

  async #syncOne(d: Deployment, now: number, result: SecretsResult): Promise<void> {
    const secrets = d.spec.secrets!;
    const { namespace, name } = d.metadata;
    const ref = `${namespace}/${name}`;
    const dir = path.join(this.#options.secretsDir, podDirName(namespace, name));
    const keys = secrets.map((s) => `${s.from}:${s.key}`).join(",");
    const st = this.#state.get(ref);
    let verified = false; // writeGeneration verifies and repairs the layout itself
    if (!st || st.keys !== keys || now >= st.nextFetch) {
      try {
        const fetched = await Promise.all(
          secrets.map((s) =>
            this.#options.provider.fetch(
              s.from,
              valueName({ cluster: this.#options.cluster, namespace, podName: name, key: s.key }),
            )
          ),
        );
        secrets.forEach((s, i) =>
          checkSize({
            what: `value ${s.key} (${s.from})`,
            size: fetched[i].byteLength,
            limit: LIMITS.valueBytes,
            hint: "store large data elsewhere (an image, an S3 object) and keep values small",
          })
        );
        const values = new Map(secrets.map((s, i) => [s.key, fetched[i]]));
        if (await writeGeneration(dir, values)) {
          result.rotated.push(ref);
          this.#options.log.info("values generation swapped", {
            deployment: ref,
            keys: values.size,
          });
        }
        verified = true;
        this.#state.set(ref, { keys, nextFetch: now + this.#options.refreshMs });
      } catch (err) {
        result.errors.push(`values of ${ref}: ${(err as Error).message}`);
        this.#state.set(ref, { keys, nextFetch: now + (this.#options.retryMs ?? 5_000) });
      }
    }
    try {
      // Every pass, fetched or not: a crash between swap and links must not hide a key forever.
      const repaired = verified ? [] : await repairLayout(dir);
      if (repaired.length) {
        this.#options.log.warn("values layout repaired", { deployment: ref, repaired });
      }
      const current = await readGeneration(dir);
      if (current && secrets.every((s) => current.has(s.key))) result.ready.add(ref);
    } catch (err) {
      result.errors.push(`values of ${ref}: ${(err as Error).message}`);
    }
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

/**
 * The kubelet static Pod directory. The agent touches only files whose name
 * matches `podmin_<ns>_<name>[.<slot>].json` and whose content carries its owner
 * annotation; writes go to a dot-file (ignored by kubelet) and are renamed.
 */

import * as path from "node:path";
import { writeFileAtomic } from "../../core/store/atomic_write.ts";
import { isOwnedManifest, MANIFEST_FILE_PATTERN } from "./static_pod.ts";

/** What one convergence of the directory did. */
export interface DirChanges {
  written: string[];
  removed: string[];
  unchanged: string[];
  /** Desired names held by files the agent does not own (left untouched). */
  refused: string[];
  /** The owned manifests on disk afterwards, by file name (sorted). */
  owned: string[];
}

const TEMP_FILE_PATTERN = /^\.podmin_[a-z0-9-]{1,63}_[a-z0-9-]{1,63}(\.[0-9a-f]{8})?\.json\.tmp$/;

/** A static Pod directory. */
export class ManifestDir {
  constructor(readonly dir: string) {}

  /** Owned manifests currently on disk, by file name. */
  async readOwned(): Promise<Map<string, Uint8Array>> {
    return (await this.#scan()).owned;
  }

  /** Owned manifests with when each was last written (its mtime, ms), by file name. */
  async readOwnedTimes(): Promise<Map<string, { bytes: Uint8Array; writtenMs: number }>> {
    const out = new Map<string, { bytes: Uint8Array; writtenMs: number }>();
    for (const [name, bytes] of (await this.#scan()).owned) {
      const st = await Deno.stat(path.join(this.dir, name));
      out.set(name, { bytes, writtenMs: st.mtime?.getTime() ?? 0 });
    }
    return out;
  }

  /** Owned manifests, and names in our pattern held by files we do not own. */
  async #scan(): Promise<{ owned: Map<string, Uint8Array>; foreign: Set<string> }> {
    await Deno.mkdir(this.dir, { recursive: true, mode: 0o755 });
    const out = new Map<string, Uint8Array>();
    const foreign = new Set<string>();
    for await (const e of Deno.readDir(this.dir)) {
      if (e.isFile && TEMP_FILE_PATTERN.test(e.name)) {
        // Left by a write that was interrupted; kubelet ignores dot-files, so does the agent.
        await Deno.remove(path.join(this.dir, e.name)).catch(() => {});
        continue;
      }
      if (!MANIFEST_FILE_PATTERN.test(e.name)) continue;
      if (!e.isFile) {
        foreign.add(e.name); // a directory or symlink with our name: never touched
        continue;
      }
      const bytes = await Deno.readFile(path.join(this.dir, e.name));
      if (isOwnedManifest(bytes)) out.set(e.name, bytes);
      else foreign.add(e.name);
    }
    return { owned: out, foreign };
  }

  /**
   * Makes the directory hold exactly `desired` among owned files, except the
   * names in `keep`, which are left as they are (present or absent).
   */
  async converge(desired: Map<string, Uint8Array>, keep: Set<string>): Promise<DirChanges> {
    const { owned, foreign } = await this.#scan();
    const changes: DirChanges = {
      written: [],
      removed: [],
      unchanged: [],
      refused: [],
      owned: [],
    };
    for (const [name, bytes] of desired) {
      if (!MANIFEST_FILE_PATTERN.test(name)) throw new Error(`refusing to write ${name}`);
      if (foreign.has(name)) {
        changes.refused.push(name); // someone else's file: reported, left alone
        continue;
      }
      const current = owned.get(name);
      if (current && equalBytes(current, bytes)) {
        changes.unchanged.push(name);
        continue;
      }
      await this.#writeAtomic(name, bytes);
      changes.written.push(name);
    }
    for (const name of owned.keys()) {
      if (desired.has(name) || keep.has(name)) continue;
      await Deno.remove(path.join(this.dir, name));
      changes.removed.push(name);
    }
    const after = new Set([...owned.keys(), ...changes.written]);
    for (const name of changes.removed) after.delete(name);
    changes.owned = [...after].sort();
    return changes;
  }

  /** Durable: the temporary dot-file matches TEMP_FILE_PATTERN, so a crashed write is cleaned up. */
  #writeAtomic(name: string, bytes: Uint8Array): Promise<void> {
    return writeFileAtomic(path.join(this.dir, name), bytes, {
      mode: 0o644,
      temp: path.join(this.dir, `.${name}.tmp`),
    });
  }
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

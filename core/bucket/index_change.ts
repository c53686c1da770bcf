/**
 * A change of `deployments/index.json` as the mesh carries it (spec §7.9, "Changes over the
 * mesh"): the entries that changed between two indexes the coordinator read, the entries that
 * left, and the new spec objects inline when they are small. A member that holds the change's
 * base applies it without reading the bucket; every inline spec is verified against the digest of
 * its index entry before use (`decodeSpec`), so a peer can withhold a change but not alter a spec.
 * A change from a peer is untrusted input (`parseIndexChange`, core/model/index_change.ts).
 */

import { API_VERSION } from "../model/resources.ts";
import { INDEX_CHANGE_LIMITS, type IndexChange } from "../model/index_change.ts";
import type { DeploymentIndex } from "./deployment_index.ts";
export {
  INDEX_CHANGE_LIMITS,
  type IndexChange,
  type IndexVersion,
  parseIndexChange,
} from "../model/index_change.ts";

/** Spec reads a coordinator makes at once for one change. */
const READS_AT_ONCE = 8;

const refOf = (e: { namespace: string; name: string }) => `${e.namespace}/${e.name}`;

/** The change from `base` to `next` (no specs yet: `withInlineSpecs`). */
export function diffIndexes(
  base: { etag: string; index: DeploymentIndex },
  next: { etag: string; index: DeploymentIndex },
): IndexChange {
  const before = new Map(base.index.deployments.map((e) => [refOf(e), e]));
  const after = new Set(next.index.deployments.map(refOf));
  const upsert = next.index.deployments.filter((e) => {
    const was = before.get(refOf(e));
    return !was || was.spec !== e.spec || was.nodeGroup !== e.nodeGroup;
  });
  return {
    base: { etag: base.etag, generation: base.index.generation },
    etag: next.etag,
    generation: next.index.generation,
    ...(next.index.signature ? { signature: next.index.signature } : {}),
    upsert,
    remove: [...before.keys()].filter((ref) => !after.has(ref)),
    specs: {},
  };
}

/** `index` with `change` applied (the caller checked that `index` is the change's base). */
export function applyIndexChange(index: DeploymentIndex, change: IndexChange): DeploymentIndex {
  const byRef = new Map(index.deployments.map((e) => [refOf(e), e]));
  for (const ref of change.remove) byRef.delete(ref);
  for (const e of change.upsert) byRef.set(refOf(e), e);
  return {
    apiVersion: API_VERSION,
    kind: "DeploymentIndex",
    generation: change.generation,
    deployments: [...byRef.values()],
    ...(change.signature ? { signature: change.signature } : {}),
  };
}

/**
 * The change with the specs of its upserted entries inline, as far as the bounds allow: `read`
 * returns a spec's verified canonical bytes, or undefined (missing, unreadable, too large: the
 * members read it themselves). Specs are taken in entry order, eight reads at a time, until
 * `inlineBytes` or `specs` is spent.
 */
export async function withInlineSpecs(
  change: IndexChange,
  read: (ref: string) => Promise<Uint8Array | undefined>,
): Promise<IndexChange> {
  const refs = [...new Set(change.upsert.map((e) => e.spec))].slice(0, INDEX_CHANGE_LIMITS.specs);
  const specs: Record<string, string> = {};
  let spent = 0;
  for (let i = 0; i < refs.length && spent < INDEX_CHANGE_LIMITS.inlineBytes; i += READS_AT_ONCE) {
    const batch = refs.slice(i, i + READS_AT_ONCE);
    const read_ = await Promise.all(batch.map((ref) => read(ref).catch(() => undefined)));
    for (const [k, bytes] of read_.entries()) {
      if (!bytes || bytes.length > INDEX_CHANGE_LIMITS.specBytes) continue;
      if (spent + bytes.length > INDEX_CHANGE_LIMITS.inlineBytes) continue;
      spent += bytes.length;
      specs[batch[k]] = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    }
  }
  return { ...change, specs };
}

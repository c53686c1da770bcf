/**
 * What must hold in a bucket after any interrupted write, checked through Podmin's own readers:
 * both indexes parse, every entry's spec object exists and matches its digest, every visible
 * content-addressed object (spec, blob, manifest) matches the digest in its key, and every tag
 * holds a manifest whose manifests and blobs all exist.
 */

import { readDeploymentIndex } from "../../core/bucket/deployment_index.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { readServiceIndex } from "../../core/bucket/service_index.ts";
import { readSpec } from "../../core/bucket/spec_objects.ts";
import { parseManifest } from "../../registry/manifest.ts";

/** Returns one line per broken invariant (empty when the bucket is sound). */
export async function bucketProblems(store: ObjectStore): Promise<string[]> {
  const problems: string[] = [];
  const attempt = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (err) {
      problems.push(`${what}: ${(err as Error).message}`);
    }
  };
  await attempt("deployment index", async () => {
    for (const e of (await readDeploymentIndex(store)).deployments) {
      await attempt(
        `deployment ${e.namespace}/${e.name}`,
        () => readSpec(store, { kind: "Deployment", ref: e.spec }),
      );
    }
  });
  await attempt("service index", async () => {
    for (const e of (await readServiceIndex(store))?.services ?? []) {
      await attempt(
        `service ${e.namespace}/${e.name}`,
        () => readSpec(store, { kind: "Service", ref: e.spec }),
      );
    }
  });
  for (const prefix of ["deployments/", "services/", "apps/"]) {
    for await (const info of store.list(prefix)) {
      const m = info.key.match(/\/(?:sha256\/)?([0-9a-f]{64})(?:\.json)?$/);
      if (!m) continue;
      await attempt(`object ${info.key}`, async () => {
        const got = await getIfExists(store, info.key);
        if (!got) return; // removed since the listing
        if (sha256Hex(got.body) !== m[1]) throw new Error("content does not match its digest");
      });
    }
  }
  for await (const info of store.list("apps/")) {
    const m = info.key.match(/^(apps\/.+)\/_tags\/([^/]+)$/);
    if (!m) continue;
    await attempt(`tag ${info.key}`, async () => {
      const got = await getIfExists(store, info.key);
      if (!got) return;
      problems.push(...await manifestProblems(store, { prefix: m[1], bytes: got.body }));
    });
  }
  return problems;
}

/** A manifest's own object, and what it references, exist (recursively for an index). */
async function manifestProblems(
  store: ObjectStore,
  o: { prefix: string; bytes: Uint8Array },
): Promise<string[]> {
  const problems: string[] = [];
  const digest = sha256Hex(o.bytes);
  const own = `${o.prefix}/_manifests/sha256/${digest}`;
  if (!await getIfExists(store, own)) problems.push(`${own}: tagged manifest missing`);
  const parsed = parseManifest(o.bytes);
  for (const b of parsed.blobs) {
    const key = `apps/_blobs/sha256/${b.digest.slice("sha256:".length)}`;
    if (!await exists(store, key)) problems.push(`${key}: referenced blob missing`);
  }
  for (const child of parsed.manifests) {
    const key = `${o.prefix}/_manifests/sha256/${child.digest.slice("sha256:".length)}`;
    const got = await getIfExists(store, key);
    if (!got) problems.push(`${key}: referenced manifest missing`);
    else problems.push(...await manifestProblems(store, { prefix: o.prefix, bytes: got.body }));
  }
  return problems;
}

async function exists(store: ObjectStore, key: string): Promise<boolean> {
  try {
    await store.head(key);
    return true;
  } catch {
    return false;
  }
}

/** The Pod sandbox image in the cluster's image store: mirrored once for every node architecture. */

import {
  imageManifestKey,
  type ImageRepository,
  imageTagKey,
  parseImageRepository,
} from "../../core/bucket/bucket_layout.ts";
import { parseManifest, platformOf } from "../../registry/manifest.ts";
import type { Architecture } from "../../core/bucket/dependency_manifest.ts";
import { mirrorPathOf, parseUpstreamRef } from "../../core/model/image_ref.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { writeImage } from "../../registry/image_writer.ts";
import { UpstreamSource } from "../../registry/upstream.ts";
import type { SetupPlan } from "./setup_plan.ts";

/** The Pod sandbox image, mirrored for the node architectures unless already there. */
export async function mirrorSandboxImage(plan: SetupPlan): Promise<void> {
  const { store, log, sandboxImage } = plan;
  const ref = parseUpstreamRef(sandboxImage);
  const repo = parseImageRepository(mirrorPathOf(ref));
  if (ref.tag && (await sandboxMirrored(store, repo, ref.tag, plan.nodeArches))) {
    log(`sandbox image ${sandboxImage} already mirrored`);
    return;
  }
  log(`mirroring sandbox image ${sandboxImage}`);
  await writeImage({
    store,
    source: new UpstreamSource({ ref, plainHttp: plan.mirrorPlainHttp }),
    repo,
    tag: ref.tag,
    platforms: plan.nodeArches.map((a) => `linux/${a}`),
    log,
  });
}

/**
 * True when the tag is stored and, for an index, the linux manifest of every
 * node architecture is stored too (a NodeGroup of a new architecture needs it).
 */
async function sandboxMirrored(
  store: ObjectStore,
  repo: ImageRepository,
  tag: string,
  arches: Architecture[],
): Promise<boolean> {
  const got = await getIfExists(store, imageTagKey(repo, tag));
  if (!got) return false;
  const parsed = parseManifest(got.body, got.info.contentType);
  for (const arch of arches) {
    const child = parsed.manifests.find((m) => platformOf(m) === `linux/${arch}`);
    if (parsed.manifests.length && !child) return false;
    if (child && !(await getIfExists(store, imageManifestKey(repo, child.digest.slice(7))))) {
      return false;
    }
  }
  return true;
}

/**
 * What `podmin push` and `podmin mirror` do: the only writers of image objects (their help and
 * flags: cli/image_commands.ts).
 */

import { booleanFlag, type CommandContext, stringFlag } from "../core/kit/cli_kit.ts";
import { UsageError } from "../core/kit/errors.ts";
import { mirrorPathOf, parseUpstreamRef, REGISTRY_HOSTNAME } from "../core/model/image_ref.ts";
import { formatBytes, isProgressUpdate } from "../core/kit/progress.ts";
import { parseImageRepository } from "../core/bucket/bucket_layout.ts";
import { checkTag } from "../core/model/names.ts";
import { type ImageSource, openImageSource } from "../registry/image_source.ts";
import { type Descriptor, parseManifest } from "../registry/manifest.ts";
import { writeImage, type WriteImageResult } from "../registry/image_writer.ts";
import { UpstreamSource } from "../registry/upstream.ts";
import { storeOf } from "./cluster_reads.ts";

/** Progress lines redrawn in place on a terminal, other lines as they are. */
function progressLog(ctx: CommandContext): (line: string) => void {
  return (line) => (isProgressUpdate(line) ? ctx.status(line) : ctx.err(line));
}

/** The distinct blobs of a local image (every platform) and their total size. */
async function sourceBlobs(src: ImageSource): Promise<{ count: number; bytes: number }> {
  const root = await src.root();
  const parsed = parseManifest(root.bytes, root.mediaType);
  const blobs = new Map<string, Descriptor>();
  for (const b of parsed.blobs) blobs.set(b.digest, b);
  for (const child of parsed.manifests) {
    const doc = await src.manifest(child);
    for (const b of parseManifest(doc.bytes, doc.mediaType).blobs) blobs.set(b.digest, b);
  }
  let bytes = 0;
  for (const b of blobs.values()) bytes += b.size;
  return { count: blobs.size, bytes };
}

function summary(ctx: CommandContext, ref: string, r: WriteImageResult) {
  ctx.out(`${ref}`);
  ctx.out(`  digest:   ${r.digest}`);
  ctx.out(
    `  uploaded: ${r.blobsUploaded} blob(s), ${
      formatBytes(r.bytesUploaded)
    }; ${r.blobsSkipped} already stored`,
  );
  if (r.platforms.length) ctx.out(`  platforms: ${r.platforms.join(", ")}`);
}

/** `podmin push`. */
export async function runPush(ctx: CommandContext): Promise<number | void> {
  const [source, target, ...extra] = ctx.positionals;
  if (!source || !target || extra.length) {
    throw new UsageError("expected: push SOURCE apps/NAME[:TAG]", {
      hint: "run 'podmin push --help'",
    });
  }
  const m = /^(apps\/[^:@]+)(?::([^:@/]+))?$/.exec(target);
  if (!m) {
    throw new UsageError(`invalid target ${JSON.stringify(target)}`, {
      hint: "pushed images live under apps/: apps/NAME[:TAG]",
    });
  }
  const repo = parseImageRepository(m[1]);
  const tag = checkTag(m[2] ?? "latest");
  const store = await storeOf(ctx);
  const src = await openImageSource(source);
  try {
    const { count, bytes } = await sourceBlobs(src);
    ctx.err(
      `pushing ${source} to ${m[1]}:${tag}: ${count} blob${count === 1 ? "" : "s"}, ${
        formatBytes(bytes)
      }`,
    );
    const r = await writeImage({ store, source: src, repo, tag, log: progressLog(ctx) });
    summary(ctx, `${REGISTRY_HOSTNAME}/${m[1]}:${tag}`, r);
  } finally {
    await src.close();
  }
}

/** `podmin mirror`. */
export async function runMirror(ctx: CommandContext): Promise<number | void> {
  const [refText, ...extra] = ctx.positionals;
  if (!refText || extra.length) {
    throw new UsageError("expected: mirror UPSTREAM-REF", { hint: "run 'podmin mirror --help'" });
  }
  const ref = parseUpstreamRef(refText);
  const arches = (stringFlag(ctx, "arch") ?? "amd64,arm64").split(",").map((a) => a.trim())
    .filter(Boolean);
  for (const a of arches) {
    if (!["amd64", "arm64"].includes(a)) {
      throw new UsageError(`unsupported architecture ${a}`, { hint: "use amd64 and/or arm64" });
    }
  }
  const source = new UpstreamSource({
    ref,
    credentials: stringFlag(ctx, "creds") ?? Deno.env.get("PODMIN_MIRROR_CREDS"),
    plainHttp: booleanFlag(ctx, "plain-http"),
  });
  const path = mirrorPathOf(ref);
  const repo = parseImageRepository(path);
  const r = await writeImage({
    store: await storeOf(ctx),
    source,
    repo,
    tag: ref.tag,
    platforms: arches.map((a) => `linux/${a}`),
    log: progressLog(ctx),
  });
  const name = `${REGISTRY_HOSTNAME}/${path}`;
  summary(ctx, ref.tag ? `${name}:${ref.tag}` : `${name}@${r.digest}`, r);
}

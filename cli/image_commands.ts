/** `podmin push` and `podmin mirror`: the only writers of image objects. */

import {
  booleanFlag,
  bucketUrl,
  type Command,
  type CommandContext,
  stringFlag,
} from "../core/cli_kit.ts";
import { UsageError } from "../core/errors.ts";
import { mirrorPathOf, parseUpstreamRef, REGISTRY_HOSTNAME } from "../core/image_ref.ts";
import { formatBytes, isProgressUpdate } from "../core/progress.ts";
import { openStore } from "../core/store_url.ts";
import { parseImageRepository } from "../core/bucket_layout.ts";
import { checkTag } from "../core/names.ts";
import { type ImageSource, openImageSource } from "../registry/image_source.ts";
import { type Descriptor, parseManifest } from "../registry/manifest.ts";
import { writeImage, type WriteImageResult } from "../registry/image_writer.ts";
import { UpstreamSource } from "../registry/upstream.ts";

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

function storeOf(ctx: CommandContext) {
  const region = typeof ctx.values.region === "string" ? ctx.values.region : undefined;
  return openStore(bucketUrl(ctx), { region });
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

const push: Command = {
  name: "push",
  summary: "upload a local image to the cluster's image store (apps/)",
  help: `Usage: podmin push SOURCE apps/NAME[:TAG]

SOURCE uses skopeo's transport syntax:
  oci:DIR[:REF]                an OCI image layout directory
  oci-archive:FILE[:REF]       a tar of an OCI image layout
  docker-archive:FILE[:REPO:TAG]  a 'docker save' tar

Uploads only blobs the bucket does not hold yet (HEAD first), verifies every
digest, writes manifests after their blobs and the tag last; an interrupted
push can simply be run again. Pods then use
${REGISTRY_HOSTNAME}/apps/NAME:TAG.

Example:
  skopeo copy docker-daemon:web:1.0 oci:./web:1.0
  podmin --bucket s3://my-cluster push oci:./web:1.0 apps/web:1.0`,
  options: {},
  positionals: true,
  async run(ctx) {
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
    const store = storeOf(ctx);
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
  },
};

const mirror: Command = {
  name: "mirror",
  summary: "copy an upstream image into the image store (mirror/)",
  help:
    `Usage: podmin mirror UPSTREAM-REF [--arch amd64,arm64] [--creds USER:PASSWORD] [--plain-http]

Copies an image from an upstream registry (Docker Hub, registry.k8s.io,
ghcr.io, …) into mirror/<registry>/<repository> (a registry port is written
as _PORT: localhost:5000 → mirror/localhost_5000/…). For multi-platform images the
index is stored unchanged (so digest-pinned references keep working) together
with the linux manifests of the selected architectures.

Flags:
  --arch LIST        architectures to copy from an index (default amd64,arm64)
  --creds U:P        credentials for private images (default $PODMIN_MIRROR_CREDS)
  --plain-http       talk http:// to the upstream (local test registries only)

Example:
  podmin --bucket s3://my-cluster mirror registry.k8s.io/pause:3.10
  → ${REGISTRY_HOSTNAME}/mirror/registry.k8s.io/pause:3.10`,
  options: {
    arch: { type: "string", default: "amd64,arm64" },
    creds: { type: "string" },
    "plain-http": { type: "boolean", default: false },
  },
  positionals: true,
  async run(ctx) {
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
      store: storeOf(ctx),
      source,
      repo,
      tag: ref.tag,
      platforms: arches.map((a) => `linux/${a}`),
      log: progressLog(ctx),
    });
    const name = `${REGISTRY_HOSTNAME}/${path}`;
    summary(ctx, ref.tag ? `${name}:${ref.tag}` : `${name}@${r.digest}`, r);
  },
};

/** The image commands. */
export const imageCommands: Command[] = [push, mirror];

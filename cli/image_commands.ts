/**
 * `podmin push` and `podmin mirror`: the only writers of image objects — their help and flags;
 * each loads its implementation (cli/image_run.ts) when it runs.
 */

import type { Command } from "../core/kit/cli_kit.ts";

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
registry.podmin.internal/apps/NAME:TAG.

Example:
  skopeo copy docker-daemon:web:1.0 oci:./web:1.0
  podmin --bucket s3://my-cluster push oci:./web:1.0 apps/web:1.0`,
  options: {},
  positionals: true,
  run: async (ctx) => (await import("./image_run.ts")).runPush(ctx),
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
  → registry.podmin.internal/mirror/registry.k8s.io/pause:3.10`,
  options: {
    arch: { type: "string", default: "amd64,arm64" },
    creds: { type: "string" },
    "plain-http": { type: "boolean", default: false },
  },
  positionals: true,
  run: async (ctx) => (await import("./image_run.ts")).runMirror(ctx),
};

/** The image commands. */
export const imageCommands: Command[] = [push, mirror];

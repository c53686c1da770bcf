/**
 * OCI image layouts of static programs, written here without a registry or a build tool: one
 * layer per architecture holding the program's files, an image config, a manifest per
 * architecture and an index over them. `podmin push` / `writeImage` read the layout like any
 * other (`oci:DIR:TAG`). The sandbox image (pause_image.ts) and the demo image (demo_image.ts)
 * are written this way.
 */

import { gzipSync } from "node:zlib";
import { sha256Hex } from "../../core/kit/digest.ts";
import { buildTar } from "../../vmconfig/archive.ts";

/** Architectures a program image is written for. */
export type ProgramArch = "amd64" | "arm64";

/** Options of `writeProgramImageLayout`. */
export interface ProgramImageOptions {
  /** The layout directory (created). */
  dir: string;
  /** The tag (`org.opencontainers.image.ref.name`). */
  tag: string;
  arches: readonly ProgramArch[];
  /** The layer's files per architecture: path (relative, no leading slash), mode, bytes. */
  files: (arch: ProgramArch) => Array<[string, number, Uint8Array]>;
  /** The image config's `config` (Entrypoint, Cmd, Env, …). */
  config: Record<string, unknown>;
}

const enc = new TextEncoder();
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX = "application/vnd.oci.image.index.v1+json";

/** Writes an OCI image layout (an index over `arches`) tagged `tag`; returns `dir`. */
export async function writeProgramImageLayout(o: ProgramImageOptions): Promise<string> {
  const blobs = `${o.dir}/blobs/sha256`;
  await Deno.mkdir(blobs, { recursive: true });
  const blob = async (bytes: Uint8Array, mediaType: string) => {
    const hex = sha256Hex(bytes);
    await Deno.writeFile(`${blobs}/${hex}`, bytes);
    return { mediaType, digest: `sha256:${hex}`, size: bytes.byteLength };
  };
  const manifests = [];
  for (const arch of o.arches) {
    const tar = buildTar(o.files(arch));
    const layer = await blob(
      new Uint8Array(gzipSync(tar, { level: 9 })),
      "application/vnd.oci.image.layer.v1.tar+gzip",
    );
    const config = await blob(
      enc.encode(JSON.stringify({
        architecture: arch,
        os: "linux",
        config: o.config,
        rootfs: { type: "layers", diff_ids: [`sha256:${sha256Hex(tar)}`] },
      })),
      "application/vnd.oci.image.config.v1+json",
    );
    const manifest = await blob(
      enc.encode(
        JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config, layers: [layer] }),
      ),
      OCI_MANIFEST,
    );
    manifests.push({ ...manifest, platform: { architecture: arch, os: "linux" } });
  }
  const index = await blob(
    enc.encode(JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests })),
    OCI_INDEX,
  );
  await Deno.writeTextFile(`${o.dir}/oci-layout`, '{"imageLayoutVersion":"1.0.0"}');
  await Deno.writeTextFile(
    `${o.dir}/index.json`,
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [{ ...index, annotations: { "org.opencontainers.image.ref.name": o.tag } }],
    }),
  );
  return o.dir;
}

/**
 * Images for real-node tests: the pause image mirrored into the bucket from the CNCF distribution
 * registry (there is no internet here), and a static C program pushed as an app image.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { writePauseImageLayout } from "../../cli/local/pause_image.ts";
import { sh } from "./dataplane_topology.ts";
import { writeOciLayout } from "./oci_image.ts";
import { podmin } from "./programs.ts";

/** Where and as whom the images go. */
export interface ImageTarget {
  /** A scratch directory. */
  work: string;
  bucket: string;
  /** Environment of `podmin` (AWS endpoint and credentials). */
  env: Record<string, string>;
}

/** Puts `pause:3.10` into the registry on `upstreamPort` and mirrors it into the bucket. */
export async function mirrorPauseImage(o: ImageTarget & { upstreamPort: number }): Promise<void> {
  const pause = await writePauseImageLayout({
    dir: path.join(o.work, "pause"),
    tag: "3.10",
    arches: ["amd64", "arm64"],
  });
  await sh("skopeo", [
    "copy",
    "--all",
    "--dest-tls-verify=false",
    `oci:${pause}:3.10`,
    `docker://127.0.0.1:${o.upstreamPort}/pause:3.10`,
  ]);
  const mirrored = await podmin(
    ["--bucket", o.bucket, "mirror", "--plain-http", `127.0.0.1:${o.upstreamPort}/pause:3.10`],
    o.env,
  );
  assert.equal(mirrored.code, 0, mirrored.stderr);
}

/** Compiles `source` (C) statically to `/<name>` and pushes it as `apps/<name>:<tag>` (`1.0`). */
export async function pushStaticProgram(
  o: ImageTarget & { name: string; source: string; tag?: string },
): Promise<void> {
  const tag = o.tag ?? "1.0";
  const src = path.join(o.work, `${o.name}-${tag}.c`);
  const bin = path.join(o.work, `${o.name}-${tag}`);
  await Deno.writeTextFile(src, o.source);
  await sh("gcc", ["-static", "-Os", "-o", bin, src]);
  const layout = path.join(o.work, `${o.name}-${tag}-image`);
  await writeOciLayout({
    dir: layout,
    ref: tag,
    platforms: [{ arch: "amd64", files: { [o.name]: await Deno.readFile(bin) } }],
  });
  const pushed = await podmin(
    ["--bucket", o.bucket, "push", `oci:${layout}:${tag}`, `apps/${o.name}:${tag}`],
    o.env,
  );
  assert.equal(pushed.code, 0, pushed.stderr);
}

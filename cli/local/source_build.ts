/**
 * `deno task demo --build-from-source`: builds the pinned kubelet, containerd, crictl and CoreDNS
 * from the Go module proxy with `build_from_source.sh` (the recipe the node tests build with, via
 * tests/peers/build_node_peers.sh), cached by version under `<cache>/source-builds/`, for hosts
 * that cannot download the vendors' releases. runc and the CNI plugins come from the host.
 */

import * as path from "node:path";
import { PodminError } from "../../core/kit/errors.ts";
import type { Catalog } from "../setup/dependency_catalog.ts";
import { forEachLine } from "../../core/kit/stream_lines.ts";

/** The programs the script builds, in the catalogue's names. */
export const SOURCE_BUILT = ["kubelet", "containerd", "crictl", "coredns"] as const;

const SCRIPT = new URL("./build_from_source.sh", import.meta.url).pathname;
const ARCH: Record<string, string> = { x86_64: "amd64", aarch64: "arm64" };

/** The build failed or cannot start (no Go, no pin); the message says which. */
export class SourceBuildError extends PodminError {}

/** Options of `buildFromSource`. */
export interface SourceBuildOptions {
  catalog: Catalog;
  /** Where builds are cached: `<outRoot>/<name>-v<version>/`. */
  outRoot: string;
  /** Each line of the build's output (progress: which program, Go's downloads). */
  log: (line: string) => void;
}

/** The pinned version of each source-built program for this host's architecture. */
export function sourceVersions(catalog: Catalog): Record<typeof SOURCE_BUILT[number], string> {
  const arch = ARCH[Deno.build.arch];
  const out = {} as Record<typeof SOURCE_BUILT[number], string>;
  for (const name of SOURCE_BUILT) {
    const e = catalog.dependencies.find((d) => d.name === name && d.arch === arch);
    if (!e) {
      throw new SourceBuildError(`the catalogue pins no ${name} for ${arch ?? Deno.build.arch}`);
    }
    out[name] = e.version;
  }
  return out;
}

/** Builds (or finds cached) the pinned programs; returns their directories for `--bin-dir`. */
export async function buildFromSource(o: SourceBuildOptions): Promise<string[]> {
  const versions = sourceVersions(o.catalog);
  const env: Record<string, string> = {};
  for (const name of SOURCE_BUILT) env[`${name.toUpperCase()}_VERSION`] = `v${versions[name]}`;
  const child = new Deno.Command("bash", {
    args: [SCRIPT, o.outRoot, "all"],
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const pump = (s: ReadableStream<Uint8Array>) => forEachLine(s, o.log);
  await Promise.all([pump(child.stdout), pump(child.stderr)]);
  const { code } = await child.status;
  if (code !== 0) {
    throw new SourceBuildError(
      `building the pinned node programs from source failed (exit ${code})`,
      {
        hint: `the lines above are ${path.basename(SCRIPT)}'s; it needs Go and the Go module proxy`,
      },
    );
  }
  return SOURCE_BUILT.map((name) => path.join(o.outRoot, `${name}-v${versions[name]}`));
}

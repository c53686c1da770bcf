/**
 * The demo image of `deno task demo` (cli/local/demo_run.ts): one static program, `/demo`
 * (cli/local/demo_app.c, embedded compiled by build_demo_app.sh), that serves HTTP
 * (`/demo serve 8080`), resolves a Service name through the Pod's resolv.conf and asks it
 * (`/demo get NAME [PORT] [PATH]`), or waits (`/demo sleep`). Written as an OCI image layout for
 * amd64 and arm64, like the sandbox image: no registry account, compiler or base image is needed.
 * The version is in the image config's environment (`DEMO_VERSION`), so each version is a
 * different image and its answers name it.
 */

import { Buffer } from "node:buffer";
import { DEMO_APP_BASE64 } from "./demo_app_embed.ts";
import { type ProgramArch, writeProgramImageLayout } from "./program_image.ts";

/** The demo program's static executable for `arch`. */
export function demoProgram(arch: ProgramArch): Uint8Array {
  return new Uint8Array(Buffer.from(DEMO_APP_BASE64[arch], "base64"));
}

/** Options of `writeDemoImageLayout`. */
export interface DemoImageOptions {
  /** The layout directory (created). */
  dir: string;
  /** The image's tag and its `DEMO_VERSION`, e.g. "1.0". */
  version: string;
  /** Default both. */
  arches?: readonly ProgramArch[];
}

/** Writes the demo image, tagged `version`, as an OCI layout in `dir`; returns `dir`. */
export async function writeDemoImageLayout(o: DemoImageOptions): Promise<string> {
  return await writeProgramImageLayout({
    dir: o.dir,
    tag: o.version,
    arches: o.arches ?? ["amd64", "arm64"],
    files: (arch) => [["demo", 0o755, demoProgram(arch)]],
    config: {
      Entrypoint: ["/demo"],
      Cmd: ["serve", "8080"],
      Env: [`DEMO_VERSION=${o.version}`],
      ExposedPorts: { "8080/tcp": {} },
    },
  });
}

if (import.meta.main) {
  // deno run -A cli/local/demo_image.ts DIR VERSION: the layout a person pushes by hand.
  const [dir, version] = Deno.args;
  if (!dir || !version) {
    console.error("usage: deno run -A cli/local/demo_image.ts DIR VERSION (e.g. ./demo-1.0 1.0)");
    Deno.exit(2);
  }
  console.log(`oci:${await writeDemoImageLayout({ dir, version })}:${version}`);
}

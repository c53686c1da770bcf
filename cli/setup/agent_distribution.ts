/**
 * How each node architecture gets `podmin-agent`: the compiled binary when one exists
 * (`--agent-binary ARCH=PATH`, else `<dist>/<x86_64|aarch64>/podmin-agent`), otherwise the
 * runtime-plus-bundle distribution: the catalogue's pinned Deno runtime (`deno`) plus the
 * single-file bundle (`<dist>/podmin-agent.js`, built by `deno task bundle`; setup builds it
 * itself when it runs from a checkout without one). Both are ordinary manifest dependencies.
 */

import * as path from "node:path";
import type { Architecture } from "../../core/bucket/dependency_manifest.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { PodminError, UsageError } from "../../core/kit/errors.ts";
import { VERSION } from "../../core/kit/version.ts";
import type { CatalogSpec } from "./dependency_catalog.ts";
import type { LocalDependency } from "./dependency_sync.ts";

/** The dependency name of the pinned Deno runtime. */
export const RUNTIME_DEPENDENCY = "deno";
/** The dependency name of the agent's single-file bundle. */
export const BUNDLE_DEPENDENCY = "podmin-agent-bundle";

/** `deno compile`'s directory name per architecture (dist/<name>/podmin-agent). */
export const DIST_ARCH: Record<Architecture, string> = { amd64: "x86_64", arm64: "aarch64" };

/** What setup ships as the agent of each node architecture. */
export interface AgentDistributions {
  /** Podmin's own files to publish (compiled binaries, the bundle). */
  local: LocalDependency[];
  /** Architectures that use the runtime-plus-bundle distribution (so need `deno`). */
  runtimeArches: Architecture[];
  /** Architectures with no agent at all (a dry run lists them; a real setup refuses). */
  missing: Architecture[];
  /** One line per architecture saying which distribution it gets. */
  summary: string[];
}

const checkout = new URL("../../", import.meta.url);

/** Whether this program runs from a checkout (so `deno bundle` can build the agent). */
function runningFromCheckout(): boolean {
  try {
    return checkout.protocol === "file:" &&
      Deno.statSync(new URL("agent/main.ts", checkout)).isFile &&
      Deno.statSync(new URL("cli/build.sh", checkout)).isFile;
  } catch {
    return false;
  }
}

/** The default dist directory: the checkout's dist/, else the running program's directory. */
export function defaultDistDir(): string {
  if (runningFromCheckout()) return path.join(checkout.pathname, "dist");
  return path.dirname(new URL(Deno.mainModule).pathname);
}

async function readIfExists(file: string): Promise<Uint8Array | undefined> {
  try {
    return await Deno.readFile(file);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/** Runs `cli/build.sh bundle` of the checkout with its output in `dist`. */
async function buildBundle(dist: string, log: (l: string) => void): Promise<void> {
  log(`building the agent bundle into ${dist} (deno task bundle)`);
  const out = await new Deno.Command("bash", {
    args: [path.join(checkout.pathname, "cli/build.sh"), "bundle"],
    env: { PODMIN_DIST: dist },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new PodminError(
      `building the agent bundle failed: ${new TextDecoder().decode(out.stderr).trim()}`,
      { hint: "run 'deno task bundle' and read its error" },
    );
  }
}

/** Chooses each architecture's agent distribution and reads the files it needs. */
export async function chooseAgentDistributions(options: {
  /** --agent-binary values per architecture. */
  binaries: Partial<Record<Architecture, string>>;
  arches: Architecture[];
  catalog: CatalogSpec;
  dist: string;
  log: (line: string) => void;
}): Promise<AgentDistributions> {
  const { binaries, arches, catalog, dist, log } = options;
  const result: AgentDistributions = { local: [], runtimeArches: [], missing: [], summary: [] };
  let bundle: Uint8Array | undefined | null = null; // null: not looked up yet
  const bundleFile = path.join(dist, "podmin-agent.js");
  for (const arch of arches) {
    const binaryFile = binaries[arch] ?? path.join(dist, DIST_ARCH[arch], "podmin-agent");
    const binary = await readIfExists(binaryFile);
    if (binary) {
      result.local.push({ name: "podmin-agent", version: VERSION, arch, bytes: binary });
      result.summary.push(`podmin-agent ${arch}: compiled binary ${binaryFile}`);
      continue;
    }
    if (binaries[arch]) {
      throw new UsageError(`--agent-binary ${arch}=${binaryFile}: cannot read the file`);
    }
    const runtime = catalog.dependencies.find((d) =>
      d.name === RUNTIME_DEPENDENCY && d.arch === arch
    );
    if (!runtime) {
      throw new UsageError(
        `no compiled podmin-agent for ${arch} and the dependency catalogue pins no ${RUNTIME_DEPENDENCY} runtime for ${arch}`,
        { hint: `pin ${RUNTIME_DEPENDENCY} for ${arch} in the catalogue, or pass --agent-binary` },
      );
    }
    if (bundle === null) {
      bundle = await readIfExists(bundleFile);
      if (!bundle && runningFromCheckout()) {
        await buildBundle(dist, log);
        bundle = await readIfExists(bundleFile);
      }
    }
    if (!bundle) {
      result.missing.push(arch);
      result.summary.push(`podmin-agent ${arch}: missing (no compiled binary, no ${bundleFile})`);
      continue;
    }
    result.local.push({
      name: BUNDLE_DEPENDENCY,
      version: `${VERSION}-${sha256Hex(bundle).slice(0, 12)}`,
      arch,
      bytes: bundle,
    });
    result.runtimeArches.push(arch);
    result.summary.push(
      `podmin-agent ${arch}: runtime-plus-bundle (no compiled binary): ${RUNTIME_DEPENDENCY} ${runtime.version} + ${bundleFile}`,
    );
  }
  return result;
}

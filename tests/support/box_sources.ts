/**
 * What a machine of the box installs, as `podmin setup` fetches it: the test-built node peers
 * packed as their vendors pack them plus this Deno as the pinned runtime of the agent's
 * runtime-plus-bundle distribution, served on loopback by a file server with a dependency
 * catalogue of their real digests and versions, and the agent bundle built into a `--dist`
 * directory (the checkout's own `deno task bundle`). `setupArgs` are the setup flags naming them.
 */

import * as path from "node:path";
import { VERSION } from "../../core/kit/version.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import type { LocalDependency } from "../../cli/setup/dependency_sync.ts";
import type { CatalogEntry } from "../../cli/setup/dependency_catalog.ts";
import { mustRun, runCommand } from "./command.ts";
import { serveFiles } from "./file_server.ts";
import { NODE_PEERS, pinnedVersion } from "./node_peers.ts";
import { catalogOf, HOST_ARCH, servedArtifacts, vendorArtifacts } from "./vendor_artifacts.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** The served sources of a box. */
export interface BoxSources {
  /** The catalogue (host architecture only), its URLs on the file server. */
  catalog: { dependencies: CatalogEntry[] };
  /** The catalogue written as a file (`--dependency-catalog`). */
  catalogFile: string;
  /** The `--dist` directory holding `podmin-agent.js`. */
  dist: string;
  /** `--dependency-catalog FILE --dist DIR` (as `SetupSources`, tests/support/setup_sources.ts). */
  args: string[];
  /** Stops the file server. */
  close(): Promise<void>;
}

/**
 * The versions of the served files: the catalogue's pins for the four Go-built peers (built at
 * exactly those versions), the installed versions of Debian's runc and CNI plugins, this Deno.
 * configure.sh reads them (containerd's config schema, kubelet's feature gates).
 */
export async function artifactVersions(): Promise<Record<string, string>> {
  const debian = async (pkg: string) =>
    (await mustRun("dpkg-query", ["-W", "-f", "${Version}", pkg])).replace(
      /[^A-Za-z0-9._+~-]/g,
      "_",
    );
  return {
    ...Object.fromEntries(NODE_PEERS.map((p) => [p, pinnedVersion(p)])),
    runc: await debian("runc"),
    "cni-plugins": await debian("containernetworking-plugins"),
    deno: Deno.version.deno,
  };
}

/** Builds the agent bundle (`deno task bundle`) into `dist`; returns `<dist>/podmin-agent.js`. */
export async function buildAgentBundle(dist: string): Promise<string> {
  await Deno.mkdir(dist, { recursive: true });
  const out = await runCommand("bash", [path.join(ROOT, "cli/build.sh"), "bundle"], {
    env: { ...Deno.env.toObject(), PODMIN_DIST: dist },
  });
  if (out.code !== 0) throw new Error(`deno task bundle failed: ${out.stderr}`);
  return path.join(dist, "podmin-agent.js");
}

/** The agent as setup ships it without `deno compile`: the bundle, as a local dependency. */
export async function agentBundleDependency(dist: string): Promise<LocalDependency> {
  const bytes = await Deno.readFile(await buildAgentBundle(dist));
  return {
    name: "podmin-agent-bundle",
    version: `${VERSION}-${sha256Hex(bytes).slice(0, 12)}`,
    arch: HOST_ARCH,
    bytes,
  };
}

/** Packs and serves the sources under `work`; `versions` overrides catalogue versions. */
export async function boxSources(
  work: string,
  versions: Record<string, string> = {},
): Promise<BoxSources> {
  const artifacts = await vendorArtifacts(work);
  artifacts.set("deno", await Deno.readFile(Deno.execPath()));
  const { files, sha } = servedArtifacts(artifacts);
  const server = serveFiles(files);
  try {
    const catalog = catalogOf(sha, server.url, { ...await artifactVersions(), ...versions });
    const catalogFile = path.join(work, "catalog.json");
    await Deno.writeTextFile(catalogFile, JSON.stringify(catalog, null, 2));
    const dist = path.join(work, "dist");
    await buildAgentBundle(dist);
    return {
      catalog,
      catalogFile,
      dist,
      args: ["--dependency-catalog", catalogFile, "--dist", dist],
      close: () => server.close(),
    };
  } catch (err) {
    await server.close();
    throw err;
  }
}

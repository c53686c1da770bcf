/**
 * What `podmin setup` puts in the bucket for the machine harness's tests, through setup's own
 * dependency sync (cli/setup/dependency_sync.ts): a catalogue whose URLs point at a local file
 * server holding the test's vendor artifacts with their real digests, plus what setup builds
 * itself (the vmconfig archive, the agent as setup ships it without `deno compile`).
 */

import * as path from "node:path";
import { DependencyCache } from "../../cli/setup/dependency_cache.ts";
import {
  type LocalDependency,
  planDependencies,
  publishDependencies,
  wantedDependencies,
} from "../../cli/setup/dependency_sync.ts";
import type { DependencyEntry } from "../../core/bucket/dependency_manifest.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { VERSION } from "../../core/kit/version.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { buildVmconfigArchive } from "../../vmconfig/archive.ts";
import { mustRun, runCommand } from "./command.ts";
import { serveFiles } from "./file_server.ts";
import { NODE_PEERS, pinnedVersion } from "./node_peers.ts";
import { catalogOf, HOST_ARCH, servedArtifacts } from "./vendor_artifacts.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** The vmconfig archive as setup uploads it. */
export function vmconfigDependency(): LocalDependency {
  const vmconfig = buildVmconfigArchive();
  return { name: "vmconfig", version: vmconfig.version, arch: HOST_ARCH, bytes: vmconfig.bytes };
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

/** The agent as setup ships it without `deno compile`: the Deno runtime plus the bundle. */
export async function agentBundle(work: string): Promise<LocalDependency> {
  const bytes = await Deno.readFile(await buildAgentBundle(path.join(work, "dist")));
  return {
    name: "podmin-agent-bundle",
    version: `${VERSION}-${sha256Hex(bytes).slice(0, 12)}`,
    arch: HOST_ARCH,
    bytes,
  };
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

/**
 * Setup's dependency sync into `store`: `artifacts` (catalogue name → bytes) served by a local
 * file server for the run of the sync only, catalogued at `versions`, and the `local`
 * dependencies. Returns the published manifest's entries for the host's architecture.
 */
export async function publishAsSetup(o: {
  store: ObjectStore;
  work: string;
  artifacts: Map<string, Uint8Array>;
  versions: Record<string, string>;
  local: LocalDependency[];
}): Promise<DependencyEntry[]> {
  const { files, sha } = servedArtifacts(o.artifacts);
  const server = serveFiles(files);
  try {
    const catalog = catalogOf(sha, server.url, o.versions);
    const wanted = wantedDependencies({ catalog, local: o.local, architectures: [HOST_ARCH] });
    const plan = await planDependencies(o.store, wanted);
    const result = await publishDependencies({
      store: o.store,
      cache: new DependencyCache({ dir: path.join(o.work, "cache") }),
      plan,
      local: o.local,
    });
    return result.manifest.architectures[HOST_ARCH] ?? [];
  } finally {
    await server.close();
  }
}

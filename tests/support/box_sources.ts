/**
 * What a machine of the box installs, as `podmin setup` fetches it: the test-built node peers
 * packed as their vendors pack them plus this Deno as the pinned runtime of the agent's
 * runtime-plus-bundle distribution, served on loopback by a file server with a dependency
 * catalogue of their real digests and versions, and the agent bundle built into a `--dist`
 * directory (the checkout's own `deno task bundle`). `setupArgs` are the setup flags naming them.
 */

import * as path from "node:path";
import type { CatalogEntry } from "../../cli/setup/dependency_catalog.ts";
import { artifactVersions, buildAgentBundle } from "./box_setup.ts";
import { serveFiles } from "./file_server.ts";
import { catalogOf, servedArtifacts, vendorArtifacts } from "./vendor_artifacts.ts";

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

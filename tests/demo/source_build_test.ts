/**
 * `deno task demo --build-from-source`: the product's build script (the one the node tests build
 * their peers with) finds builds cached by version and builds nothing, and hands the demo the
 * pinned programs' directories; bad pins are refused before Go runs.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { DEFAULT_CATALOG } from "../../cli/setup/default_catalog.ts";
import {
  buildFromSource,
  SOURCE_BUILT,
  SourceBuildError,
  sourceVersions,
} from "../../cli/local/source_build.ts";
import { NODE_PEERS, nodePeerDir, nodePeerProgram } from "../support/node_peers.ts";
import { testWith } from "../support/requirements.ts";

testWith(
  "source build: pinned programs cached by version are reused, not rebuilt, and returned for --bin-dir",
  { files: NODE_PEERS.map((p) => new URL(`file://${nodePeerProgram(p)}`)) },
  async () => {
    const outRoot = await Deno.makeTempDir({ prefix: "podmin-source-builds-" });
    try {
      // The cache as a finished build leaves it: one directory per program and version.
      for (const p of NODE_PEERS) {
        await Deno.symlink(nodePeerDir(p), path.join(outRoot, path.basename(nodePeerDir(p))));
      }
      const lines: string[] = [];
      const dirs = await buildFromSource({
        catalog: DEFAULT_CATALOG,
        outRoot,
        log: (l) => lines.push(l),
      });
      assert.deepEqual(
        dirs,
        SOURCE_BUILT.map((p) => path.join(outRoot, path.basename(nodePeerDir(p)))),
      );
      assert.deepEqual(lines.filter((l) => /building/.test(l)), [], lines.join("\n"));
    } finally {
      await Deno.remove(outRoot, { recursive: true });
    }
  },
);

Deno.test("source build: the versions are the catalogue's pins for this architecture", () => {
  const v = sourceVersions(DEFAULT_CATALOG);
  assert.deepEqual(Object.keys(v).sort(), [...SOURCE_BUILT].sort());
  for (const p of SOURCE_BUILT) {
    assert.ok(DEFAULT_CATALOG.dependencies.some((d) => d.name === p && d.version === v[p]), p);
  }
  assert.throws(
    () =>
      sourceVersions({
        dependencies: DEFAULT_CATALOG.dependencies.filter((d) => d.name !== "crictl"),
      }),
    (err: Error) => err instanceof SourceBuildError && /pins no crictl/.test(err.message),
  );
});

testWith(
  "source build: a version that is not vMAJOR.MINOR.PATCH is refused before anything is built",
  { tools: ["bash"] },
  async () => {
    const outRoot = await Deno.makeTempDir({ prefix: "podmin-source-builds-" });
    try {
      const bad = {
        dependencies: DEFAULT_CATALOG.dependencies.map((d) =>
          d.name === "kubelet" ? { ...d, version: "1.36" } : d
        ),
      };
      const lines: string[] = [];
      await assert.rejects(
        buildFromSource({ catalog: bad, outRoot, log: (l) => lines.push(l) }),
        /building the pinned node programs from source failed \(exit 2\)/,
      );
      assert.ok(
        lines.some((l) => l.includes("KUBELET_VERSION must be vMAJOR.MINOR.PATCH, got 'v1.36'")),
        lines.join("\n"),
      );
      assert.deepEqual([...Deno.readDirSync(outRoot)], [], "nothing built");
    } finally {
      await Deno.remove(outRoot, { recursive: true });
    }
  },
);

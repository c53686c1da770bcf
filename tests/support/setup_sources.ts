/**
 * What `podmin setup` fetches, served on loopback for a test: the node dependencies of a pinned
 * catalogue (random bytes with their own digests, for amd64 and arm64) from a file server, the
 * Pod sandbox image from a CNCF distribution registry (built by tests/setup.sh), and a compiled
 * agent stand-in per architecture. `args` are the setup flags that point there.
 */

import { createHash } from "node:crypto";
import { serveFiles } from "./file_server.ts";
import { writeOciLayout } from "./oci_image.ts";
import { run, startDistributionRegistry } from "./registry.ts";

/** The served sources and the flags naming them. */
export interface SetupSources {
  /** `--dependency-catalog`, `--agent-binary` per architecture, `--sandbox-image`, plain HTTP. */
  args: string[];
  /** Stops the servers. */
  close(): Promise<void>;
}

const DEPENDENCIES = ["containerd", "runc", "cni-plugins", "crictl", "kubelet", "coredns"];
const ARCHITECTURES = ["amd64", "arm64"] as const;

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** Serves setup's sources, writing the catalogue, agents and image layout under `dir`. */
export async function setupSources(dir: string): Promise<SetupSources> {
  const files = new Map<string, Uint8Array>();
  for (const arch of ARCHITECTURES) {
    for (const name of DEPENDENCIES) {
      files.set(`${name}-${arch}`, crypto.getRandomValues(new Uint8Array(4096)));
    }
  }
  const site = serveFiles(files);
  const registry = await startDistributionRegistry().catch(async (err) => {
    await site.close();
    throw err;
  });
  try {
    await writeOciLayout({
      dir: `${dir}/pause`,
      ref: "3.10",
      platforms: ARCHITECTURES.map((arch) => ({
        arch,
        files: { pause: new TextEncoder().encode(`pause ${arch}`) },
      })),
      index: true,
    });
    const image = `127.0.0.1:${registry.port}/pause:3.10`;
    await run("skopeo", [
      "copy",
      "--all",
      "--dest-tls-verify=false",
      `oci:${dir}/pause:3.10`,
      `docker://${image}`,
    ]);
    const dependencies = [...files].map(([file, bytes]) => {
      const [name, arch] = [file.slice(0, file.lastIndexOf("-")), file.split("-").at(-1)];
      return { name, version: "1.0.0", arch, url: site.url(file), sha256: sha256(bytes) };
    });
    await Deno.writeTextFile(`${dir}/catalog.json`, JSON.stringify({ dependencies }));
    const agents = [];
    for (const arch of ARCHITECTURES) {
      await Deno.writeFile(`${dir}/agent-${arch}`, crypto.getRandomValues(new Uint8Array(4096)));
      agents.push("--agent-binary", `${arch}=${dir}/agent-${arch}`);
    }
    return {
      args: [
        "--dependency-catalog",
        `${dir}/catalog.json`,
        ...agents,
        "--sandbox-image",
        image,
        "--mirror-plain-http",
      ],
      async close() {
        await site.close();
        await registry.stop();
      },
    };
  } catch (err) {
    await site.close();
    await registry.stop();
    throw err;
  }
}

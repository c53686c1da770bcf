/**
 * A containerd of the pinned version with its CRI plugin, pulling the way kubelet makes it pull
 * (CRI `PullImage` through `crictl`, registries resolved from `hosts.toml` under `config_path`,
 * as the node's generated configuration sets it). Used by the redirect test and the pull
 * benchmark. Needs root; no container is started (pulls only); layers unpack with containerd's
 * default snapshotter (overlayfs), as on nodes.
 */

import * as path from "node:path";
import { runGenerator } from "../../vmconfig/node_files.ts";
import { nodePeerProgram } from "./node_peers.ts";
import { run } from "./registry.ts";

/** The containerd and crictl of the pinned catalogue. */
export const CONTAINERD = nodePeerProgram("containerd");
/** crictl of the pinned catalogue. */
export const CRICTL = nodePeerProgram("crictl");

/** A running containerd with CRI. */
export interface CriContainerd {
  /** containerd's process id (for its CPU time). */
  pid: number;
  /**
   * Sends pulls of `hostname/…` to `url` (http://HOST:PORT): the node's own hosts.toml generator
   * writes `certs.d/<hostname>/hosts.toml`, which containerd reads on every pull.
   */
  route(hostname: string, url: string): Promise<void>;
  /** `crictl pull IMAGE`: the image id, or throws with crictl's and containerd's message. */
  pull(image: string): Promise<string>;
  /** `crictl rmi IMAGE`, then waits until its content is gone from the content store. */
  remove(image: string): Promise<void>;
  /** Blobs in the content store. */
  contentBlobs(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts containerd (CRI on, `config_path` at a fresh certs.d) with its state under `dir`. */
export async function startCriContainerd(dir: string): Promise<CriContainerd> {
  const sock = path.join(dir, "containerd.sock");
  const certs = path.join(dir, "certs.d");
  const root = path.join(dir, "root");
  await Deno.mkdir(certs, { recursive: true });
  await Deno.writeTextFile(
    path.join(dir, "config.toml"),
    `version = 3
root = '${root}'
state = '${path.join(dir, "state")}'
[grpc]
  address = '${sock}'
[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '${certs}'
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['${path.join(dir, "cni-bin")}']
  conf_dir = '${path.join(dir, "cni-conf")}'
`,
  );
  const child = new Deno.Command(CONTAINERD, {
    args: ["--config", path.join(dir, "config.toml"), "--log-level", "warn"],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  // containerd's log is drained so it never blocks; kept for failure messages.
  let log = "";
  (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      log = (log + chunk).slice(-20_000);
    }
  })().catch(() => {});
  const crictl = (...args: string[]) =>
    run(CRICTL, [
      "--runtime-endpoint",
      `unix://${sock}`,
      "--image-endpoint",
      `unix://${sock}`,
      "--timeout",
      "300s",
      ...args,
    ]);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await crictl("images");
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        throw new Error(`containerd with CRI did not start: ${(err as Error).message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const blobsDir = path.join(root, "io.containerd.content.v1.content", "blobs", "sha256");
  const contentBlobs = async () => {
    let n = 0;
    try {
      for await (const _ of Deno.readDir(blobsDir)) n++;
    } catch { /* none yet */ }
    return n;
  };
  return {
    pid: child.pid,
    async route(hostname, url) {
      const u = new URL(url);
      await Deno.mkdir(path.join(certs, hostname), { recursive: true });
      await Deno.writeTextFile(
        path.join(certs, hostname, "hosts.toml"),
        await runGenerator({
          name: "gen_hosts_toml",
          args: [hostname, u.hostname, u.port],
        }),
      );
    },
    async pull(image) {
      try {
        return (await crictl("pull", image)).trim();
      } catch (err) {
        throw new Error(`${(err as Error).message}\ncontainerd's log:\n${log.slice(-4000)}`);
      }
    },
    async remove(image) {
      await crictl("rmi", image);
      // CRI deletes synchronously; the content goes with the image's last reference.
      const until = Date.now() + 30_000;
      while (await contentBlobs() > 0) {
        if (Date.now() > until) throw new Error(`content of ${image} still stored after rmi`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    contentBlobs,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await new Deno.Command("umount", { args: ["-R", path.join(dir, "state")] }).output()
        .catch(() => {});
    },
  };
}

/**
 * A simulated kubelet for benchmarks of the deployments pass: it watches one node's static Pod
 * directory (inotify, and a rescan every second) and mirrors each manifest as a Pod into a kubelet
 * Pods API stand-in (tests/support/pods_api_server.ts): a new manifest (a new file, or a file
 * whose spec changed: a replacement in place) is a new Pod, `Pending`, that turns `Running` and
 * Ready a fixed `podStartMs` after the manifest was seen; a removed manifest's Pod is deleted at
 * once. The Pod carries the manifest's labels and annotations (`podmin.dev/spec`), as kubelet's do.
 * After each scan `onScan` gets the manifests on disk.
 */

import * as path from "node:path";
import type { PodsApiServer } from "../support/pods_api_server.ts";

/** One manifest as the simulated kubelet read it. */
export interface SeenManifest {
  file: string;
  /** The spec digest of its `podmin.dev/spec` annotation. */
  spec: string;
  /** The first container's image. */
  image: string;
}

/** Options of `SimKubelet`. */
export interface SimKubeletOptions {
  /** The static Pod directory (created when absent). */
  dir: string;
  server: PodsApiServer;
  /** Manifest seen → Pod Ready, ms. */
  podStartMs: number;
  /** Called after every scan with the manifests on disk. */
  onScan?: (manifests: SeenManifest[]) => void;
}

interface Running {
  uid: string;
  spec: string;
  timer?: ReturnType<typeof setTimeout>;
}

const RESCAN_MS = 1_000;
let nextIp = 1;

/** One node's simulated kubelet. */
export class SimKubelet {
  readonly #o: SimKubeletOptions;
  readonly #pods = new Map<string, Running>();
  #watcher?: Deno.FsWatcher;
  #rescan?: ReturnType<typeof setInterval>;
  #scanning?: Promise<void>;
  #again = false;
  #stopped = false;

  constructor(options: SimKubeletOptions) {
    this.#o = options;
  }

  /** Scans once, then follows the directory. */
  async start(): Promise<void> {
    await Deno.mkdir(this.#o.dir, { recursive: true });
    this.#watcher = Deno.watchFs(this.#o.dir, { recursive: false });
    void (async () => {
      try {
        for await (const _ of this.#watcher!) this.scan();
      } catch { /* closed */ }
    })();
    this.#rescan = setInterval(() => this.scan(), RESCAN_MS);
    await this.scan();
  }

  stop(): void {
    this.#stopped = true;
    this.#watcher?.close();
    clearInterval(this.#rescan);
    for (const p of this.#pods.values()) clearTimeout(p.timer);
  }

  /** Scans the directory (a scan asked for during one runs once more after it). */
  scan(): Promise<void> {
    if (this.#scanning) {
      this.#again = true;
      return this.#scanning;
    }
    this.#scanning = (async () => {
      do {
        this.#again = false;
        await this.#scanOnce().catch(() => {});
      } while (this.#again && !this.#stopped);
      this.#scanning = undefined;
    })();
    return this.#scanning;
  }

  async #scanOnce(): Promise<void> {
    if (this.#stopped) return;
    const seen: SeenManifest[] = [];
    const { server, podStartMs } = this.#o;
    for await (const e of Deno.readDir(this.#o.dir)) {
      if (!e.isFile || !/^podmin_.*\.json$/.test(e.name)) continue;
      let pod;
      try {
        pod = JSON.parse(await Deno.readTextFile(path.join(this.#o.dir, e.name)));
      } catch {
        continue; // removed meanwhile
      }
      const annotations: Record<string, string> = pod.metadata?.annotations ?? {};
      const spec = annotations["podmin.dev/spec"] ?? "";
      seen.push({ file: e.name, spec, image: pod.spec?.containers?.[0]?.image ?? "" });
      const known = this.#pods.get(e.name);
      if (known?.spec === spec) continue;
      if (known) {
        clearTimeout(known.timer);
        server.delete(known.uid);
      }
      const base = {
        namespace: pod.metadata.namespace,
        name: pod.metadata.name,
        uid: crypto.randomUUID(),
        labels: pod.metadata.labels ?? {},
        annotations,
        ips: [`fd00:99::${(nextIp++).toString(16)}`],
      };
      server.set({ ...base, phase: "Pending", ready: false });
      const running: Running = { uid: base.uid, spec };
      running.timer = setTimeout(() => {
        if (this.#pods.get(e.name) === running) {
          server.set({ ...base, phase: "Running", ready: true });
        }
      }, podStartMs);
      this.#pods.set(e.name, running);
    }
    const files = new Set(seen.map((m) => m.file));
    for (const [file, p] of this.#pods) {
      if (files.has(file)) continue;
      clearTimeout(p.timer);
      server.delete(p.uid);
      this.#pods.delete(file);
    }
    this.#o.onScan?.(seen);
  }
}

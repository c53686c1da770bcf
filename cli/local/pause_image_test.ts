import assert from "node:assert/strict";
import { openImageSource } from "../../registry/image_source.ts";
import { testWith } from "../../tests/support/requirements.ts";
import { type PauseArch, pauseProgram, writePauseImageLayout } from "./pause_image.ts";

/** Waits for `child`, or kills it after `ms` and says that it had to. */
async function statusWithin(child: Deno.ChildProcess, ms: number, what: string) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), ms));
  const st = await Promise.race([child.status, late]);
  clearTimeout(timer);
  if (st !== "late") return st;
  child.kill("SIGKILL");
  await child.status;
  throw new Error(`${what}: still running ${ms} ms after the signal`);
}

/**
 * Runs a pause program (`argv`), checks it is still blocked in the kernel after a while, then
 * sends `signal` to it (to `target(child)`'s process when given, e.g. PID 1 of a namespace the
 * child made) and returns how the child ended.
 */
async function blocksUntil(
  argv: string[],
  signal: Deno.Signal,
  target: (child: Deno.ChildProcess) => Promise<number> = (c) => Promise.resolve(c.pid),
): Promise<Deno.CommandStatus> {
  const child = new Deno.Command(argv[0], { args: argv.slice(1), stdout: "null", stderr: "piped" })
    .spawn();
  await new Promise((r) => setTimeout(r, 500));
  const pid = await target(child);
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  // Sleeping in the kernel: state S (not running, not exited).
  assert.match(stat, /^\d+ \(.*\) S /, stat);
  Deno.kill(pid, signal);
  return await statusWithin(child, 10_000, `${argv.join(" ")} sent ${signal}`);
}

/** Blocks until SIGKILL kills it; SIGTERM and SIGINT end it with status 0. */
async function blocksUntilSignalled(argv: string[]): Promise<void> {
  assert.equal((await blocksUntil(argv, "SIGKILL")).signal, "SIGKILL");
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    const st = await blocksUntil(argv, signal);
    assert.deepEqual([st.code, st.signal], [0, null], `${signal} ends it with 0`);
  }
}

testWith(
  "pause program: the amd64 build blocks in the kernel until killed; SIGTERM and SIGINT end it with 0",
  {},
  async () => {
    if (Deno.build.arch !== "x86_64") return;
    const f = await Deno.makeTempFile();
    await Deno.writeFile(f, pauseProgram("amd64"), { mode: 0o755 });
    await blocksUntilSignalled([f]);
    await Deno.remove(f);
  },
);

testWith(
  "pause program: as PID 1 of a PID namespace (a Pod's sandbox), SIGTERM from the host ends it with 0",
  { root: true, tools: ["unshare"] },
  async () => {
    const arch = Deno.build.arch === "x86_64" ? "amd64" : "arm64";
    const f = await Deno.makeTempFile();
    await Deno.writeFile(f, pauseProgram(arch), { mode: 0o755 });
    // unshare --fork: its child is the namespace's PID 1; unshare exits with its status.
    const st = await blocksUntil(["unshare", "--pid", "--fork", f], "SIGTERM", async (c) => {
      const children = await Deno.readTextFile(`/proc/${c.pid}/task/${c.pid}/children`);
      return Number(children.trim());
    });
    assert.deepEqual([st.code, st.signal], [0, null], "SIGTERM ends PID 1 with 0");
    await Deno.remove(f);
  },
);

testWith(
  "pause program: the arm64 build blocks under qemu-aarch64; SIGTERM and SIGINT end it with 0",
  { tools: ["qemu-aarch64-static"] },
  async () => {
    const f = await Deno.makeTempFile();
    await Deno.writeFile(f, pauseProgram("arm64"), { mode: 0o755 });
    await blocksUntilSignalled(["qemu-aarch64-static", f]);
    await Deno.remove(f);
  },
);

Deno.test("pause image: an OCI layout with one manifest per architecture, readable as a source", async () => {
  const dir = await Deno.makeTempDir();
  const arches: PauseArch[] = ["amd64", "arm64"];
  await writePauseImageLayout({ dir, tag: "3.10", arches });
  const src = await openImageSource(`oci:${dir}:3.10`);
  const root = await src.root();
  const index = JSON.parse(new TextDecoder().decode(root.bytes));
  assert.deepEqual(
    index.manifests.map((m: { platform: { architecture: string } }) => m.platform.architecture),
    arches,
  );
  await Deno.remove(dir, { recursive: true });
});

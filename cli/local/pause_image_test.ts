import assert from "node:assert/strict";
import { openImageSource } from "../../registry/image_source.ts";
import { testWith } from "../../tests/support/requirements.ts";
import { type PauseArch, pauseProgram, writePauseImageLayout } from "./pause_image.ts";

/** Runs a pause program and checks it is still blocked after a while, then kills it. */
async function blocksUntilKilled(argv: string[]): Promise<void> {
  const child = new Deno.Command(argv[0], { args: argv.slice(1), stdout: "null", stderr: "piped" })
    .spawn();
  await new Promise((r) => setTimeout(r, 500));
  const stat = await Deno.readTextFile(`/proc/${child.pid}/stat`);
  // Sleeping in the kernel: state S (not running, not exited).
  assert.match(stat, /^\d+ \(.*\) S /, stat);
  child.kill("SIGKILL");
  const st = await child.status;
  assert.equal(st.signal, "SIGKILL");
}

testWith("pause program: the amd64 build blocks in the kernel until killed", {}, async () => {
  if (Deno.build.arch !== "x86_64") return;
  const f = await Deno.makeTempFile();
  await Deno.writeFile(f, pauseProgram("amd64"), { mode: 0o755 });
  await blocksUntilKilled([f]);
  await Deno.remove(f);
});

testWith(
  "pause program: the arm64 build blocks under qemu-aarch64",
  { tools: ["qemu-aarch64-static"] },
  async () => {
    const f = await Deno.makeTempFile();
    await Deno.writeFile(f, pauseProgram("arm64"), { mode: 0o755 });
    await blocksUntilKilled(["qemu-aarch64-static", f]);
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

/**
 * The machine harness after a killed run (issue 31 item 2, failure behaviour): a run that is
 * killed with SIGKILL while its machine runs leaves the machine's processes, cgroups, network
 * namespaces, host link and directory behind; the next run's start (`openBoxRun`, through
 * `removeLeftovers`) removes all of them, and its own machine then boots clean.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { cgroupDirs, cgroupPids } from "../support/box_cgroups.ts";
import { BOX_ROOT, openBoxRun } from "../support/box_run.ts";
import { mustRun } from "../support/command.ts";
import { testWith } from "../support/requirements.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

async function leftovers(id: string) {
  const netns = (await mustRun("ip", ["netns", "list"])).split("\n")
    .filter((l) => l.startsWith(`${id}-`));
  const links = (await mustRun("ip", ["-o", "link", "show"])).split("\n")
    .filter((l) => l.includes(id));
  const dir = await Deno.stat(path.join(BOX_ROOT, id)).then(() => true, () => false);
  return { pids: await cgroupPids(id), cgroups: await cgroupDirs(id), netns, links, dir };
}

/**
 * Whether `pid` is a live process. A zombie is not: the killed run's processes are orphans of the
 * host's PID 1, which reaps them when it gets to it (they hold nothing but their PID).
 */
async function processLives(pid: number): Promise<boolean> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => undefined);
  return stat !== undefined && !/^\d+ \(.*\) Z /s.test(stat);
}

testWith(
  "machine harness: a run killed while its machine runs leaves processes, cgroups, namespaces and a link; the next run removes them all",
  { root: true, tools: ["systemd-nspawn", "mmdebstrap", "nsenter", "unshare", "ip", "nft"] },
  async () => {
    const rootfs = (await mustRun("bash", [path.join(ROOT, "tests/peers/build_machine_rootfs.sh")]))
      .trim();
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", path.join(ROOT, "tests/box/killed_run.ts"), rootfs],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let said = "";
    while (!/booted (pmb\w+)\n/.test(said)) {
      const { value, done } = await reader.read();
      if (done) break;
      said += value;
    }
    const id = /booted (pmb\w+)\n/.exec(said)?.[1];
    assert.ok(id, `the child booted a machine: ${said}`);
    child.kill("SIGKILL");
    await child.status;
    reader.releaseLock();
    await child.stdout.cancel().catch(() => {});

    const left = await leftovers(id);
    assert.ok(left.pids.length > 0, "the killed run's machine still runs");
    assert.ok(
      left.cgroups.length > 0 && left.netns.length === 2 && left.links.length === 1,
      JSON.stringify(left),
    );
    assert.ok(left.dir);

    const next = await openBoxRun();
    try {
      assert.deepEqual(await leftovers(id), {
        pids: [],
        cgroups: [],
        netns: [],
        links: [],
        dir: false,
      });
      for (const pid of left.pids) {
        assert.equal(await processLives(pid), false, `process ${pid} is gone`);
      }
    } finally {
      await next.close();
    }
  },
);

/**
 * A machine harness run to be killed (tests/box/machine_cleanup_test.ts): opens a run, boots one
 * machine (a trivial user-data), prints `booted <run id> <nspawn pid>` and waits to be killed.
 *
 *   deno run -A tests/box/killed_run.ts ROOTFS
 */

import { openBoxRun } from "../support/box_run.ts";
import { createVpc } from "../support/box_vpc.ts";
import { Machine } from "../support/machine.ts";

if (import.meta.main) {
  const [rootfs] = Deno.args;
  const run = await openBoxRun();
  const vpc = await createVpc(run);
  const machine = await Machine.create({
    run,
    vpc,
    name: "k0",
    index: 0,
    rootfs,
    userData: "#!/bin/sh\necho user-data ran\n",
  });
  await machine.boot();
  await machine.waitUserData(120_000);
  console.log(`booted ${run.id}`);
  await new Promise(() => {}); // until killed
}

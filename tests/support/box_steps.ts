/**
 * The steps of a machine harness test: each is named, timed on stderr, and on failure prints the
 * machine's report (cloud-init output, failed units, journals: `Machine.report`) and fails with
 * the step's name; `until` polls a condition with a bound.
 */

import { type Machine, MachineError } from "./machine.ts";

/** Runs one named step; `journals` are units whose journal a failure report shows. */
export type Step = <T>(name: string, fn: () => Promise<T>, journals?: string[]) => Promise<T>;

/**
 * The step runner of a test whose machines (once made) `machines()` returns; a failure report
 * shows, for each running machine, the state of each of `units` and the journal of those not
 * active. With PODMIN_BOX_HOLD=FILE a failed step first leaves the box running until FILE is
 * removed, for a person to look inside (`ip netns exec <run>-m0 …`, `nsenter`).
 */
export function machineSteps(
  machines: () => Machine | Machine[] | undefined,
  units: string[],
): Step {
  return async (name, fn, journals = []) => {
    const started = Date.now();
    console.error(`step ${name} ...`);
    try {
      const result = await fn();
      console.error(`step ${name}: done (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      return result;
    } catch (err) {
      // A MachineError carries the machine's report already.
      const reports = [];
      if (!(err instanceof MachineError)) {
        for (const m of [machines() ?? []].flat()) {
          if (m.running) reports.push(await m.report(units, journals).catch((e) => String(e)));
        }
      }
      console.error(`step ${name} FAILED: ${err}\n${reports.join("\n")}`);
      await holdForInspection();
      throw new Error(`step "${name}" failed: ${(err as Error).message}`);
    }
  };
}

/** With PODMIN_BOX_HOLD=FILE: writes FILE and waits until a person removes it. */
async function holdForInspection(): Promise<void> {
  const file = Deno.env.get("PODMIN_BOX_HOLD");
  if (!file) return;
  await Deno.writeTextFile(file, "remove this file to let the failed test clean up\n");
  console.error(`holding the box until ${file} is removed`);
  while (await Deno.stat(file).then(() => true, () => false)) {
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** Polls `check` (which says what it saw) until it returns true; throws with the last answer. */
export async function until(
  what: string,
  timeoutMs: number,
  check: () => Promise<[boolean, string]>,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let seen = "";
  while (true) {
    const [ok, said] = await check().catch((e) => [false, String(e)] as [boolean, string]);
    seen = said;
    if (ok) return said;
    if (Date.now() > deadline) throw new Error(`${what}: not reached (last: ${seen})`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

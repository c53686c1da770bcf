/**
 * The steps of a machine harness test: each is named, timed on stderr, and on failure prints the
 * machine's report (cloud-init output, failed units, journals: `Machine.report`) and fails with
 * the step's name; `until` polls a condition with a bound.
 */

import { type Machine, MachineError } from "./machine.ts";

/** Runs one named step; `journals` are units whose journal a failure report shows. */
export type Step = <T>(name: string, fn: () => Promise<T>, journals?: string[]) => Promise<T>;

/**
 * The step runner of a test whose machine (once made) `machine()` returns; a failure report
 * shows the state of each of `units` and the journal of those not active.
 */
export function machineSteps(machine: () => Machine | undefined, units: string[]): Step {
  return async (name, fn, journals = []) => {
    const started = Date.now();
    try {
      const result = await fn();
      console.error(`step ${name}: done (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      return result;
    } catch (err) {
      // A MachineError carries the machine's report already.
      const m = machine();
      const report = m?.running && !(err instanceof MachineError)
        ? await m.report(units, journals).catch((e) => String(e))
        : "";
      console.error(`step ${name} FAILED: ${err}\n${report}`);
      throw new Error(`step "${name}" failed: ${(err as Error).message}`);
    }
  };
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

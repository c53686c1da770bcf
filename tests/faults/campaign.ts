/**
 * The fault campaign's frame: attacks that each try a bounded number of cases from a seeded
 * generator and report what they tried and what they found. `deno task faults` runs every attack
 * at full size (`main.ts`); `faults_test.ts` runs a bounded subset in the test suite.
 */

/** A seeded generator (xorshift32): the same seed replays the same cases. */
export class Rand {
  #x: number;
  constructor(seed: number) {
    this.#x = seed >>> 0 || 1;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let x = this.#x;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#x = x >>> 0;
    return this.#x / 2 ** 32;
  }
  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** One element of a list. */
  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)];
  }
}

/** Where the kills of a kill -9 attack landed (the measuring runs are not kill trials). */
export interface KillTally {
  /** Runs the attack tried to kill. */
  trials: number;
  /** Kills that landed mid-run: after the program's first write and before it completed. */
  midRun: number;
  /** Kills that landed before the program wrote anything. */
  beforeWrite: number;
  /** Runs that completed before the kill. */
  finished: number;
}

/** What one attack found. */
export interface AttackReport {
  name: string;
  /** Cases tried (for the kill attacks, the measuring runs included). */
  tried: number;
  /** One line per finding (a crash, a hang, a 5xx for a client error, a read outside…). */
  findings: string[];
  ms: number;
  /** The kill attacks: where their kills landed. */
  kills?: KillTally;
}

/** One attack: `cases` attempts from `seed`, stopping early at `deadline` (ms since epoch). */
export interface Attack {
  name: string;
  /** What it tries, one line. */
  tries: string;
  run(options: { cases: number; seed: number; deadline: number }): Promise<AttackReport>;
}

/** Keeps the first few findings of each kind, so a systematic failure does not flood the report. */
export class Findings {
  readonly lines: string[] = [];
  readonly #perKind = new Map<string, number>();
  add(kind: string, detail: string): void {
    const n = (this.#perKind.get(kind) ?? 0) + 1;
    this.#perKind.set(kind, n);
    if (n <= 5) this.lines.push(`${kind}: ${detail}`);
    else if (n === 6) this.lines.push(`${kind}: … (more of this kind not listed)`);
  }
}

/** Rejects when `p` takes longer than `ms`; a hang is a finding, not a stuck campaign. */
export function bounded<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A part of the agent: its name, its flags (declared once: the option table, the defaults, the
 * help lines and the typed values all come from the declarations), its lifecycle (`start`, `stop`,
 * `once`), its status file and the events it publishes or consumes through a small typed hub.
 *
 * `podmin-agent run` composes parts; a feature folder exports its own.
 */

import { type CommandContext, type OptionSpec } from "../core/kit/cli_kit.ts";
import type { Logger } from "../core/kit/log.ts";
import type { ClusterSnapshot } from "../core/model/endpoint_snapshot.ts";
import type { ObjectStore } from "../core/store/object_store.ts";

/** One flag, declared once. */
export interface FlagSpec {
  type: "string" | "boolean";
  /** The default of a string flag (parsing applies it; the help shows it as `{default}`). */
  default?: string;
  /** The help's placeholder of the value, e.g. `DIR`. */
  arg?: string;
  /**
   * The help text; `{default}` is replaced by the default, each `\n` starts an indented line, and
   * a text that starts with `\n` begins under the flag.
   */
  help: string;
}

/** A part's flags by name (without the leading `--`), in help order. */
export type FlagSpecs = Record<string, FlagSpec>;

/** The typed value of one declared flag. */
export type FlagValue<F extends FlagSpec> = F extends { type: "boolean" } ? boolean
  : F extends { default: string } ? string
  : string | undefined;

/** The typed values of declared flags. */
export type FlagValues<F extends FlagSpecs> = { [K in keyof F]: FlagValue<F[K]> };

/** The help column of flag texts. */
const HELP_COLUMN = 28;

/** The option table (for parsing, with the defaults) of declared flags. */
export function flagOptions(flags: FlagSpecs): OptionSpec {
  const options: OptionSpec = {};
  for (const [name, f] of Object.entries(flags)) {
    options[name] = f.type === "boolean"
      ? { type: "boolean", default: false }
      : f.default === undefined
      ? { type: "string" }
      : { type: "string", default: f.default };
  }
  return options;
}

/** The help lines of declared flags (two-space indent, texts at one column). */
export function flagHelp(flags: FlagSpecs): string {
  const lines: string[] = [];
  const indent = " ".repeat(HELP_COLUMN);
  for (const [name, f] of Object.entries(flags)) {
    const head = `  --${name}${f.arg ? ` ${f.arg}` : ""}`;
    const text = f.help.replaceAll("{default}", f.default ?? "").split("\n");
    if (text[0] === "") lines.push(head);
    else {lines.push(
        head.length < HELP_COLUMN ? head.padEnd(HELP_COLUMN) + text[0] : `${head}  ${text[0]}`,
      );}
    for (const more of text.slice(1)) lines.push(indent + more);
  }
  return lines.join("\n");
}

/** The values of declared flags as parsed (defaults applied by the option table). */
export function readFlags<F extends FlagSpecs>(ctx: CommandContext, flags: F): FlagValues<F> {
  const values: Record<string, string | boolean | undefined> = {};
  for (const [name, f] of Object.entries(flags)) {
    const v = ctx.values[name];
    values[name] = f.type === "boolean" ? v === true : typeof v === "string" ? v : f.default;
  }
  return values as FlagValues<F>;
}

/** `--state-dir`: where the agent writes its status files (read by `status` and `dataplane`). */
export const STATE_DIR_FLAG = {
  type: "string",
  default: "/run/podmin/agent",
  arg: "DIR",
  help: "where status.json is written (default {default})",
} as const satisfies FlagSpec;

/** Subscribers of a hub's events, typed by event name. */
export class Hub<E extends Record<string, unknown>> {
  readonly #subscribers = new Map<keyof E, ((payload: never) => void)[]>();

  /** Calls `fn` on every later `emit` of `event`. */
  on<K extends keyof E>(event: K, fn: (payload: E[K]) => void): void {
    const list = this.#subscribers.get(event) ?? [];
    list.push(fn as (payload: never) => void);
    this.#subscribers.set(event, list);
  }

  /** Hands `payload` to every subscriber of `event`, in subscription order. */
  emit<K extends keyof E>(event: K, ...payload: E[K] extends void ? [] : [E[K]]): void {
    for (const fn of this.#subscribers.get(event) ?? []) {
      (fn as (payload: E[K] | undefined) => void)(payload[0]);
    }
  }
}

/** The events parts publish and consume (what used to be closures of the run wiring). */
export interface AgentEvents extends Record<string, unknown> {
  /** The Services list changed (whoever refreshed it). */
  servicesChanged: void;
  /** The mesh received a newer cluster snapshot. */
  meshSnapshot: ClusterSnapshot;
  /** A kubelet Pods API event (new Pod veths). */
  podsEvent: void;
  /** This node's Ready Pods or endpoints changed, or its Pods API problem did. */
  localEndpointsChanged: void;
  /** The deployments pass changed the node's convergence or the index generation it applied. */
  convergenceChanged: void;
  /** A rollout's handover withdrew a Pod from this node's endpoints, or released one. */
  podsWithdrawn: void;
}

/** The agent's hub. */
export type AgentHub = Hub<AgentEvents>;

/** What every part of one agent shares. */
export interface PartContext {
  store: ObjectStore;
  hub: AgentHub;
  /** `--state-dir`: where the status files go. */
  stateDir: string;
  log: Logger;
}

/** One part of the agent. */
export interface Part {
  /** Names it in logs. */
  readonly name: string;
  /** Its status file under `--state-dir`, when it writes one. */
  readonly statusFile?: string;
  /** Starts its loops (after every part was built). */
  start?(): void | Promise<void>;
  /** Stops them, waiting for a running pass. */
  stop?(): Promise<void>;
  /** `--once`: one pass. */
  once?(): Promise<void>;
  /** After every part stopped: a last step (give a lease up, remove a record). */
  release?(): Promise<void>;
}

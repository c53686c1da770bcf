/**
 * `dns/rollouts/<namespace>/<name>.json`: a Deployment's rollout across its NodeGroup (spec §5.5,
 * §7.1 "Budget"). No control plane decides who may move to a new spec: each agent admits itself
 * by a conditional write (`casUpdate`) on this object, so at most the budget's worth of nodes is in
 * transition at once, whatever node coordinates the mesh. The CLI pauses and resumes it.
 *
 * The changes are pure functions of the current object (`requestAdmission`, `releaseAdmission`,
 * `haltRollout`, `setPaused`), applied inside the CAS loop; the object is untrusted input
 * (`parseRolloutState`).
 */

import { deploymentRolloutKey } from "./bucket_layout.ts";
import type { CasObject } from "../store/cas_update.ts";
import { API_VERSION } from "../model/resources.ts";
import { ValidationError } from "../kit/errors.ts";
import { checkNodeId, isDnsLabel } from "../model/names.ts";
import { maxUnavailableNodes } from "../model/rollout.ts";

/** Largest rollout object read back (10,000 nodes with their admissions fit). */
export const ROLLOUT_STATE_BYTES = 1024 * 1024;
/** Most nodes one rollout object lists. */
export const MAX_ROLLOUT_NODES = 10_000;
/** Longest reason kept (one line). */
const MAX_REASON = 512;

const SPEC_REF = /^sha256:[0-9a-f]{64}$/;
const NONCE = /^[0-9a-f]{8,64}$/;

/** A node admitted into the transition to `spec`: it holds one unit of the budget. */
export interface Admission {
  node: string;
  /** Random per admission: others time an admission by the first moment they saw this nonce. */
  nonce: string;
  /** The node's wall clock when it wrote (informational: nobody computes with it). */
  at: string;
}

/** The halt of a rollout: a node's new Pod missed its progress deadline. */
export interface RolloutHalt {
  node: string;
  reason: string;
  at: string;
}

/** The document. */
export interface RolloutState {
  apiVersion: typeof API_VERSION;
  kind: "RolloutState";
  namespace: string;
  name: string;
  /** No new admission while true (the CLI's `rollout pause`); kept across specs. */
  paused: boolean;
  /** The spec being rolled out (absent: no rollout yet, e.g. paused before any). */
  spec?: string;
  /** The index generation that named `spec`: an agent with an older index never resets it. */
  generation: number;
  /** The spec the first admitted node left (restored cluster-wide by `autoRevert`). */
  from?: string;
  /** Nodes that asked for admission to `spec`: the NodeGroup size a percentage is taken of. */
  nodes: string[];
  /** Nodes in transition to `spec`. */
  admitted: Admission[];
  /** Set once a node failed `spec`: nobody is admitted to it any more. */
  halted?: RolloutHalt;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

/** One line of at most 512 characters, control characters replaced. */
export function oneLineReason(s: string): string {
  // deno-lint-ignore no-control-regex
  return s.replace(/[\x00-\x1f\x7f]/g, " ").slice(0, MAX_REASON);
}

/** The empty state of `namespace/name`. */
export function emptyRolloutState(ref: { namespace: string; name: string }): RolloutState {
  return {
    apiVersion: API_VERSION,
    kind: "RolloutState",
    namespace: ref.namespace,
    name: ref.name,
    paused: false,
    generation: 0,
    nodes: [],
    admitted: [],
  };
}

/** Parses and validates rollout state bytes of `namespace/name`; throws `ValidationError`. */
export function parseRolloutState(
  bytes: Uint8Array,
  ref: { namespace: string; name: string },
): RolloutState {
  const key = deploymentRolloutKey(ref.namespace, ref.name);
  const bad = (why: string) => new ValidationError(`${key}: ${why}`);
  let d: unknown;
  try {
    d = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw bad(`not valid JSON: ${(err as Error).message}`);
  }
  if (!isObj(d)) throw bad("not an object");
  if (d.apiVersion !== API_VERSION || d.kind !== "RolloutState") {
    throw bad(`expected ${API_VERSION} RolloutState`);
  }
  if (d.namespace !== ref.namespace || d.name !== ref.name || !isDnsLabel(d.name)) {
    throw bad("names another Deployment");
  }
  const allowed = [
    "apiVersion",
    "kind",
    "namespace",
    "name",
    "paused",
    "spec",
    "generation",
    "from",
    "nodes",
    "admitted",
    "halted",
  ];
  for (const k of Object.keys(d)) if (!allowed.includes(k)) throw bad(`unknown field ${k}`);
  if (typeof d.paused !== "boolean") throw bad("paused must be true or false");
  for (const f of ["spec", "from"] as const) {
    if (d[f] !== undefined && (typeof d[f] !== "string" || !SPEC_REF.test(d[f] as string))) {
      throw bad(`${f} must be sha256:<64 hex>`);
    }
  }
  if (!Number.isSafeInteger(d.generation) || (d.generation as number) < 0) {
    throw bad("generation must be a whole number");
  }
  const node = (v: unknown, at: string) => {
    try {
      return checkNodeId(v);
    } catch {
      throw bad(`${at} is not a node id`);
    }
  };
  const time = (v: unknown, at: string) => {
    if (typeof v !== "string" || v.length > 40 || Number.isNaN(Date.parse(v))) {
      throw bad(`${at} must be a time`);
    }
    return v;
  };
  if (!Array.isArray(d.nodes) || d.nodes.length > MAX_ROLLOUT_NODES) {
    throw bad(`nodes must be a list of at most ${MAX_ROLLOUT_NODES}`);
  }
  const nodes = d.nodes.map((n, i) => node(n, `nodes[${i}]`));
  if (new Set(nodes).size !== nodes.length) throw bad("nodes lists a node twice");
  if (!Array.isArray(d.admitted) || d.admitted.length > nodes.length) {
    throw bad("admitted must be a list of nodes it lists");
  }
  const admitted = d.admitted.map((a: unknown, i: number): Admission => {
    const at = `admitted[${i}]`;
    if (!isObj(a)) throw bad(`${at} is not an object`);
    const n = node(a.node, `${at}.node`);
    if (!nodes.includes(n)) throw bad(`${at}.node is not in nodes`);
    if (typeof a.nonce !== "string" || !NONCE.test(a.nonce)) throw bad(`${at}.nonce is invalid`);
    return { node: n, nonce: a.nonce, at: time(a.at, `${at}.at`) };
  });
  if (new Set(admitted.map((a) => a.node)).size !== admitted.length) {
    throw bad("admitted lists a node twice");
  }
  let halted: RolloutHalt | undefined;
  if (d.halted !== undefined) {
    const h = d.halted;
    if (!isObj(h)) throw bad("halted is not an object");
    halted = {
      node: node(h.node, "halted.node"),
      reason: oneLineReason(String(h.reason ?? "")),
      at: time(h.at, "halted.at"),
    };
  }
  if ((admitted.length || halted) && d.spec === undefined) throw bad("admissions without a spec");
  return {
    ...emptyRolloutState(ref),
    paused: d.paused,
    ...(d.spec !== undefined ? { spec: d.spec as string } : {}),
    generation: d.generation as number,
    ...(d.from !== undefined ? { from: d.from as string } : {}),
    nodes,
    admitted,
    ...(halted ? { halted } : {}),
  };
}

/** The rollout state of `namespace/name` as a CAS object (absent: no rollout yet). */
export function rolloutStateObject(
  ref: { namespace: string; name: string },
): CasObject<RolloutState> {
  return {
    key: deploymentRolloutKey(ref.namespace, ref.name),
    parse: (bytes) => parseRolloutState(bytes, ref),
    serialize: (s) => new TextEncoder().encode(JSON.stringify(s, null, 1) + "\n"),
    empty: () => emptyRolloutState(ref),
    contentType: "application/json",
    maxBytes: ROLLOUT_STATE_BYTES,
  };
}

/** What an admission request found. */
export type AdmissionVerdict =
  /** This node holds the admission (its nonce is in `admitted`). */
  | "admitted"
  /** The budget is used up: wait. */
  | "waiting"
  /** The rollout is paused. */
  | "paused"
  /** The rollout of this spec halted. */
  | "halted"
  /** The object is for a newer index than this node's: read the index again first. */
  | "stale";

/** A request for admission to `spec`. */
export interface AdmissionRequest {
  node: string;
  spec: string;
  /** The spec the node runs now. */
  from?: string;
  /** The generation of the index that names `spec`. */
  generation: number;
  /** The target spec's `spec.rollout.maxUnavailable`. */
  maxUnavailable: number | string;
  /** A fresh random nonce for this admission. */
  nonce: string;
  /** `node/nonce` of admissions presumed dead (their holders' transitions must be over). */
  expired: Set<string>;
  /** Wall clock, ISO (informational). */
  at: string;
}

/**
 * The state after `request`, and the verdict; `state` undefined when nothing needs writing. A
 * state for another spec is reset to `spec` (pause is kept). The node's own earlier admission
 * (another nonce: a restarted agent, an expired one) is replaced, so it never counts twice.
 */
export function requestAdmission(
  current: RolloutState,
  request: AdmissionRequest,
): { state?: RolloutState; verdict: AdmissionVerdict } {
  let s = current;
  let changed = false;
  if (s.spec !== request.spec) {
    if (s.generation > request.generation) return { verdict: "stale" };
    s = {
      ...emptyRolloutState(s),
      paused: s.paused,
      spec: request.spec,
      generation: request.generation,
      ...(request.from ? { from: request.from } : {}),
    };
    changed = true;
  }
  if (s.halted) return { state: changed ? s : undefined, verdict: "halted" };
  const mine = s.admitted.find((a) => a.node === request.node);
  if (mine?.nonce === request.nonce) return { state: changed ? s : undefined, verdict: "admitted" };
  const live = s.admitted.filter((a) =>
    a.node !== request.node && !request.expired.has(`${a.node}/${a.nonce}`)
  );
  if (live.length !== s.admitted.length) {
    s = { ...s, admitted: live };
    changed = true;
  }
  if (!s.nodes.includes(request.node)) {
    if (s.nodes.length >= MAX_ROLLOUT_NODES) return { verdict: "waiting" };
    s = { ...s, nodes: [...s.nodes, request.node].sort() };
    changed = true;
  }
  if (s.from === undefined && request.from) {
    s = { ...s, from: request.from };
    changed = true;
  }
  if (s.paused) return { state: changed ? s : undefined, verdict: "paused" };
  const budget = maxUnavailableNodes(request.maxUnavailable, s.nodes.length);
  if (s.admitted.length >= budget) return { state: changed ? s : undefined, verdict: "waiting" };
  const admission = { node: request.node, nonce: request.nonce, at: request.at };
  return { state: { ...s, admitted: [...s.admitted, admission] }, verdict: "admitted" };
}

/** Gives `node`'s admission to `spec` back (its transition ended); undefined: nothing to write. */
export function releaseAdmission(
  current: RolloutState,
  o: { node: string; spec: string },
): RolloutState | undefined {
  if (current.spec !== o.spec || !current.admitted.some((a) => a.node === o.node)) {
    return undefined;
  }
  return { ...current, admitted: current.admitted.filter((a) => a.node !== o.node) };
}

/** Halts the rollout of `spec` (first failure wins); undefined: nothing to write. */
export function haltRollout(
  current: RolloutState,
  o: { node: string; spec: string; reason: string; at: string },
): RolloutState | undefined {
  if (current.spec !== o.spec || current.halted) return undefined;
  return { ...current, halted: { node: o.node, reason: oneLineReason(o.reason), at: o.at } };
}

/** Pauses or resumes; undefined: already so. */
export function setPaused(current: RolloutState, paused: boolean): RolloutState | undefined {
  return current.paused === paused ? undefined : { ...current, paused };
}

/** The budget of a state: how many nodes may be in transition at once. */
export function rolloutBudget(state: RolloutState, maxUnavailable: number | string): number {
  return maxUnavailableNodes(maxUnavailable, state.nodes.length);
}

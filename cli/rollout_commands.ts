/**
 * `podmin rollout status | history | undo`: following and reverting a Deployment's rollout — their
 * help and flags; the implementation (cli/rollout_run.ts) loads when it runs.
 */

import type { Command } from "../core/kit/cli_kit.ts";

const rollout: Command = {
  name: "rollout",
  summary: "a Deployment's rollout: status per node, revision history, undo, pause, resume",
  help: `Usage: podmin rollout status DEPLOYMENT [-n NS] [-o text|json] [--wait [--timeout 10m]]
       podmin rollout history DEPLOYMENT [-n NS]
       podmin rollout undo DEPLOYMENT [-n NS] [--to-revision N]
       podmin rollout pause|resume DEPLOYMENT [-n NS]

  status    each live node of the Deployment's NodeGroup, from its record under
            dns/nodes/: new (its desired spec alone), surging (the new Pod runs
            beside the old one), replacing (in place), failed (the new Pod missed
            its progress deadline; the old Pod keeps serving), old (its agent has
            not taken the new spec yet) or pending, with kubelet's reason. Exit 0
            when every node is new and Ready, 1 when a node halted, 3 while in
            progress. --wait polls until complete or halted (--timeout, default
            600 s).
  history   the kept revisions (at most 10) with their images; the current one
            is marked.
  undo      applies the revision before the current one (or --to-revision N):
            a new revision, rolled out like any apply.
  pause     no node is admitted into the rollout (nodes in transition finish
            theirs); kept across applies until resume.
  resume    nodes are admitted again, within spec.rollout.maxUnavailable.

Flags:
  -n, --namespace NS    the Deployment's namespace (default default)
  -o, --output FORMAT   status: text (default) or json
  --wait                status: wait until complete or halted
  --timeout DURATION    status --wait: give up after 600, 90s or 10m
  --to-revision N       undo: the revision to go back to

Examples:
  podmin --bucket s3://my-cluster rollout status web --wait
  podmin --bucket s3://my-cluster rollout history web
  podmin --bucket s3://my-cluster rollout undo web --to-revision 3`,
  options: {
    namespace: { type: "string", short: "n" },
    output: { type: "string", short: "o" },
    wait: { type: "boolean", default: false },
    timeout: { type: "string" },
    "to-revision": { type: "string" },
  },
  positionals: true,
  words: ["status", "history", "undo", "pause", "resume"],
  run: async (ctx) => (await import("./rollout_run.ts")).runRollout(ctx),
};

/** The rollout commands. */
export const rolloutCommands: Command[] = [rollout];

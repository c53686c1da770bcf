/**
 * `podmin apply | diff | delete`: the commands that write (or preview) desired state — their
 * help and flags; each loads its implementation (cli/deploy_run.ts) when it runs.
 */

import type { Command } from "../core/kit/cli_kit.ts";

/** `-f`, `-R` and `-n` as apply, diff and delete take them. */
const FILE_OPTIONS = {
  filename: { type: "string", short: "f", multiple: true },
  recursive: { type: "boolean", short: "R", default: false },
  namespace: { type: "string", short: "n" },
} as const;

const FILE_HELP = `  -f, --filename PATH   a YAML or JSON file (several documents, or a kind: List),
                        a directory (its .yaml, .yml and .json files) or - for
                        stdin; repeatable
  -R, --recursive       read directories given with -f recursively
  -n, --namespace NS    namespace of documents that name none; a document naming
                        another namespace is refused`;

const apply: Command = {
  name: "apply",
  summary: "create or update Deployments and Services from files",
  help:
    `Usage: podmin apply -f PATH [-f PATH…] [-R] [-n NS] [--service-cidr PREFIX] [--dry-run[=server|client]]

Validates every document of every file first, then writes the changed specs
and updates deployments/index.json and services/index.json with conditional
writes (concurrent applies never lose an update). Unchanged objects are not
rewritten: applying the same files twice writes nothing the second time.
A top-level status (as 'podmin get -o yaml' prints it) is accepted and ignored.
A Deployment whose registry.podmin.internal image the store lacks is applied
with a warning.

Flags:
${FILE_HELP}
  --service-cidr PREFIX IPv6 range for Service VIPs; only used when the first
                        Service is applied (default fd00:504d::/112)
  --dry-run[=server]    compare with the bucket and print what would change;
                        write nothing
  --dry-run=client      validate the files only; no bucket needed (for CI)

Examples:
  podmin --bucket s3://my-cluster apply -f web.yaml
  podmin --bucket s3://my-cluster apply -f manifests/ -R -n staging
  podmin apply -f web.yaml --dry-run=client
  podmin --bucket s3://my-cluster get deployments -o yaml | podmin --bucket s3://other apply -f -`,
  options: {
    ...FILE_OPTIONS,
    "service-cidr": { type: "string" },
    "dry-run": { type: "string" },
  },
  rewriteArgs: (args) => args.map((a) => (a === "--dry-run" ? "--dry-run=server" : a)),
  run: async (ctx) => (await import("./deploy_run.ts")).runApply(ctx),
};

const diff: Command = {
  name: "diff",
  summary: "show what apply would change",
  help: `Usage: podmin diff -f PATH [-f PATH…] [-R] [-n NS]

Prints, per resource, whether apply would create or change it, and for changes
a line diff of the stored spec against the new one. Exit codes as kubectl's:
0 nothing would change, 1 something would, 2 or more an error (invalid
files, an unreadable bucket).

Flags:
${FILE_HELP}

Example:
  podmin --bucket s3://my-cluster diff -f web.yaml`,
  options: { ...FILE_OPTIONS },
  errorExitCode: 2,
  run: async (ctx) => (await import("./deploy_run.ts")).runDiff(ctx),
};

const del: Command = {
  name: "delete",
  summary: "delete Deployments or Services",
  help: `Usage: podmin delete KIND NAME… [-n NS]
       podmin delete KIND/NAME… [-n NS]
       podmin delete -f PATH [-R]

KIND is deployment (deployments, deploy) or service (services, svc). Removes
each object from its index; agents remove its Pods on their next poll. Every
object that exists is deleted; the ones that do not are reported (exit 1).

Flags:
${FILE_HELP}

Examples:
  podmin --bucket s3://my-cluster delete deployment web -n default
  podmin --bucket s3://my-cluster delete svc/web
  podmin --bucket s3://my-cluster delete -f web.yaml`,
  options: { ...FILE_OPTIONS },
  positionals: true,
  words: ["deployment", "service"],
  run: async (ctx) => (await import("./deploy_run.ts")).runDelete(ctx),
};

/** The desired-state commands. */
export const deployCommands: Command[] = [apply, diff, del];

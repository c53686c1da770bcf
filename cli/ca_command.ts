/**
 * `podmin ca status` and `podmin ca bundle`: the operator's view of the workload CA — their help
 * and flags; the implementation (cli/ca_run.ts, with the certificate library) loads when it runs.
 */

import type { Command } from "../core/kit/cli_kit.ts";

const ca: Command = {
  name: "ca",
  summary: "workload CA: status (certificates, leader, publication) and the trust bundle",
  help: `Usage: podmin ca status [-o text|json]
       podmin ca bundle

Reads identity/workload-ca.json and identity/ca-leader.json from the cluster
bucket. The elected agent maintains them (spec §8.5).

  status   retained CA certificates (role, fingerprint, validity, promoteAfter or
           retiredAt), the current leader, its term and the lease's age, and the
           external publication (last published sha256, or the error blocking
           promotion). Exit 1 when the state is missing or invalid or the last
           publication failed.
  bundle   the PEM trust bundle (every retained CA certificate) on stdout, after
           checking each certificate is a CA self-signed by the one shared key.

Flags:
  -o, --output text|json   status output format (default text)

Examples:
  podmin --bucket s3://my-cluster ca status
  podmin --bucket s3://my-cluster ca status -o json | jq .publication
  podmin --bucket s3://my-cluster ca bundle > podmin-ca.pem
  openssl verify -CAfile podmin-ca.pem tls.crt`,
  options: { output: { type: "string", short: "o", default: "text" } },
  positionals: true,
  run: async (ctx) => (await import("./ca_run.ts")).runCa(ctx),
};

/** The CA commands. */
export const caCommands: Command[] = [ca];

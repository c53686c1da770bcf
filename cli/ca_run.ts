/**
 * What `podmin ca status` and `podmin ca bundle` do (their help: cli/ca_command.ts): the
 * operator's view of the workload CA (spec §8.5, §9.1), read from the cluster bucket. The CLI
 * does not hold the CA key, so it checks what it can without it: every retained certificate
 * parses, matches its entry, is a CA self-signed by its own key, and all are for one key.
 */

import { type LeaseDocument, parseLeaseDocument } from "../core/bucket/bucket_lease.ts";
import { WORKLOAD_CA_LEASE, WORKLOAD_CA_STATE } from "../core/bucket/bucket_layout.ts";
import { parseCertificatesPem } from "../core/crypto/certificates.ts";
import { type CommandContext } from "../core/kit/cli_kit.ts";
import { PodminError, UsageError } from "../core/kit/errors.ts";
import { getIfExists, type ObjectStore } from "../core/store/object_store.ts";
import {
  checkCaState,
  type CheckedCaState,
  parseWorkloadCaState,
  trustBundlePem,
  WORKLOAD_CA_STATE_MAX_BYTES,
  type WorkloadCaState,
} from "../core/bucket/workload_ca_state.ts";
import { storeOf } from "./cluster_reads.ts";
import { formatAge, outputFormat, table } from "./output_format.ts";

/** The state, checked without the key (see the module comment). Throws when absent or invalid. */
async function readCheckedState(
  store: ObjectStore,
): Promise<{ state: WorkloadCaState; checked: CheckedCaState }> {
  const read = await getIfExists(store, WORKLOAD_CA_STATE, {
    maxBytes: WORKLOAD_CA_STATE_MAX_BYTES,
  });
  if (!read) {
    throw new PodminError(`${WORKLOAD_CA_STATE} does not exist in ${store.url}`, {
      hint: "the elected agent creates it on its first pass: check that agents run with " +
        "--workload-ca-key and read `podmin-agent` logs",
    });
  }
  const state = parseWorkloadCaState(read.body);
  if (!state.certificates.length) {
    throw new PodminError(`${WORKLOAD_CA_STATE} holds no certificate yet`);
  }
  // All certificates must be for the first one's key and self-signed by it.
  const first = parseCertificatesPem(state.certificates[0].pem, `${WORKLOAD_CA_STATE}`)[0];
  const key = await first.publicKey.export({ name: "ECDSA", namedCurve: "P-256" }, ["verify"]);
  return { state, checked: await checkCaState(state, key) };
}

async function readLease(
  store: ObjectStore,
): Promise<LeaseDocument | { error: string } | undefined> {
  try {
    const read = await getIfExists(store, WORKLOAD_CA_LEASE, { maxBytes: 4096 });
    return read && parseLeaseDocument(read.body);
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** What `ca status` read. */
interface CaStatusView {
  url: string;
  now: number;
  lease: LeaseDocument | { error: string } | undefined;
  state?: WorkloadCaState;
  checked?: CheckedCaState;
  problem?: string;
}

/** Prints `ca status` as text: leader, state, publication, then the certificates' table. */
function printStatus(ctx: CommandContext, view: CaStatusView): void {
  const { url, now, lease, state, checked, problem } = view;
  ctx.out(`Bucket:       ${url}`);
  if (!lease) ctx.out(`Leader:       (no lease yet)`);
  else if ("error" in lease) ctx.out(`Leader:       unreadable lease: ${lease.error}`);
  else {
    ctx.out(
      `Leader:       ${lease.holder} (term ${lease.term})${lease.released ? ", released" : ""}, ` +
        `renewed ${
          formatAge(now - Date.parse(lease.renewedAt), { signed: true })
        } ago by its clock, lease ${lease.durationMs / 1000}s`,
    );
  }
  if (state) {
    ctx.out(
      `State:        generation ${state.generation}, leaderTerm ${state.leaderTerm}` +
        `${state.writtenBy ? `, written by ${state.writtenBy}` : ""} at ${state.updatedAt}`,
    );
  }
  const pub = state?.publication;
  if (pub) {
    if (pub.publishedSha256) {
      ctx.out(`Publication:  ${pub.target}: ${pub.publishedSha256} at ${pub.publishedAt}`);
    } else ctx.out(`Publication:  ${pub.target}: never published`);
    if (pub.error) ctx.out(`Publication error: ${pub.error} (since ${pub.failedAt})`);
  }
  if (problem) ctx.out(`Error:        ${problem}`);
  if (checked) {
    ctx.out(
      `Checked:      ${checked.retained.length} certificate(s), each a CA self-signed by one key`,
    );
  }
  if (state?.certificates.length) {
    ctx.out("");
    const rows = [["ROLE", "FINGERPRINT", "NOT BEFORE", "NOT AFTER", "NOTE"]];
    for (const c of state.certificates) {
      const note = c.role === "next"
        ? `promote after ${c.promoteAfter}`
        : c.role === "retired"
        ? `retired at ${c.retiredAt}`
        : "";
      rows.push([c.role, c.fingerprint.slice(0, 16), c.notBefore, c.notAfter, note]);
    }
    for (const line of table(rows, { gap: 1, minWidths: [8, 16, 24, 24] })) ctx.out(line);
  }
}

async function status(ctx: CommandContext): Promise<number> {
  const format = outputFormat(ctx, { formats: ["text", "json"], fallback: "text" });
  const store = await storeOf(ctx);
  const now = Date.now();
  const lease = await readLease(store);
  let state: WorkloadCaState | undefined;
  let checked: CheckedCaState | undefined;
  let problem: string | undefined;
  try {
    ({ state, checked } = await readCheckedState(store));
  } catch (err) {
    problem = (err as Error).message;
  }
  const leaseView = lease && ("error" in lease ? { error: lease.error } : {
    holder: lease.holder,
    term: lease.term,
    released: lease.released,
    durationMs: lease.durationMs,
    renewedAt: lease.renewedAt,
    /** By this machine's clock against the holder's: informational only. */
    ageMs: now - Date.parse(lease.renewedAt),
  });
  const pub = state?.publication;
  const healthy = !problem && !pub?.error;
  if (format === "json") {
    ctx.out(JSON.stringify(
      {
        bucket: store.url,
        healthy,
        problem,
        generation: state?.generation,
        leaderTerm: state?.leaderTerm,
        writtenBy: state?.writtenBy,
        updatedAt: state?.updatedAt,
        lease: leaseView,
        publication: pub,
        certificates: state?.certificates.map(({ pem: _pem, ...c }) => c),
      },
      null,
      2,
    ));
    return healthy ? 0 : 1;
  }
  printStatus(ctx, { url: store.url, now, lease, state, checked, problem });
  return healthy ? 0 : 1;
}

async function bundle(ctx: CommandContext): Promise<number> {
  const { checked } = await readCheckedState(await storeOf(ctx));
  ctx.out(trustBundlePem(checked).trimEnd());
  return 0;
}

/** `podmin ca status|bundle`. */
export async function runCa(ctx: CommandContext): Promise<number | void> {
  const [sub, ...extra] = ctx.positionals;
  if (extra.length || (sub !== "status" && sub !== "bundle")) {
    throw new UsageError(`unknown ca command ${JSON.stringify(ctx.positionals.join(" "))}`, {
      hint: "use `podmin ca status` or `podmin ca bundle`",
    });
  }
  return sub === "status" ? await status(ctx) : await bundle(ctx);
}

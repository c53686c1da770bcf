/**
 * Test fixtures of workload identity: a CA key on tmpfs-like storage and a hand-built
 * `identity/workload-ca.json` (what the elected agent maintains), so certificate tests can set
 * any rotation state directly.
 */

import {
  certificatesPem,
  createCaCertificate,
  fingerprint,
  type KeyPair,
} from "../../core/crypto/certificates.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import {
  type CaEntry,
  type CaRole,
  emptyWorkloadCaState,
  serializeWorkloadCaState,
  type WorkloadCaState,
} from "../../core/bucket/workload_ca_state.ts";
import { WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";

const DAY = 24 * 3600_000;

/** A CA certificate entry for `keys` with `role`, valid from `from` for `days`. */
export async function caEntry(options: {
  keys: KeyPair;
  role: CaRole;
  name: string;
  from: Date;
  days?: number;
}): Promise<CaEntry> {
  const notAfter = new Date(options.from.getTime() + (options.days ?? 365) * DAY);
  const cert = await createCaCertificate({
    keys: options.keys,
    commonName: options.name,
    notBefore: options.from,
    notAfter,
  });
  return {
    role: options.role,
    pem: certificatesPem([cert]),
    fingerprint: await fingerprint(cert),
    notBefore: cert.notBefore.toISOString(),
    notAfter: cert.notAfter.toISOString(),
    addedAt: options.from.toISOString(),
  };
}

/** Writes a state with `certificates` (unconditionally: tests own the bucket). */
export async function writeCaState(
  store: ObjectStore,
  certificates: CaEntry[],
  generation = 1,
): Promise<WorkloadCaState> {
  const state = {
    ...emptyWorkloadCaState(),
    generation,
    leaderTerm: 1,
    certificates,
    updatedAt: new Date().toISOString(),
  };
  await store.put(WORKLOAD_CA_STATE, serializeWorkloadCaState(state), {
    contentType: "application/json",
  });
  return state;
}

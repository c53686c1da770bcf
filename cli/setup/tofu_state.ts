/**
 * The cluster's saved OpenTofu state (`INFRA_STATE` in the cluster bucket, written by OpenTofu's
 * S3 backend), as setup and teardown read it: which resources it manages, and the backend's lock
 * file (`<state key>.tflock`, `use_lockfile`) a killed `tofu` leaves behind.
 *
 * Setup reads the state to know what this cluster created: a VPC or internet gateway the state
 * manages stays a managed resource on every later run (never turned into a data lookup, which
 * would make OpenTofu destroy it).
 */

import { INFRA_STATE } from "../../core/bucket/bucket_layout.ts";
import { PodminError } from "../../core/kit/errors.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";

/** The S3 backend's lock object beside the state (OpenTofu ≥ 1.10 `use_lockfile`). */
export const INFRA_STATE_LOCK = `${INFRA_STATE}.tflock`;

/** One resource (or data source) of the state, with the attributes of each instance. */
export interface StateResource {
  /** Its configuration address: `aws_vpc.main`, `data.aws_vpc.main`. */
  address: string;
  mode: "managed" | "data";
  type: string;
  name: string;
  /** Attributes of each instance (`id`, `cidr_block`, …). */
  instances: Record<string, unknown>[];
}

/** A parsed state: its resources in file order. */
export interface SavedState {
  resources: StateResource[];
}

/** Parses OpenTofu's state JSON (format version 4). */
export function parseState(bytes: Uint8Array, where = INFRA_STATE): SavedState {
  let doc: {
    version?: number;
    resources?: {
      module?: string;
      mode?: string;
      type?: string;
      name?: string;
      instances?: { attributes?: Record<string, unknown> }[];
    }[];
  };
  try {
    doc = JSON.parse(new TextDecoder().decode(bytes));
  } catch (err) {
    throw new PodminError(`${where} is not an OpenTofu state (not JSON)`, {
      cause: err,
      hint: "restore the state from the bucket's object versions, or remove it if nothing exists",
    });
  }
  if (doc.version !== 4 || !Array.isArray(doc.resources ?? [])) {
    throw new PodminError(`${where}: unsupported OpenTofu state format (version ${doc.version})`, {
      hint: "Podmin reads state format 4 (OpenTofu 1.x, Terraform ≥ 0.12)",
    });
  }
  return {
    resources: (doc.resources ?? []).map((r) => {
      const mode = r.mode === "data" ? "data" : "managed";
      const local = `${r.type}.${r.name}`;
      const address = `${r.module ? `${r.module}.` : ""}${mode === "data" ? "data." : ""}${local}`;
      return {
        address,
        mode,
        type: String(r.type),
        name: String(r.name),
        instances: (r.instances ?? []).map((i) => i.attributes ?? {}),
      };
    }),
  };
}

/** The cluster's saved state, or undefined when there is none yet (no apply has run). */
export async function readSavedState(store: ObjectStore): Promise<SavedState | undefined> {
  const got = await getIfExists(store, INFRA_STATE);
  return got && parseState(got.body, `${store.url}/${INFRA_STATE}`);
}

/** The attributes of the managed resource `type.name` (its first instance), if the state has it. */
export function managedResource(
  state: SavedState | undefined,
  type: string,
  name: string,
): Record<string, unknown> | undefined {
  return state?.resources.find((r) => r.mode === "managed" && r.type === type && r.name === name)
    ?.instances[0];
}

/** What OpenTofu writes into the lock object (the fields Podmin reports). */
export interface StateLock {
  /** The lock ID `tofu force-unlock` takes. */
  id: string;
  operation?: string;
  who?: string;
  version?: string;
  created?: string;
  /** The lock object's ETag (a release removes exactly this lock, not a newer one). */
  etag: string;
}

/** The state's lock object, if one is there (a running or killed `tofu`). */
export async function readStateLock(store: ObjectStore): Promise<StateLock | undefined> {
  const got = await getIfExists(store, INFRA_STATE_LOCK);
  if (!got) return undefined;
  let info: Record<string, unknown> = {};
  try {
    info = JSON.parse(new TextDecoder().decode(got.body));
  } catch { /* an unreadable lock is still a lock: reported without its details */ }
  const text = (k: string) => (typeof info[k] === "string" ? info[k] as string : undefined);
  return {
    id: text("ID") ?? "",
    operation: text("Operation"),
    who: text("Who"),
    version: text("Version"),
    created: text("Created"),
    etag: got.info.etag,
  };
}

/** One line about a lock: its object, ID, operation, holder and age, for errors and logs. */
export function describeLock(store: ObjectStore, lock: StateLock): string {
  const by = [
    lock.operation && `${lock.operation}`,
    lock.who && `by ${lock.who}`,
    lock.version && `(OpenTofu ${lock.version})`,
    lock.created && `since ${lock.created}`,
  ].filter(Boolean).join(" ");
  return `${store.url}/${INFRA_STATE_LOCK} (lock ID ${lock.id || "unreadable"}${
    by ? `, ${by}` : ""
  })`;
}

/**
 * Fails when the state is locked: a `tofu` of this cluster is running, or one was killed and
 * left its lock. `release` is the command that releases it (named in the hint).
 */
export async function refuseLockedState(
  store: ObjectStore,
  { release }: { release: (lockId: string) => string },
): Promise<void> {
  const lock = await readStateLock(store);
  if (!lock) return;
  throw new PodminError(`the cluster's OpenTofu state is locked: ${describeLock(store, lock)}`, {
    hint:
      `if no setup or teardown of this cluster is running (a killed tofu leaves its lock behind), release it: ${
        release(lock.id)
      }`,
  });
}

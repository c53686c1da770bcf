/**
 * The coordinator's reads of the objects it announces for change notification (spec §7.9): a
 * conditional GET per call; the announcement is the ETag it holds ("" when the object is absent).
 * Content is not judged here: an object that does not parse is announced too (without a change),
 * every member then reads it and keeps its own last good value, as it would when polling directly.
 * The deployments index's poller also finds what changed (changes over the mesh).
 */

import { type DeploymentIndex, pollDeploymentIndex } from "../../core/bucket/deployment_index.ts";
import {
  diffIndexes,
  INDEX_CHANGE_LIMITS,
  type IndexChange,
  withInlineSpecs,
} from "../../core/bucket/index_change.ts";
import { specKey } from "../../core/bucket/spec_objects.ts";
import type { IndexAnnouncement } from "../../core/model/endpoint_snapshot.ts";
import { NotFoundError } from "../../core/kit/errors.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { SERVICE_INDEX, WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import { LIMITS } from "../../core/kit/limits.ts";
import { WORKLOAD_CA_STATE_MAX_BYTES } from "../../core/bucket/workload_ca_state.ts";
import type { Announcers, PolledAnnouncement } from "./coordinator.ts";

/**
 * A poller of `deployments/index.json` (with its generation); store errors are thrown. When the
 * index changed from one it read before, the announcement carries the change (spec §7.9, changes
 * over the mesh) with the new specs inline as far as `INDEX_CHANGE_LIMITS` allow, each read once
 * from the bucket and verified against its digest (a spec that cannot be read or is too large is
 * left out: the members that need it read it themselves).
 */
export function indexPoller(store: ObjectStore): () => Promise<PolledAnnouncement> {
  let etag: string | undefined;
  let generation: number | undefined;
  /** The last index read (absent: the empty index, ETag ""); undefined after a rejected one. */
  let last: { etag: string; index: DeploymentIndex } | undefined;
  return async () => {
    const poll = await pollDeploymentIndex(store, etag);
    let change: IndexChange | undefined;
    if (poll.state === "absent" || poll.state === "changed") {
      const next = { etag: poll.state === "changed" ? poll.etag : "", index: poll.index };
      if (last && last.etag !== next.etag) {
        change = await withInlineSpecs(diffIndexes(last, next), (ref) => inlineSpec(store, ref));
      }
      last = next;
    }
    if (poll.state === "absent") {
      etag = undefined;
      generation = undefined;
    } else if (poll.state === "changed") {
      etag = poll.etag;
      generation = poll.index.generation;
    } else if (poll.state === "rejected") {
      etag = poll.etag;
      generation = undefined;
      last = undefined;
    }
    return {
      etag: etag ?? "",
      ...(generation !== undefined ? { generation } : {}),
      ...(change ? { change } : {}),
    };
  };
}

/** A spec's canonical bytes when they match their digest and fit inline; else undefined. */
async function inlineSpec(store: ObjectStore, ref: string): Promise<Uint8Array | undefined> {
  const got = await getIfExists(store, specKey("Deployment", ref), {
    maxBytes: INDEX_CHANGE_LIMITS.specBytes,
  }).catch(() => undefined);
  if (!got || `sha256:${sha256Hex(got.body)}` !== ref) return undefined;
  return got.body;
}

/** A poller of any object's ETag (If-None-Match; the body is not read past `maxBytes`). */
export function etagPoller(
  store: ObjectStore,
  options: { key: string; maxBytes: number },
): () => Promise<IndexAnnouncement> {
  let etag: string | undefined;
  return async () => {
    try {
      const got = await store.get(options.key, { ifNoneMatch: etag, maxBytes: options.maxBytes });
      if (!got.notModified) etag = got.info.etag;
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      etag = undefined;
    }
    return { etag: etag ?? "" };
  };
}

/**
 * What a coordinator announces and how often (spec §7.9, the cluster's idle GETs): the deployments
 * index every agent interval, the services index every second interval, the CA state (when the
 * agent keeps Pod certificates) as often as agents re-read it without the mesh.
 */
export function clusterAnnouncers(
  store: ObjectStore,
  options: { intervalMs: number; caStateMs?: number },
): Announcers {
  return {
    index: { poll: indexPoller(store) },
    services: {
      poll: etagPoller(store, { key: SERVICE_INDEX, maxBytes: LIMITS.indexBytes }),
      everyMs: 2 * options.intervalMs,
    },
    ...(options.caStateMs !== undefined
      ? {
        caState: {
          poll: etagPoller(store, {
            key: WORKLOAD_CA_STATE,
            maxBytes: WORKLOAD_CA_STATE_MAX_BYTES,
          }),
          everyMs: options.caStateMs,
        },
      }
      : {}),
  };
}

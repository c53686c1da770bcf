/**
 * The coordinator's reads of the objects it announces for change notification (spec §7.9): a
 * conditional GET per call; the announcement is the ETag it holds ("" when the object is absent).
 * Content is not judged here: an object that does not parse is announced too, every member then
 * reads it and keeps its own last good value, as it would when polling directly.
 */

import { pollDeploymentIndex } from "../../core/bucket/deployment_index.ts";
import type { IndexAnnouncement } from "../../core/model/endpoint_snapshot.ts";
import { NotFoundError } from "../../core/kit/errors.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { SERVICE_INDEX, WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import { LIMITS } from "../../core/kit/limits.ts";
import { WORKLOAD_CA_STATE_MAX_BYTES } from "../../core/bucket/workload_ca_state.ts";
import type { Announcers } from "./coordinator.ts";

/** A poller of `deployments/index.json` (with its generation); store errors are thrown. */
export function indexPoller(store: ObjectStore): () => Promise<IndexAnnouncement> {
  let etag: string | undefined;
  let generation: number | undefined;
  return async () => {
    const poll = await pollDeploymentIndex(store, etag);
    if (poll.state === "absent") {
      etag = undefined;
      generation = undefined;
    } else if (poll.state === "changed") {
      etag = poll.etag;
      generation = poll.index.generation;
    } else if (poll.state === "rejected") {
      etag = poll.etag;
      generation = undefined;
    }
    return { etag: etag ?? "", ...(generation !== undefined ? { generation } : {}) };
  };
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

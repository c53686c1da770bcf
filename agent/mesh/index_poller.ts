/**
 * The coordinator's read of `deployments/index.json` for change notification (spec §7.9): a
 * conditional GET per call; the announcement is the ETag it holds ("" when the index is absent).
 * An index that does not parse is announced too: every member then reads it and keeps its own last
 * good index, as it would when polling directly.
 */

import { pollDeploymentIndex } from "../../core/deployment_index.ts";
import type { IndexAnnouncement } from "../../core/endpoint_snapshot.ts";
import type { ObjectStore } from "../../core/object_store.ts";

/** A poller over `store`; store errors are thrown (the coordinator keeps its announcement). */
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

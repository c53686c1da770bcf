/**
 * The Services part of `podmin-agent run`: one view of the cluster's Services shared by the Pod
 * certificates, DNS, the mesh and the dataplane; its changes go out on the hub (`servicesChanged`).
 * With the mesh, a new services index is read when it is announced.
 */

import type { IndexNotifier } from "./mesh/index_notifier.ts";
import type { Part, PartContext } from "./part.ts";
import { ServicesView } from "./services_view.ts";

/** The Services part. */
export function servicesPart(o: {
  context: PartContext;
  /** `--interval`: the view's re-read interval (a conditional GET). */
  intervalMs: number;
  /** The services index's announcements, when reads follow them. */
  notifier?: IndexNotifier;
}): Part & { view: ServicesView } {
  const { store, hub, log } = o.context;
  const { notifier } = o;
  // Each refresh (whoever asks) is one conditional GET at most per interval, or per announcement.
  const view = new ServicesView({
    store,
    intervalMs: o.intervalMs,
    gate: notifier && ((held) => notifier.shouldRead(held)),
  });
  view.onChange(() => hub.emit("servicesChanged"));
  if (notifier) {
    hub.on("meshSnapshot", (snapshot) => {
      // A new services index: read now (its change reaches DNS and the dataplane on the hub).
      if (!notifier.onSnapshot(snapshot, view.etag)) return;
      void view.refresh(Date.now()).then((error) =>
        error && log.warn("services not refreshed", { error })
      );
    });
  }
  return { name: "services", view };
}

/**
 * The Services part of `podmin-agent run`: one view of the cluster's Services and the one loop
 * that refreshes it (a conditional GET per interval, or per announcement with the mesh) for the
 * Pod certificates, DNS, the mesh and the dataplane; its changes go out on the hub
 * (`servicesChanged`). With `--once` no loop runs: the certificates refresh it themselves.
 */

import { Loop } from "../loop.ts";
import { ANNOUNCED_HINT_DELAY_MS, type IndexNotifier } from "../index_notifier.ts";
import type { Part, PartContext } from "../part.ts";
import { ServicesView } from "./services_view.ts";

/** Where parts get the Services view: a part that calls `reader()` reads it. */
export interface ServicesSource {
  /** The view; its loop runs once a part asked for it (no reader, no GET). */
  reader(): ServicesView;
  /** True when the loop refreshes the view for every reader (not with `--once`). */
  readonly loopRefreshes: boolean;
}

/** The Services part. */
export interface ServicesPart extends Part, ServicesSource {}

/** The Services part. */
export function servicesPart(o: {
  context: PartContext;
  /** `--interval`: the view's re-read interval (a conditional GET). */
  intervalMs: number;
  /** The services index's announcements, when reads follow them. */
  notifier?: IndexNotifier;
  /** `--once`: no loop. */
  once: boolean;
}): ServicesPart {
  const { store, hub, log } = o.context;
  const { notifier } = o;
  const view = new ServicesView({
    store,
    intervalMs: o.intervalMs,
    gate: notifier && ((held) => notifier.shouldRead(held)),
  });
  view.onChange(() => hub.emit("servicesChanged"));
  const loop = new Loop({
    name: "services",
    intervalMs: o.intervalMs,
    // Its only hint is a services index announcement (§7.9).
    hintDelayMs: ANNOUNCED_HINT_DELAY_MS,
    log,
    pass: async () => {
      const error = await view.refresh(Date.now());
      if (error) log.warn("services not refreshed", { error });
      return {};
    },
  });
  if (notifier) {
    hub.on("meshSnapshot", (snapshot) => {
      // A new services index: read now (its change reaches its readers on the hub).
      if (notifier.onSnapshot(snapshot, view.etag)) loop.hint();
    });
  }
  let read = false;
  return {
    name: "services",
    reader() {
      read = true;
      return view;
    },
    loopRefreshes: !o.once,
    async start() {
      if (!read) return;
      loop.start();
      await loop.idle(); // the first read, before the parts that read the view start
    },
    stop: () => loop.stop(),
  };
}

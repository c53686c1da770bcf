/**
 * The agent's view of the cluster's Services: `services/index.json` (polled, last good kept) and
 * each Service's spec (read once per digest). Pod certificates take their DNS names from it (every
 * Service in the Pod's namespace whose selector matches the Pod's labels); the DNS publisher takes
 * names, VIPs and ports.
 */

import { SERVICE_INDEX } from "../../core/bucket/bucket_layout.ts";
import { LIMITS } from "../../core/kit/limits.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { type Deployment, selectorMatches, type Service } from "../../core/model/resources.ts";
import {
  emptyServiceIndex,
  parseServiceIndex,
  type ServiceEntry,
  type ServiceIndex,
} from "../../core/bucket/service_index.ts";
import { readSpec } from "../../core/bucket/spec_objects.ts";
import { PolledObject, type PolledObjectOptions } from "../polled_object.ts";

/** The cluster DNS domain of Service names. */
export const DEFAULT_CLUSTER_DOMAIN = "cluster.local";

/** The names of one Service. */
export function serviceDnsNames(
  service: { namespace: string; name: string },
  clusterDomain = DEFAULT_CLUSTER_DOMAIN,
): string[] {
  const base = `${service.name}.${service.namespace}.svc`;
  return [`${base}.${clusterDomain}`, base];
}

/** One Service: its index entry (VIP) and its spec. */
export interface KnownService {
  entry: ServiceEntry;
  spec: Service;
}

/** Keeps the Services current; answers which names select a Deployment's Pods. */
export class ServicesView {
  readonly #index: PolledObject<ServiceIndex>;
  readonly #store: ObjectStore;
  readonly #specs = new Map<string, Service>();
  readonly #domain: string;
  #services: KnownService[] = [];
  #generation?: number;
  #serviceCIDR?: string;
  #error?: string;
  #lastError?: string;
  readonly #listeners = new Set<() => void>();

  constructor(options: {
    store: ObjectStore;
    intervalMs: number;
    clusterDomain?: string;
    /** Change notification: decides when the index is read instead of the interval. */
    gate?: PolledObjectOptions<ServiceIndex>["gate"];
  }) {
    this.#store = options.store;
    this.#domain = options.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
    this.#index = new PolledObject({
      store: options.store,
      key: SERVICE_INDEX,
      parse: parseServiceIndex,
      absent: () => emptyServiceIndex(),
      intervalMs: options.intervalMs,
      maxBytes: LIMITS.indexBytes,
      gate: options.gate,
    });
  }

  /** The Services last read (the last good list while reads fail). */
  services(): readonly KnownService[] {
    return this.#services;
  }

  /** The ETag of the index held (undefined: none read, or absent). */
  get etag(): string | undefined {
    return this.#index.etag;
  }

  /** The index generation of the list, if one was read. */
  get generation(): number | undefined {
    return this.#generation;
  }

  /** The index's service CIDR (every VIP lies in it), once an index was read. */
  get serviceCIDR(): string | undefined {
    return this.#serviceCIDR;
  }

  /** What the last `refresh` returned (its error; undefined when it read well or none ran). */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  /** Calls `listener` after every change of the list (whoever refreshed it). */
  onChange(listener: () => void): void {
    this.#listeners.add(listener);
  }

  /** Refreshes when due (or `force`); returns the last error (the last good list stays in use). */
  async refresh(now: number, options: { force?: boolean } = {}): Promise<string | undefined> {
    const read = await this.#index.read({ now, force: options.force });
    if (read.changed && read.value) {
      this.#generation = read.value.generation;
      this.#serviceCIDR = read.value.serviceCIDR;
      const next: KnownService[] = [];
      const errors: string[] = [];
      for (const entry of read.value.services) {
        let spec = this.#specs.get(entry.spec);
        if (!spec) {
          try {
            spec = await readSpec(this.#store, { kind: "Service", ref: entry.spec });
            this.#specs.set(entry.spec, spec);
          } catch (err) {
            errors.push(`service ${entry.namespace}/${entry.name}: ${(err as Error).message}`);
            // Keep the names it had: a failed read never changes a certificate.
            const old = this.#services.find((s) =>
              s.entry.namespace === entry.namespace && s.entry.name === entry.name
            );
            if (old) next.push(old);
            continue;
          }
        }
        next.push({ entry, spec });
      }
      this.#services = next;
      const live = new Set(read.value.services.map((s) => s.spec));
      for (const ref of this.#specs.keys()) if (!live.has(ref)) this.#specs.delete(ref);
      this.#error = errors.length ? errors.join("; ") : undefined;
      if (errors.length) this.#index.invalidate(); // retry the missing specs next time
      for (const listener of this.#listeners) listener();
    }
    this.#lastError = read.error ?? this.#error;
    return this.#lastError;
  }

  /** Sorted DNS names of the Services that select `deployment`'s Pods. */
  namesFor(deployment: Deployment): string[] {
    const { namespace } = deployment.metadata;
    const labels = deployment.spec.template.metadata?.labels ?? {};
    const names = this.#services
      .filter((s) =>
        s.entry.namespace === namespace && selectorMatches(s.spec.spec.selector, labels)
      )
      .flatMap((s) => serviceDnsNames(s.entry, this.#domain));
    return [...new Set(names)].sort();
  }
}

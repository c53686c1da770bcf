/**
 * Writing desired state: apply, diff, delete and read Deployments and
 * Services. Spec objects are content-addressed and written before the index
 * that references them; the indexes are updated by the CAS loop.
 */

import {
  DEPLOYMENT_INDEX,
  deploymentSpecKey,
  SERVICE_INDEX,
  serviceSpecKey,
} from "../core/bucket_layout.ts";
import { casUpdate } from "../core/cas_update.ts";
import { contentAddress } from "../core/canonical_json.ts";
import {
  type DeploymentEntry,
  type DeploymentIndex,
  emptyDeploymentIndex,
  parseDeploymentIndex,
  serializeDeploymentIndex,
} from "../core/deployment_index.ts";
import { NotFoundError, PodminError, PreconditionFailedError, UsageError } from "../core/errors.ts";
import { sleep } from "../core/retry.ts";
import { getIfExists, type ObjectStore, putIfAbsent } from "../core/object_store.ts";
import type { Deployment, Resource, Service } from "../core/resources.ts";
import {
  allocateVip,
  emptyServiceIndex,
  parseServiceIndex,
  serializeServiceIndex,
  type ServiceEntry,
  type ServiceIndex,
} from "../core/service_index.ts";
import { formatIpv6Prefix, parseIpv6Prefix } from "../core/ipv6.ts";

/** What apply did (or, for diff, would do) to one resource. */
export interface Change {
  kind: "Deployment" | "Service";
  namespace: string;
  name: string;
  action: "created" | "configured" | "unchanged";
  /** The stored spec digest before the change, when there was one. */
  before?: string;
  after: string;
  /** Services: the VIP (after apply). */
  vip?: string;
}

/** Options of `applyResources`. */
export interface ApplyOptions {
  store: ObjectStore;
  resources: Resource[];
  /** Service range used when the Service index does not exist yet. */
  serviceCidr?: string;
  /** Compute the changes only; write nothing. */
  dryRun?: boolean;
}

const JSON_TYPE = "application/json";

/** Reads the deployment index (empty when absent). */
export async function readDeploymentIndex(store: ObjectStore): Promise<DeploymentIndex> {
  const got = await getIfExists(store, DEPLOYMENT_INDEX);
  return got ? parseDeploymentIndex(got.body) : emptyDeploymentIndex();
}

/** Reads the service index, or undefined when absent. */
export async function readServiceIndex(store: ObjectStore): Promise<ServiceIndex | undefined> {
  const got = await getIfExists(store, SERVICE_INDEX);
  return got ? parseServiceIndex(got.body) : undefined;
}

/** Writes a content-addressed object unless it is already there. */
async function putImmutable(store: ObjectStore, key: string, bytes: Uint8Array): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await putIfAbsent(store, key, bytes, JSON_TYPE);
      return;
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
    }
    // Lost to a concurrent writer of the same bytes; it is stored only once that write commits.
    try {
      await store.head(key);
      return;
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      await sleep(50 * (attempt + 1));
    }
  }
  throw new PodminError(`${key} could not be stored (concurrent writers kept conflicting)`, {
    hint: "retry the command",
  });
}

/** The CAS loop over deployments/index.json. */
function updateDeploymentIndex(
  store: ObjectStore,
  mutate: (current: DeploymentIndex) => DeploymentIndex | undefined,
) {
  return casUpdate<DeploymentIndex>({
    store,
    key: DEPLOYMENT_INDEX,
    parse: parseDeploymentIndex,
    serialize: serializeDeploymentIndex,
    empty: emptyDeploymentIndex,
    contentType: JSON_TYPE,
    mutate,
  });
}

/** The CAS loop over services/index.json; `empty` decides the range of a new index. */
function updateServiceIndex(
  store: ObjectStore,
  empty: () => ServiceIndex,
  mutate: (current: ServiceIndex) => ServiceIndex | undefined,
) {
  return casUpdate<ServiceIndex>({
    store,
    key: SERVICE_INDEX,
    parse: parseServiceIndex,
    serialize: serializeServiceIndex,
    empty,
    contentType: JSON_TYPE,
    mutate,
  });
}

/** Applies resources idempotently; unchanged objects cause no write at all. */
export async function applyResources(options: ApplyOptions): Promise<Change[]> {
  const { store } = options;
  const deployments = options.resources.filter((r): r is Deployment => r.kind === "Deployment");
  const services = options.resources.filter((r): r is Service => r.kind === "Service");
  const changes: Change[] = [];

  if (deployments.length) {
    const index = await readDeploymentIndex(store);
    const planned = deployments.map((d) => {
      const { bytes, sha256 } = contentAddress(d);
      const current = index.deployments.find((e) =>
        e.namespace === d.metadata.namespace && e.name === d.metadata.name
      );
      const entry: DeploymentEntry = {
        namespace: d.metadata.namespace,
        name: d.metadata.name,
        nodeGroup: d.spec.nodeGroup,
        spec: `sha256:${sha256}`,
      };
      const action: Change["action"] = !current
        ? "created"
        : current.spec === entry.spec && current.nodeGroup === entry.nodeGroup
        ? "unchanged"
        : "configured";
      changes.push({
        kind: "Deployment",
        namespace: entry.namespace,
        name: entry.name,
        action,
        before: current?.spec,
        after: entry.spec,
      });
      return { entry, bytes, sha256, action };
    });
    const dirty = planned.filter((p) => p.action !== "unchanged");
    if (dirty.length && !options.dryRun) {
      for (const p of dirty) await putImmutable(store, deploymentSpecKey(p.sha256), p.bytes);
      await updateDeploymentIndex(store, (current) => {
        let changed = false;
        const next = [...current.deployments];
        for (const { entry } of dirty) {
          const i = next.findIndex((e) => e.namespace === entry.namespace && e.name === entry.name);
          if (i >= 0 && next[i].spec === entry.spec && next[i].nodeGroup === entry.nodeGroup) {
            continue;
          }
          if (i >= 0) next[i] = entry;
          else next.push(entry);
          changed = true;
        }
        return changed
          ? { ...current, generation: current.generation + 1, deployments: next }
          : undefined;
      });
    }
  }

  if (services.length) {
    const existing = await readServiceIndex(store);
    if (existing && options.serviceCidr && !sameCidr(existing.serviceCIDR, options.serviceCidr)) {
      throw new UsageError(
        `the cluster's Service range is ${existing.serviceCIDR}, not ${options.serviceCidr}`,
        { hint: "the range is fixed when the first Service is applied; omit --service-cidr" },
      );
    }
    const empty = () => emptyServiceIndex(options.serviceCidr);
    const base = existing ?? empty();
    const planned = services.map((s) => {
      const { bytes, sha256 } = contentAddress(s);
      const current = base.services.find((e) =>
        e.namespace === s.metadata.namespace && e.name === s.metadata.name
      );
      const action: Change["action"] = !current
        ? "created"
        : current.spec === `sha256:${sha256}`
        ? "unchanged"
        : "configured";
      const change: Change = {
        kind: "Service",
        namespace: s.metadata.namespace,
        name: s.metadata.name,
        action,
        before: current?.spec,
        after: `sha256:${sha256}`,
        vip: current?.vip,
      };
      changes.push(change);
      return { s, bytes, sha256, action, change };
    });
    const dirty = planned.filter((p) => p.action !== "unchanged");
    if (dirty.length && !options.dryRun) {
      for (const p of dirty) await putImmutable(store, serviceSpecKey(p.sha256), p.bytes);
      const result = await updateServiceIndex(store, empty, (current) => {
        let changed = false;
        const next: ServiceIndex = { ...current, services: [...current.services] };
        for (const p of dirty) {
          const spec = `sha256:${p.sha256}`;
          const i = next.services.findIndex((e) =>
            e.namespace === p.s.metadata.namespace && e.name === p.s.metadata.name
          );
          if (i >= 0 && next.services[i].spec === spec) continue;
          const vip = i >= 0
            ? next.services[i].vip
            : allocateVip(next, p.s.metadata.namespace, p.s.metadata.name);
          const entry: ServiceEntry = {
            namespace: p.s.metadata.namespace,
            name: p.s.metadata.name,
            spec,
            vip,
          };
          if (i >= 0) next.services[i] = entry;
          else next.services.push(entry);
          changed = true;
        }
        return changed ? { ...next, generation: current.generation + 1 } : undefined;
      });
      for (const p of dirty) {
        p.change.vip = result.value.services.find((e) =>
          e.namespace === p.change.namespace && e.name === p.change.name
        )?.vip;
      }
    }
  }
  return changes;
}

function sameCidr(a: string, b: string): boolean {
  return formatIpv6Prefix(parseIpv6Prefix(a)) === formatIpv6Prefix(parseIpv6Prefix(b));
}

/** Deletes a Deployment or Service from its index. Throws NotFoundError when absent. */
export async function deleteResource(options: {
  store: ObjectStore;
  kind: "Deployment" | "Service";
  namespace: string;
  name: string;
}): Promise<void> {
  const { store, kind, namespace, name } = options;
  let found = false;
  const match = (e: { namespace: string; name: string }) =>
    e.namespace === namespace && e.name === name;
  if (kind === "Deployment") {
    await updateDeploymentIndex(store, (current) => {
      // Sticky: an earlier attempt may have removed it and only lost the response.
      found ||= current.deployments.some(match);
      if (!found) return undefined;
      return {
        ...current,
        generation: current.generation + 1,
        deployments: current.deployments.filter((e) => !match(e)),
      };
    });
  } else {
    const existing = await readServiceIndex(store);
    if (existing) {
      await updateServiceIndex(store, () => emptyServiceIndex(existing.serviceCIDR), (current) => {
        found ||= current.services.some(match);
        if (!found) return undefined;
        return {
          ...current,
          generation: current.generation + 1,
          services: current.services.filter((e) => !match(e)),
        };
      });
    }
  }
  if (!found) {
    throw new NotFoundError(`${kind.toLowerCase()} ${namespace}/${name} not found`, {
      hint: `list them with 'podmin get ${kind.toLowerCase()}s -n ${namespace}'`,
    });
  }
}

/**
 * Validators of every name that ends up in a bucket key, a parameter name or
 * a file name. Input from operators and from the bucket is checked here.
 */

import { ValidationError } from "../kit/errors.ts";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const OCI_COMPONENT = /^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$/;
const OCI_TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const REGISTRY_HOST = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$/;
const VALUE_KEY = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$/;

/** The reserved namespace of Podmin's own parameters; never a Kubernetes namespace. */
export const SYSTEM_NAMESPACE = "_system";

/** The namespace used when a resource omits one. */
export const DEFAULT_NAMESPACE = "default";

function fail(kind: string, value: unknown, rule: string): never {
  throw new ValidationError(`invalid ${kind} ${JSON.stringify(value)}: ${rule}`);
}

/** A DNS-1123 label: lower-case alphanumerics and '-', at most 63 characters. */
export function isDnsLabel(value: unknown): value is string {
  return typeof value === "string" && DNS_LABEL.test(value);
}

/** Checks a DNS-1123 label and returns it. */
export function checkDnsLabel(kind: string, value: unknown): string {
  if (!isDnsLabel(value)) {
    fail(
      kind,
      value,
      "use 1-63 lower-case letters, digits and '-', starting and ending alphanumeric",
    );
  }
  return value;
}

/** A cluster id (DNS label). */
export function checkClusterId(value: unknown): string {
  return checkDnsLabel("cluster id", value);
}

/** A NodeGroup name (DNS label). */
export function checkNodeGroup(value: unknown): string {
  return checkDnsLabel("NodeGroup name", value);
}

/** A namespace (DNS label; `_system` is therefore impossible). */
export function checkNamespace(value: unknown): string {
  return checkDnsLabel("namespace", value);
}

/** A Deployment, Service or Pod name (DNS label). */
export function checkObjectName(kind: string, value: unknown): string {
  return checkDnsLabel(`${kind} name`, value);
}

/** A DNS-1123 subdomain of at most 253 characters (registry hostnames, label prefixes). */
export function checkDnsSubdomain(kind: string, value: unknown): string {
  if (typeof value !== "string" || value.length > 253 || !DNS_SUBDOMAIN.test(value)) {
    fail(kind, value, "use lower-case DNS labels separated by '.'");
  }
  return value;
}

/** The key of a provider value (SSM parameter or secret leaf, and the file it is mounted as). */
export function checkValueKey(value: unknown): string {
  if (typeof value !== "string" || !VALUE_KEY.test(value)) {
    fail("value key", value, "use 1-128 letters, digits, '.', '_' or '-', not starting with '.'");
  }
  return value;
}

/** A lower-case hex SHA-256 digest. */
export function checkSha256Hex(value: unknown): string {
  if (typeof value !== "string" || !/^[0-9a-f]{64}$/.test(value)) {
    fail("sha256 digest", value, "expected 64 lower-case hex digits");
  }
  return value;
}

/** An OCI repository path (`a/b/c`), each component per the distribution spec grammar. */
export function checkRepository(value: unknown): string {
  if (typeof value !== "string" || value.length > 255) {
    fail("repository", value, "at most 255 characters");
  }
  for (const c of value.split("/")) {
    if (!OCI_COMPONENT.test(c)) {
      fail("repository", value, "components are lower-case alphanumerics separated by . _ __ -");
    }
  }
  return value;
}

/** An OCI tag. */
export function checkTag(value: unknown): string {
  if (typeof value !== "string" || !OCI_TAG.test(value)) {
    fail("tag", value, "1-128 of [A-Za-z0-9_.-], not starting with '.' or '-'");
  }
  return value;
}

/** An upstream registry host, optionally with a port (`registry.k8s.io`, `localhost:5000`). */
export function checkRegistryHost(value: unknown): string {
  if (typeof value !== "string" || value.length > 253 || !REGISTRY_HOST.test(value)) {
    fail("registry host", value, "expected a lower-case HOST or HOST:PORT");
  }
  return value;
}

const MIRROR_HOST = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(_[0-9]{1,5})?$/;

/**
 * The upstream registry as it appears in `mirror/` repository paths: the host,
 * with a port written as `_PORT` (`localhost:5000` → `localhost_5000`), because
 * `:` may not appear in an OCI repository name and `_` never appears in a host.
 */
export function mirrorHostComponent(registryHost: string): string {
  return checkRegistryHost(registryHost).replace(":", "_");
}

/** Checks a `mirror/` host component (see `mirrorHostComponent`). */
export function checkMirrorHost(value: unknown): string {
  if (typeof value !== "string" || value.length > 253 || !MIRROR_HOST.test(value)) {
    fail("mirror registry", value, "expected a lower-case HOST or HOST_PORT");
  }
  return value;
}

/** An EC2 instance id or another node id used in agent-written keys. */
export function checkNodeId(value: unknown): string {
  if (typeof value !== "string" || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(value)) {
    fail("node id", value, "1-63 of [A-Za-z0-9._-], starting alphanumeric");
  }
  return value;
}

/**
 * Image references as Pods and operators write them: the registry hostname Pods pull from, upstream
 * references (`[REGISTRY/]REPO[:TAG][@DIGEST]`) and where a mirrored upstream image lives in the
 * bucket. Pure functions; a malformed reference is a `UsageError`.
 */

import { isDigest } from "../kit/digest.ts";
import { UsageError } from "../kit/errors.ts";
import { checkRegistryHost, checkRepository, checkTag, mirrorHostComponent } from "./names.ts";

/**
 * The hostname Pod images use: `registry.podmin.internal/apps/NAME:TAG` and
 * `registry.podmin.internal/mirror/REGISTRY/NAME:TAG`. It never resolves in DNS:
 * containerd maps it to the loopback registry through certs.d/<host>/hosts.toml.
 */
export const REGISTRY_HOSTNAME = "registry.podmin.internal";

/** A parsed upstream reference. */
export interface UpstreamRef {
  /** The registry as written in references (`docker.io`, `registry.k8s.io`). */
  registry: string;
  repository: string;
  tag?: string;
  digest?: string;
}

/**
 * Parses `[REGISTRY/]REPO[:TAG][@DIGEST]` the way Docker does: a first
 * component with a dot, a colon or `localhost` is a registry; otherwise the
 * registry is docker.io, and a one-component repository gets `library/`.
 */
export function parseUpstreamRef(text: string): UpstreamRef {
  const hint = "e.g. registry.k8s.io/pause:3.10, nginx:1.27 or ghcr.io/org/app@sha256:…";
  let rest = text.trim();
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!isDigest(digest)) {
      throw new UsageError(`invalid digest in ${JSON.stringify(text)}`, { hint });
    }
  }
  const slash = rest.indexOf("/");
  const first = slash < 0 ? "" : rest.slice(0, slash);
  let registry = "docker.io";
  if (first && (first.includes(".") || first.includes(":") || first === "localhost")) {
    registry = first;
    rest = rest.slice(slash + 1);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(":");
  if (colon >= 0) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  if (registry === "index.docker.io" || registry === "registry-1.docker.io") registry = "docker.io";
  if (registry === "docker.io" && !rest.includes("/")) rest = `library/${rest}`;
  if (!tag && !digest) tag = "latest";
  try {
    checkRegistryHost(registry);
    checkRepository(rest);
    if (tag) checkTag(tag);
  } catch (err) {
    throw new UsageError(
      `invalid image reference ${JSON.stringify(text)}: ${(err as Error).message}`,
      { hint },
    );
  }
  return { registry, repository: rest, tag, digest };
}

/**
 * Where a mirrored upstream image lives: `mirror/<host>/<repository>`, a
 * registry port written `_PORT`. Pods pull `<registry-hostname>/` + this path
 * (+ `:tag` or `@digest`); `podmin mirror` writes it.
 */
export function mirrorPathOf(ref: UpstreamRef): string {
  return `mirror/${mirrorHostComponent(ref.registry)}/${ref.repository}`;
}

/** The reference Pods use for a mirrored upstream image. */
export function mirroredImageRef(ref: UpstreamRef, registryHostname: string): string {
  const suffix = ref.digest ? `@${ref.digest}` : `:${ref.tag}`;
  return `${registryHostname}/${mirrorPathOf(ref)}${suffix}`;
}

/**
 * Published vendor releases of the node programs an operator may choose by version
 * (`podmin setup --kubernetes-version`, `--crictl-version`, `--containerd-version`): where each
 * vendor publishes the file and its checksum, for both architectures. A chosen version replaces
 * that program's catalogue entries with the vendor's URLs and a `sha256Url` (the checksum file
 * beside the download), so no digest is written by hand: setup reads it, verifies the download
 * against it and records it in the dependency manifest (this is how kops handles versions newer
 * than its list).
 *
 * Layouts:
 *   kubelet     https://dl.k8s.io/release/vV/bin/linux/ARCH/kubelet            + .sha256 (HEX)
 *   crictl      https://github.com/kubernetes-sigs/cri-tools/releases/download/vV/
 *                 crictl-vV-linux-ARCH.tar.gz                                   + .sha256
 *   containerd  https://github.com/containerd/containerd/releases/download/vV/
 *                 containerd-V-linux-ARCH.tar.gz                                + .sha256sum
 *
 * A mirror (`$PODMIN_RELEASE_MIRROR`, for air-gapped sites and tests) serves the same paths under
 * its own base, host first: `<mirror>/dl.k8s.io/release/…`, `<mirror>/github.com/…`.
 */

import { UsageError } from "../../core/kit/errors.ts";
import { type Architecture, ARCHITECTURES } from "../../core/bucket/dependency_manifest.ts";
import type { CatalogEntrySpec, CatalogSpec } from "./dependency_catalog.ts";

/** The environment variable naming a mirror of the vendors' release sites. */
export const RELEASE_MIRROR_ENV = "PODMIN_RELEASE_MIRROR";

/** The programs whose version an operator may choose by flag. */
export const VERSIONED_PROGRAMS = ["kubelet", "crictl", "containerd"] as const;
/** One of them. */
export type VersionedProgram = typeof VERSIONED_PROGRAMS[number];

/** The versions chosen by flag, per program (absent: the catalogue's). */
export type ReleaseVersions = Partial<Record<VersionedProgram, string>>;

/** The setup flag of each program. */
export const VERSION_FLAGS: Record<VersionedProgram, string> = {
  kubelet: "--kubernetes-version",
  crictl: "--crictl-version",
  containerd: "--containerd-version",
};

/** Each vendor's release file and the name of its checksum file beside it (`{v}`, `{arch}`). */
const LAYOUTS: Record<VersionedProgram, { url: string; checksumSuffix: string }> = {
  kubelet: {
    url: "https://dl.k8s.io/release/v{v}/bin/linux/{arch}/kubelet",
    checksumSuffix: ".sha256",
  },
  crictl: {
    url:
      "https://github.com/kubernetes-sigs/cri-tools/releases/download/v{v}/crictl-v{v}-linux-{arch}.tar.gz",
    checksumSuffix: ".sha256",
  },
  containerd: {
    url:
      "https://github.com/containerd/containerd/releases/download/v{v}/containerd-{v}-linux-{arch}.tar.gz",
    checksumSuffix: ".sha256sum",
  },
};

/** A release version `MAJOR.MINOR.PATCH` (no leading `v`, no leading zeros); else a usage error. */
export function checkReleaseVersion(text: string, flag: string): string {
  if (!/^(0|[1-9]\d{0,3})\.(0|[1-9]\d{0,3})\.(0|[1-9]\d{0,3})$/.test(text)) {
    throw new UsageError(
      `${flag}: expected a release version MAJOR.MINOR.PATCH, got ${JSON.stringify(text)}`,
      { hint: `e.g. ${flag} 1.37.2 (without a leading "v"; pre-releases are not accepted)` },
    );
  }
  return text;
}

/**
 * The mirror base URL (http(s), no query or fragment; a trailing `/` dropped), or undefined when
 * `text` is empty or absent.
 */
export function parseReleaseMirror(text: string | undefined): string | undefined {
  if (!text) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch { /* reported below */ }
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || url.search || url.hash) {
    throw new UsageError(
      `$${RELEASE_MIRROR_ENV}: expected an http(s) base URL, got ${JSON.stringify(text)}`,
      { hint: "e.g. https://mirror.example/releases (it serves <base>/dl.k8s.io/release/…)" },
    );
  }
  return text.replace(/\/+$/, "");
}

/** The vendor's URL of `program` at `version` for `arch`, under `mirror` when given. */
export function releaseUrl(
  o: { program: VersionedProgram; version: string; arch: Architecture; mirror?: string },
): { url: string; sha256Url: string } {
  const layout = LAYOUTS[o.program];
  let url = layout.url.replaceAll("{v}", o.version).replaceAll("{arch}", o.arch);
  if (o.mirror) url = `${o.mirror}/${url.slice("https://".length)}`;
  return { url, sha256Url: url + layout.checksumSuffix };
}

/** The catalogue entries (both architectures) of `program` at `version`, digests by `sha256Url`. */
export function releaseEntries(
  o: { program: VersionedProgram; version: string; mirror?: string },
): CatalogEntrySpec[] {
  return ARCHITECTURES.map((arch) => ({
    name: o.program,
    version: o.version,
    arch,
    ...releaseUrl({ ...o, arch }),
  }));
}

/**
 * `catalog` with the entries of every program in `versions` replaced (both architectures) by the
 * vendor's release of that version; the other entries are kept as they are.
 */
export function withReleaseVersions(
  catalog: CatalogSpec,
  o: { versions: ReleaseVersions; mirror?: string },
): CatalogSpec {
  const chosen = VERSIONED_PROGRAMS.filter((p) => o.versions[p] !== undefined);
  if (!chosen.length) return catalog;
  return {
    dependencies: [
      ...catalog.dependencies.filter((e) => !(chosen as string[]).includes(e.name)),
      ...chosen.flatMap((program) =>
        releaseEntries({ program, version: o.versions[program]!, mirror: o.mirror })
      ),
    ],
  };
}

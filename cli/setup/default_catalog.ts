/**
 * The embedded default catalogue of pinned upstream node dependencies.
 *
 * Digests come from public pins (kubespray's checksums.yml) and, except where
 * noted, agree with a second independent pin (kops asset data). No public
 * source states byte sizes, so `size` is absent: setup records the size of
 * the verified download in dependencies/manifest.json. Operators pin other
 * versions with `podmin setup --dependency-catalog FILE` (same JSON shape).
 *
 * The AWS SSM Agent is not pinned here: no public source pins a digest for a
 * specific version (see docs/spec.md, "Dependencies").
 */

import type { Catalog } from "./dependency_catalog.ts";

/** The default catalogue (validated by parseCatalog in tests). */
export const DEFAULT_CATALOG: Catalog = {
  dependencies: [
    {
      name: "containerd",
      version: "2.1.6",
      arch: "amd64",
      url:
        "https://github.com/containerd/containerd/releases/download/v2.1.6/containerd-2.1.6-linux-amd64.tar.gz",
      sha256: "4793dc5c1f34ebf8402990d0050f3c294aa3c794cd5a4baa403c1cf10602326d",
    },
    {
      name: "containerd",
      version: "2.1.6",
      arch: "arm64",
      url:
        "https://github.com/containerd/containerd/releases/download/v2.1.6/containerd-2.1.6-linux-arm64.tar.gz",
      sha256: "88d6e32348c36628c8500a630c6dd4b3cb8c680b1d18dc8d1d19041f67757c6e",
    },
    {
      name: "runc",
      version: "1.3.3",
      arch: "amd64",
      url: "https://github.com/opencontainers/runc/releases/download/v1.3.3/runc.amd64",
      sha256: "8781ab9f71c12f314d21c8e85f13ca1a82d90cf475aa5131a7b543fcc5487543",
    },
    {
      name: "runc",
      version: "1.3.3",
      arch: "arm64",
      url: "https://github.com/opencontainers/runc/releases/download/v1.3.3/runc.arm64",
      sha256: "3c9a8e9e6dafd00db61f4611692447ebab4a56388bae4f82192aed67b66df712",
    },
    {
      name: "kubelet",
      version: "1.34.3",
      arch: "amd64",
      url: "https://dl.k8s.io/release/v1.34.3/bin/linux/amd64/kubelet",
      sha256: "0e759f40bbc717c05227ae3994b77786f58f59ffa0137a34958c6b26fa5bcbbd",
    },
    {
      name: "kubelet",
      version: "1.34.3",
      arch: "arm64",
      url: "https://dl.k8s.io/release/v1.34.3/bin/linux/arm64/kubelet",
      sha256: "765b740e3ad9c590852652a2623424ec60e2dddce2c6280d7f042f56c8c98619",
    },
    {
      name: "cni-plugins",
      version: "1.8.0",
      arch: "amd64",
      url:
        "https://github.com/containernetworking/plugins/releases/download/v1.8.0/cni-plugins-linux-amd64-v1.8.0.tgz",
      sha256: "ab3bda535f9d90766cccc90d3dddb5482003dd744d7f22bcf98186bf8eea8be6",
    },
    {
      name: "cni-plugins",
      version: "1.8.0",
      arch: "arm64",
      url:
        "https://github.com/containernetworking/plugins/releases/download/v1.8.0/cni-plugins-linux-arm64-v1.8.0.tgz",
      sha256: "57ce466fc3b79db1f19b8f4c63e07a1112306efa53c94fe810a2150dd9e07ddb",
    },
    {
      name: "crictl",
      version: "1.34.0",
      arch: "amd64",
      url:
        "https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.34.0/crictl-v1.34.0-linux-amd64.tar.gz",
      sha256: "a8ff2a3edb37a98daf3aba7c3b284fe0aa5bff24166d896ab9ef64c8913c9f51",
    },
    {
      name: "crictl",
      version: "1.34.0",
      arch: "arm64",
      url:
        "https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.34.0/crictl-v1.34.0-linux-arm64.tar.gz",
      sha256: "c31d252e203df5f4cf37f314bd3092eb79087e791631c1e607087c74b6d0423f",
    }, // not cross-checked against a second source
  ],
};

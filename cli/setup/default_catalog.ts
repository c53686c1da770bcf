/**
 * The embedded default catalogue of pinned upstream node dependencies.
 *
 * Pinned is tested: kubelet, containerd, crictl and CoreDNS are exactly the versions the real-node
 * and Services end-to-end tests build from the Go module proxy and run
 * (`tests/support/node_peers.ts` derives the test binaries from this catalogue, and
 * `tests/node/pinned_versions_test.ts` fails when a binary is not the pinned version).
 *
 * Digests come from public pins (kubespray's checksums.yml; kops' asset data; see
 * `../shared/pins.md` for the commits). No public source states byte sizes, so `size` is absent:
 * setup records the size of the verified download in dependencies/manifest.json. Operators pin
 * other versions with `podmin setup --dependency-catalog FILE` (same JSON shape).
 *
 * - kubelet 1.36.3: kubespray and kops agree on both architectures. It is the newest kubelet with
 *   the local Pods API (alpha in 1.36: vmconfig turns on the gate `PodsAPI` from the installed
 *   version) whose digests two public sources agree on; no public arm64 digest of a 1.37.x kubelet
 *   exists.
 * - containerd 2.1.5: the 2.1 release measured with Podmin's generated configuration on a real
 *   node (CRI pulls through hosts.toml); kubespray is its only reachable public source.
 * - runc 1.3.3 and the CNI plugins 1.8.0: kubespray and kops agree.
 * - crictl 1.34.0: kubespray (amd64 also kops); it speaks CRI v1 to any containerd 2.x.
 * - CoreDNS 1.12.1 (`coredns_<v>_linux_<arch>.tgz`, one member `coredns`): the newest release
 *   whose tarball digests two public sources agree on, for both architectures: the AUR
 *   `coredns-bin` PKGBUILD (`sha256sums_x86_64`, `sha256sums_aarch64`) and lukashornych/hole's
 *   `assets/gateway/Dockerfile` (`COREDNS_SHA256_AMD64`/`_ARM64`, from the release's
 *   `.tgz.sha256` files). The generated Corefile's `file … { reload 250ms }` is checked on it.
 * - The AWS SSM Agent 3.3.5226.0 (Session Manager and Run Command, the only way onto a node):
 *   AWS publishes GPG signatures, not digests, for its packages; both digests come from one public
 *   source, a Chef cookbook for AWS agents whose download test checks them with
 *   `shasum -a 256 --check`. Drop it with a catalogue without `amazon-ssm-agent` entries.
 * - Fluent Bit (`--otel-logs`) is not pinned: no version has two independent public sources. An
 *   operator pins the vendor's `.deb` as `fluent-bit` with `--dependency-catalog`; setup refuses
 *   `--otel-logs` without it.
 *
 * The Deno runtime (`deno`, for the agent's runtime-plus-bundle distribution, used when no
 * compiled agent binary exists) is the npm registry's `@deno/linux-x64-glibc` and
 * `@deno/linux-arm64-glibc` 2.9.6: each tarball is pinned by the registry's published integrity
 * (sha512) and the extracted `package/deno` by its sha256, measured on the extracted files (the
 * amd64 one is byte-identical to the Deno 2.9.6 this project builds with).
 */

import type { Catalog } from "./dependency_catalog.ts";

/** The default catalogue (validated by parseCatalog in tests). */
export const DEFAULT_CATALOG: Catalog = {
  dependencies: [
    {
      name: "containerd",
      version: "2.1.5",
      arch: "amd64",
      url:
        "https://github.com/containerd/containerd/releases/download/v2.1.5/containerd-2.1.5-linux-amd64.tar.gz",
      sha256: "403af72d9f956ed8a5ad5b0ac0f1e8e371a1488f2b9edf9b4ba13db0653936ea",
    },
    {
      name: "containerd",
      version: "2.1.5",
      arch: "arm64",
      url:
        "https://github.com/containerd/containerd/releases/download/v2.1.5/containerd-2.1.5-linux-arm64.tar.gz",
      sha256: "fe81122c0cc8222470fa3be51f42fa918ac29ffd956ccd2fc408c1997babd2ca",
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
      version: "1.36.3",
      arch: "amd64",
      url: "https://dl.k8s.io/release/v1.36.3/bin/linux/amd64/kubelet",
      sha256: "46707a53209f826ad0f0d62371ac69cd00e78fd9a8176cf5f6f87f18f7f8b718",
    }, // kubespray + kops agree
    {
      name: "kubelet",
      version: "1.36.3",
      arch: "arm64",
      url: "https://dl.k8s.io/release/v1.36.3/bin/linux/arm64/kubelet",
      sha256: "57205a5daf5883873d87b4914e1e00bdd7707acd075714788cfb0fc1f60bc414",
    }, // kubespray + kops agree
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
    {
      name: "coredns",
      version: "1.12.1",
      arch: "amd64",
      url:
        "https://github.com/coredns/coredns/releases/download/v1.12.1/coredns_1.12.1_linux_amd64.tgz",
      sha256: "886206d686363cd7d71c62ac47287692b954da3dfc9bcbffedd80d4b69358001",
    },
    {
      name: "coredns",
      version: "1.12.1",
      arch: "arm64",
      url:
        "https://github.com/coredns/coredns/releases/download/v1.12.1/coredns_1.12.1_linux_arm64.tgz",
      sha256: "f1c9030a7fbf3c9f5421894211b3bee62de7e77d260fc4282a0d8104376b6300",
    },
    {
      name: "amazon-ssm-agent",
      version: "3.3.5226.0",
      arch: "amd64",
      url:
        "https://s3.amazonaws.com/ec2-downloads-windows/SSMAgent/3.3.5226.0/debian_amd64/amazon-ssm-agent.deb",
      sha256: "777df4e0ac4bbc8d7d1b159db76cdb6614666bcc73141874414b8be68fb9cba3",
    }, // one source: a public Chef cookbook's download test (shasum -a 256 --check)
    {
      name: "amazon-ssm-agent",
      version: "3.3.5226.0",
      arch: "arm64",
      url:
        "https://s3.amazonaws.com/ec2-downloads-windows/SSMAgent/3.3.5226.0/debian_arm64/amazon-ssm-agent.deb",
      sha256: "2ed75ecacf633af8b48568f1d468a4849ad006ff901f63761ecb9b0daa8d90d2",
    }, // same single source
    {
      name: "deno",
      version: "2.9.6",
      arch: "amd64",
      url: "https://registry.npmjs.org/@deno/linux-x64-glibc/-/linux-x64-glibc-2.9.6.tgz",
      sha256: "bceb5b6a6239b0b010418406d8c77a508f67cf4337d94288f1c19fe71304aab0",
      archive: {
        integrity:
          "sha512-3md4TKLCuzsLDmfOoC5KN7NAZaxSVkMgm64vg6foD00JBADCpYS2/5QqXfzgnP5ZQz3iLP9vBQJtEgc116OAoQ==",
        member: "package/deno",
      },
    },
    {
      name: "deno",
      version: "2.9.6",
      arch: "arm64",
      url: "https://registry.npmjs.org/@deno/linux-arm64-glibc/-/linux-arm64-glibc-2.9.6.tgz",
      sha256: "d08d392418df53f4e6e88a08909c0e1bccbf9adcead7232df72b6ad6075ec416",
      archive: {
        integrity:
          "sha512-poqhoH9B3nYloigEMPT5t8HY+wBeiuea1An5Q7fqgJzP0SYmWsoS/oUnWO/pEiA4ofzIBy1Elt/in58xKtxEoQ==",
        member: "package/deno",
      },
    },
  ],
};

import assert from "node:assert/strict";
import { renderNodeFiles } from "../../vmconfig/node_files.ts";
import { applyHostOverrides, type HostFacts } from "./host_overrides.ts";

const CLOUD: HostFacts = { systemd: true, cgroupV2: true, sysResource: true, swap: false };

async function files(containerdVersion = "2.1.5") {
  return await renderNodeFiles({
    containerdVersion,
    kubeletVersion: "1.37.2",
    sandboxImage: "registry.podmin.internal/mirror/registry.k8s.io/pause:3.10",
    socketGid: 0,
    registryHostname: "registry.podmin.internal",
    registryHost: "127.0.0.1",
    registryPort: 5000,
    podPrefix: "fd00:706d:6e::/80",
    dnsAddress: "fd00:706d:6e:0:ffff::53",
    dnsUpstream: "/etc/resolv.conf",
  });
}

Deno.test("host overrides: a host like a cloud node changes nothing", async () => {
  const f = await files();
  const before = structuredClone(f);
  assert.deepEqual(applyHostOverrides(f, CLOUD), []);
  assert.deepEqual(f, before);
});

Deno.test("host overrides: each missing host feature changes only its lines, with a reason", async () => {
  const f = await files();
  const before = structuredClone(f);
  const applied = applyHostOverrides(f, {
    systemd: false,
    cgroupV2: false,
    sysResource: false,
    swap: true,
  });
  assert.deepEqual(applied.map((o) => o.change), [
    "SystemdCgroup = false",
    "cgroupDriver: cgroupfs",
    "restrict_oom_score_adj = true",
    "failCgroupV1: false",
    "failSwapOn: false",
  ]);
  for (const o of applied) assert.ok(o.reason.length > 10, o.change);
  const containerd = f["/etc/containerd/config.toml"];
  assert.match(containerd, /SystemdCgroup = false/);
  assert.match(
    containerd,
    /\[plugins\.'io\.containerd\.cri\.v1\.runtime'\]\n {2}restrict_oom_score_adj = true/,
  );
  const kubelet = f["/etc/podmin/kubelet/config.yaml"];
  assert.match(kubelet, /^cgroupDriver: cgroupfs$/m);
  assert.match(kubelet, /^failCgroupV1: false$/m);
  assert.match(kubelet, /^failSwapOn: false$/m);
  // hosts.toml, crictl.yaml and the CNI conflist are exactly what a cloud node gets.
  for (const k of Object.keys(before).filter((k) => !k.includes("config."))) {
    assert.equal(f[k], before[k], k);
  }
});

Deno.test("host overrides: containerd 1.x (schema 2) gets restrict_oom_score_adj in its CRI table", async () => {
  const f = await files("1.7.27");
  applyHostOverrides(f, { ...CLOUD, sysResource: false });
  assert.match(
    f["/etc/containerd/config.toml"],
    /\[plugins\."io\.containerd\.grpc\.v1\.cri"\]\n {2}restrict_oom_score_adj = true/,
  );
});

Deno.test("host overrides: a generated file without the overridden line fails loudly", () => {
  assert.throws(
    () =>
      applyHostOverrides({ "/etc/containerd/config.toml": "version = 3\n" }, {
        ...CLOUD,
        systemd: false,
      }),
    /cannot apply local override to \/etc\/containerd\/config\.toml/,
  );
});

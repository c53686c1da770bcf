/** vmconfig's TypeScript side: embedded assets, the archive, user-data rendering. */

import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import { parse as parseYaml } from "yaml";
import { dependencyBlobKey } from "../core/bucket/bucket_layout.ts";
import { ValidationError } from "../core/kit/errors.ts";
import { buildVmconfigArchive } from "./archive.ts";
import { VMCONFIG_ASSETS } from "./assets.ts";
import { NODE_DNS, renderNodeFiles } from "./node_files.ts";
import { readAssetSources } from "./build_assets.ts";
import {
  dependenciesForKind,
  type Dependency,
  dependency,
  POOL4_DETECT,
  renderUserData,
  SOURCES_DETECT,
  USER_DATA_LIMIT,
  userDataEnv,
  type UserDataOptions,
} from "./render_user_data.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

function nodeDeps(): Dependency[] {
  const a = buildVmconfigArchive();
  return [
    dependency("vmconfig", a.version, a.bytes),
    ...[
      "containerd",
      "runc",
      "cni-plugins",
      "crictl",
      "kubelet",
      "coredns",
      "podmin-agent",
      "amazon-ssm-agent",
    ]
      .map((n) => dependency(n, "1.2.3", bytes(`${n} contents`))),
  ];
}

const NODE: UserDataOptions = {
  cluster: "prod",
  bucket: "prod-bucket",
  region: "eu-central-1",
  nodeGroup: "workers",
  architecture: "arm64",
  dependencies: nodeDeps(),
};

Deno.test("vmconfig: assets.ts is up to date with the sources (run vmconfig/build_assets.ts)", () => {
  assert.deepEqual(
    { ...VMCONFIG_ASSETS },
    readAssetSources(),
    "vmconfig/assets.ts is stale: run `deno run -A vmconfig/build_assets.ts`",
  );
});

Deno.test("vmconfig: the archive is deterministic, with fixed owners and modes", async () => {
  const a = buildVmconfigArchive();
  const b = buildVmconfigArchive();
  assert.equal(a.sha256, b.sha256);
  assert.equal(a.size, a.bytes.length);
  assert.match(a.version, /^\d+\.\d+\.\d+-[0-9a-f]{12}$/);
  const changed = buildVmconfigArchive({ ...VMCONFIG_ASSETS, "lib/common.sh": "# changed\n" });
  assert.notEqual(changed.sha256, a.sha256);
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeFile(`${dir}/v.tgz`, a.bytes);
    const out = await new Deno.Command("tar", {
      args: ["--numeric-owner", "-tvzf", `${dir}/v.tgz`],
      stdout: "piped",
    }).output();
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
    const files = lines.filter((l) => l.startsWith("-"));
    assert.equal(files.length, Object.keys(VMCONFIG_ASSETS).length - 1); // no template
    for (const l of files) {
      const [mode, owner, , , , name] = l.split(/\s+/);
      assert.equal(owner, "0/0", l);
      assert.equal(mode, name.startsWith("bin/") ? "-rwxr-xr-x" : "-rw-r--r--", l);
    }
    assert.ok(files.some((l) => l.endsWith(" units/kubelet.service")));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("vmconfig: user-data fits 16 KiB and pins every dependency by digest", () => {
  const ud = renderUserData(NODE);
  console.error(`node user-data: ${ud.size} bytes (limit ${USER_DATA_LIMIT})`);
  assert.ok(ud.size <= USER_DATA_LIMIT);
  assert.ok(ud.text.startsWith("#!/bin/bash\n"));
  for (const d of NODE.dependencies) {
    assert.ok(
      ud.text.includes(`\n${d.name} ${d.version} ${d.sha256} ${d.size} ${d.key}\n`),
      d.name,
    );
  }
  assert.ok(ud.text.includes("\nPODMIN_NODEGROUP=workers\n"));
  assert.ok(!ud.text.includes("WORKLOAD_CA_PUBLISH"), "only when setup got --workload-ca-publish");
  const pub = renderUserData({ ...NODE, workloadCaPublish: "s3://trust-bundles/podmin/ca.pem" });
  assert.ok(pub.text.includes("\nWORKLOAD_CA_PUBLISH=s3://trust-bundles/podmin/ca.pem\n"));
  assert.ok(!ud.text.includes("TELEMETRY_"), "only when setup got --otel-logs");
  const otel = renderUserData({
    ...NODE,
    otelLogs: { endpoint: "https://otel.example.com:4318/", ca: "s3://org-cas/otel/ca.pem" },
  });
  assert.ok(otel.text.includes("\nTELEMETRY_OTLP_ENDPOINT=https://otel.example.com:4318/\n"));
  assert.ok(otel.text.includes("\nTELEMETRY_OTLP_CA=s3://org-cas/otel/ca.pem\n"));
  assert.throws(
    () => renderUserData({ ...NODE, otelLogs: { endpoint: "https://otel:4318/a b" } }),
    /not one vmconfig accepts/,
  );
  assert.ok(
    ud.text.includes(
      "\nSANDBOX_IMAGE=registry.podmin.internal/mirror/registry.k8s.io/pause:3.10\n",
    ),
  );
  assert.ok(ud.text.includes("https://prod-bucket.s3.dualstack.eu-central-1.amazonaws.com"));
  assert.equal(renderUserData(NODE).sha256, ud.sha256, "deterministic");
  const gz = renderUserData({ ...NODE, gzip: true });
  assert.equal(new TextDecoder().decode(gunzipSync(gz.bytes)), ud.text);
  assert.ok(gz.size < ud.size);
});

Deno.test("vmconfig: user-data changes whenever a pinned dependency changes", () => {
  const base = renderUserData(NODE).sha256;
  const deps = NODE.dependencies.map((d) =>
    d.name === "kubelet" ? dependency("kubelet", d.version, bytes("kubelet rebuilt")) : d
  );
  assert.notEqual(renderUserData({ ...NODE, dependencies: deps }).sha256, base);
  const bumped = NODE.dependencies.map((d) => d.name === "runc" ? { ...d, version: "1.2.4" } : d);
  assert.notEqual(renderUserData({ ...NODE, dependencies: bumped }).sha256, base);
  // Order of the input list does not matter.
  assert.equal(
    renderUserData({ ...NODE, dependencies: [...NODE.dependencies].reverse() }).sha256,
    base,
  );
});

Deno.test("vmconfig: the sandbox image is pulled from the path podmin mirror writes", () => {
  const env = (sandboxImage: string) =>
    userDataEnv({ ...NODE, sandboxImage }).find((l) => l.startsWith("SANDBOX_IMAGE="));
  assert.equal(
    env("pause:3.10"),
    "SANDBOX_IMAGE=registry.podmin.internal/mirror/docker.io/library/pause:3.10",
  );
  assert.equal(
    env("localhost:5000/team/pause:1"),
    "SANDBOX_IMAGE=registry.podmin.internal/mirror/localhost_5000/team/pause:1",
  );
});

Deno.test("vmconfig: user-data rejects bad options", () => {
  const bad: Array<[string, Partial<UserDataOptions>]> = [
    ["cluster", { cluster: "Prod" }],
    ["region", { region: "moon-1" }],
    ["bucket", { bucket: "a" }],
    ["nodegroup", { nodeGroup: "no_underscores" }],
    ["registry", { registryHostname: "Registry.Example" }],
    ["publish key", { workloadCaPublish: "s3://trust-bundles/a b.pem" }],
    ["publish traversal", { workloadCaPublish: "s3://trust-bundles/../x.pem" }],
    ["publish prefix", { workloadCaPublish: "s3://trust-bundles/podmin/" }],
    ["sandbox", { sandboxImage: "Registry.k8s.io/Pause:3.10" }],
    ["missing dep", { dependencies: NODE.dependencies.filter((d) => d.name !== "kubelet") }],
    ["unknown dep", { dependencies: [...NODE.dependencies, dependency("jool", "1", bytes("j"))] }],
    ["duplicate dep", { dependencies: [...NODE.dependencies, NODE.dependencies[1]] }],
    ["key", {
      dependencies: NODE.dependencies.map((d) =>
        d.name === "runc" ? { ...d, key: `dependencies/blobs/sha256/${"0".repeat(64)}` } : d
      ),
    }],
    ["version", {
      dependencies: NODE.dependencies.map((d) => d.name === "runc" ? { ...d, version: "1 2" } : d),
    }],
  ];
  for (const [what, patch] of bad) {
    assert.throws(() => renderUserData({ ...NODE, ...patch }), ValidationError, what);
  }
  assert.equal(
    dependency("x", "1", bytes("x")).key,
    dependencyBlobKey(dependency("x", "1", bytes("x")).sha256),
  );
});

Deno.test("vmconfig: NAT user-data carries the NAT64 settings, validated", () => {
  const deps = [
    dependency("vmconfig", "1", bytes("v")),
    dependency("jool", "4.1.14", bytes("j")),
  ];
  const nat: UserDataOptions = {
    kind: "nat",
    cluster: "prod",
    bucket: "prod-bucket",
    region: "us-east-1",
    architecture: "arm64",
    dependencies: deps,
    nat: {
      ipv4SourceCidrs: ["10.0.0.0/16"],
      nat64: { sourceIpv6Cidrs: ["2600:1f18::/56"], pool4Address: "10.0.1.5" },
    },
  };
  const ud = renderUserData(nat);
  for (
    const line of [
      "PODMIN_KIND=nat",
      "NAT64_ENABLED=true",
      "NAT64_PREFIX=64:ff9b::/96",
      "NAT64_POOL4_ADDRESS=10.0.1.5",
      "NAT_IPV4_SOURCE_CIDRS=10.0.0.0/16",
    ]
  ) assert.ok(ud.text.includes(`\n${line}\n`), line);
  assert.throws(() =>
    renderUserData({
      ...nat,
      nat: { ...nat.nat!, nat64: { ...nat.nat!.nat64!, prefix: "2001:db8:64::/96" } },
    }), /custom NAT64 prefix requires matching blockedIpv6Cidrs/);
  assert.throws(() => renderUserData({ ...nat, nat: { ipv4SourceCidrs: ["10.0.0.0/33"] } }));
});

Deno.test("vmconfig: NAT64 user-data for setup: pool4 detected at boot, jool optional", () => {
  const a = buildVmconfigArchive();
  const vmconfig = dependency("vmconfig", a.version, a.bytes);
  const jool = dependency("jool", "4.1.14", bytes("j"));
  const ssm = dependency("amazon-ssm-agent", "3.3.1", bytes("s"));
  const nat64 = { sourceIpv6Cidrs: ["2600:1f18::/56"], pool4Address: POOL4_DETECT };
  const nat: UserDataOptions = {
    kind: "nat",
    cluster: "prod",
    bucket: "prod-bucket",
    region: "us-east-1",
    architecture: "arm64",
    dependencies: [vmconfig],
    nat: { ipv4SourceCidrs: ["10.0.0.0/16"], nat64 },
  };
  // One user-data for every NAT64 instance: no address, no jool archive needed.
  const ud = renderUserData(nat);
  console.error(`nat64 user-data: ${ud.size} bytes (limit ${USER_DATA_LIMIT})`);
  assert.ok(ud.size <= USER_DATA_LIMIT);
  assert.ok(ud.text.includes("\nNAT64_POOL4_ADDRESS=detect\n"));
  assert.ok(ud.text.includes("\nNAT64_ENABLED=true\n"));
  assert.ok(!ud.text.includes("\njool "));
  // An operator's pinned Jool archive (and the SSM Agent) still work and change the user-data.
  const pinned = renderUserData({ ...nat, dependencies: [vmconfig, jool, ssm] });
  assert.ok(pinned.text.includes(`\njool 4.1.14 ${jool.sha256} `));
  assert.notEqual(pinned.sha256, ud.sha256);
  // Explicit addresses stay strictly validated.
  for (const bad of ["", "auto", "Detect", "10.0.1.256", "10.0.1", " 10.0.1.5", "::1"]) {
    assert.throws(
      () =>
        renderUserData({ ...nat, nat: { ...nat.nat!, nat64: { ...nat64, pool4Address: bad } } }),
      /invalid NAT64 pool4 address/,
      JSON.stringify(bad),
    );
  }
  const explicit = renderUserData({
    ...nat,
    nat: { ...nat.nat!, nat64: { ...nat64, pool4Address: "10.0.1.5" } },
  });
  assert.ok(explicit.text.includes("\nNAT64_POOL4_ADDRESS=10.0.1.5\n"));
  // vmconfig stays required; node dependencies are refused, and filtered by dependenciesForKind.
  assert.throws(
    () => renderUserData({ ...nat, dependencies: [jool] }),
    /missing dependency vmconfig/,
  );
  const all = [...nodeDeps(), jool];
  assert.throws(() => renderUserData({ ...nat, dependencies: all }), /unknown dependency/);
  assert.deepEqual(
    dependenciesForKind("nat", all).map((d) => d.name).sort(),
    ["amazon-ssm-agent", "jool", "vmconfig"],
  );
  assert.deepEqual(
    dependenciesForKind("node", all).map((d) => d.name).sort(),
    nodeDeps().map((d) => d.name).sort(),
  );
});

Deno.test('vmconfig: NAT64 sources ["detect"]: the VPC\'s IPv6 blocks, read at boot', () => {
  const nat64 = { sourceIpv6Cidrs: [SOURCES_DETECT], pool4Address: POOL4_DETECT };
  const nat: UserDataOptions = {
    kind: "nat",
    cluster: "prod",
    bucket: "prod-bucket",
    region: "us-east-1",
    architecture: "arm64",
    dependencies: [dependency("vmconfig", "1", bytes("v"))],
    nat: { ipv4SourceCidrs: ["10.0.0.0/16"], nat64 },
  };
  assert.equal(SOURCES_DETECT, "detect");
  const env = userDataEnv(nat);
  assert.ok(env.includes("NAT64_SOURCE_IPV6_CIDRS=detect"), env.join("\n"));
  assert.ok(renderUserData(nat).size <= USER_DATA_LIMIT);
  // Explicit CIDRs are kept as given (the VM validates them strictly, host bits included).
  const explicit = (sourceIpv6Cidrs: string[]) =>
    userDataEnv({ ...nat, nat: { ...nat.nat!, nat64: { ...nat64, sourceIpv6Cidrs } } })
      .find((l) => l.startsWith("NAT64_SOURCE_IPV6_CIDRS="));
  assert.equal(
    explicit(["2600:1f18::/56", "2600:1f19::/56"]),
    "NAT64_SOURCE_IPV6_CIDRS=2600:1f18::/56,2600:1f19::/56",
  );
  // "detect" is exact and alone; anything else must be an IPv6 CIDR.
  for (
    const bad of [
      [],
      ["detect", "2600:1f18::/56"],
      ["2600:1f18::/56", "detect"],
      ["detect", "detect"],
      ["Detect"],
      ["detect "],
      ["auto"],
      [""],
      ["10.0.0.0/16"],
      ["2600:1f18::/56,2600:1f19::/56"],
    ]
  ) {
    assert.throws(() => explicit(bad), ValidationError, JSON.stringify(bad));
  }
});

Deno.test("vmconfig: the generated kubelet config is the standalone contract", async () => {
  const lib = new URL("./lib/", import.meta.url).pathname;
  const kubeletConfig = async (version: string) => {
    const out = await new Deno.Command("bash", {
      args: [
        "-c",
        `source ${lib}common.sh; source ${lib}validate.sh; source ${lib}generate.sh; gen_kubelet_config ${version} 2600:1f18:4b2:aa00::a`,
      ],
      stdout: "piped",
    }).output();
    assert.ok(out.success, version);
    return parseYaml(new TextDecoder().decode(out.stdout));
  };
  const cfg = await kubeletConfig("1.37.2");
  assert.equal(cfg.kind, "KubeletConfiguration");
  assert.equal(cfg.staticPodPath, "/etc/podmin/manifests");
  assert.deepEqual(cfg.systemReserved, { cpu: "200m", memory: "512Mi" });
  assert.deepEqual(cfg.enforceNodeAllocatable, ["pods"]);
  assert.equal(cfg.featureGates, undefined, "1.37 has the Pods API on by default");
  assert.equal(cfg.authentication.anonymous.enabled, false);
  assert.equal(cfg.containerRuntimeEndpoint, "unix:///run/containerd/containerd.sock");
  // Pods resolve through the node's CoreDNS, with the cluster domain's search path.
  assert.deepEqual(cfg.clusterDNS, ["2600:1f18:4b2:aa00::a"]);
  assert.equal(cfg.clusterDomain, "cluster.local");
  assert.deepEqual((await kubeletConfig("1.36.3")).featureGates, { PodsAPI: true });
  assert.equal((await kubeletConfig("1.35.1")).featureGates, undefined);
});

Deno.test("vmconfig: NODE_DNS names what lib/generate.sh names", async () => {
  const lib = new URL("./lib/", import.meta.url).pathname;
  const out = await new Deno.Command("bash", {
    args: [
      "-c",
      `source ${lib}common.sh; source ${lib}validate.sh; source ${lib}generate.sh; ` +
      'printf "%s\\n" "$COREFILE" "$DNS_ZONE_DIR" "$CLUSTER_DOMAIN" "$DNS_PORT"',
    ],
    stdout: "piped",
  }).output();
  assert.ok(out.success);
  assert.deepEqual(new TextDecoder().decode(out.stdout).trim().split("\n"), [
    NODE_DNS.corefile,
    NODE_DNS.zoneDir,
    NODE_DNS.domain,
    String(NODE_DNS.port),
  ]);
});

Deno.test("vmconfig: the node's files include its Corefile and a kubelet pointed at it", async () => {
  const files = await renderNodeFiles({
    containerdVersion: "2.1.5",
    kubeletVersion: "1.37.2",
    sandboxImage: "registry.podmin.internal/mirror/registry.k8s.io/pause:3.10",
    socketGid: 0,
    registryHostname: "registry.podmin.internal",
    registryHost: "127.0.0.1",
    registryPort: 5000,
    podPrefix: "2600:1f18:4b2:aa00:1234::/80",
    dnsAddress: "2600:1f18:4b2:aa00::a",
    dnsUpstream: "fd00:ec2::253",
  });
  const corefile = files[NODE_DNS.corefile];
  assert.match(corefile, /^cluster\.local:53 \{$/m);
  assert.match(corefile, /^ {4}bind 2600:1f18:4b2:aa00::a$/m);
  assert.match(corefile, /^ {4}file \/run\/podmin\/dns\/cluster\.local\.db \{$/m);
  assert.match(corefile, /^ {4}forward \. fd00:ec2::253$/m);
  const kubelet = parseYaml(files["/etc/podmin/kubelet/config.yaml"]) as Record<string, unknown>;
  assert.deepEqual(kubelet.clusterDNS, ["2600:1f18:4b2:aa00::a"]);
  await assert.rejects(
    renderNodeFiles({
      containerdVersion: "2.1.5",
      kubeletVersion: "1.37.2",
      sandboxImage: "x/mirror/p:1",
      socketGid: 0,
      registryHostname: "x",
      registryHost: "127.0.0.1",
      registryPort: 5000,
      podPrefix: "2600:1f18:4b2:aa00:1234::/80",
      dnsAddress: "not-an-address",
      dnsUpstream: "fd00:ec2::253",
    }),
    /invalid cluster DNS address/,
  );
});

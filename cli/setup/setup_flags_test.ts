import assert from "node:assert/strict";
import { parseSetupFlags, resolveZones } from "./setup_flags.ts";
import { SETUP_DEFAULTS } from "./setup_defaults.ts";
import { setupCommands } from "./setup_command.ts";

const base = {
  cluster: "prod",
  region: "us-east-1",
  vpcCidr: "10.0.0.0/16",
  nodeGroups: ["default"],
};

Deno.test("setup flags: the seed's example parses with its documented defaults", () => {
  const f = parseSetupFlags({
    ...base,
    nat64: "",
    nodeGroups: [
      "default",
      "workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small",
    ],
  });
  assert.deepEqual(f.nat64, { instanceType: "t4g.nano" });
  assert.equal(f.nodeGroups[0].diskSizeGiB, 20);
  assert.equal(f.nodeGroups[0].size, 1);
  assert.deepEqual(f.nodeGroups[1], {
    name: "workers",
    size: 3,
    diskSizeGiB: 100,
    instanceType: "c8g.large",
    architecture: "arm64",
    zone: "b",
    nat64: "t4g.small",
  });
  assert.deepEqual(parseSetupFlags({ ...base, nat64: "instance-type=c7gn.medium" }).nat64, {
    instanceType: "c7gn.medium",
  });
  const zones = resolveZones(f, ["us-east-1a", "us-east-1b", "us-east-1c"]);
  assert.equal(zones.get("default"), "us-east-1a", "first available zone by default");
  assert.equal(zones.get("workers"), "us-east-1b");
});

Deno.test("setup flags: precise errors for bad input", () => {
  const cases: [Partial<typeof base> & Record<string, unknown>, RegExp][] = [
    [{ nodeGroups: ["w,disk-size=7"] }, /disk-size must be 8-16384 \(GiB\), got 7/],
    [{ nodeGroups: ["w,disk-size=16385"] }, /disk-size must be 8-16384/],
    [
      { nodeGroups: ["w,zone=us-east-1"] },
      /zone must be a full zone \(us-east-1b\) or one suffix letter/,
    ],
    [{ nodeGroups: ["w,colour=blue"] }, /unknown key "colour"/],
    [{ nodeGroups: ["w", "w,size=2"] }, /--nodegroup w is given twice/],
    [{ nodeGroups: ["w,size=1,size=2"] }, /size given twice/],
    [{ nodeGroups: ["W"] }, /NodeGroup name must be a DNS label/],
    [{ nodeGroups: ["w,instance-type=huge"] }, /invalid instance type "huge"/],
    [{ nodeGroups: [] }, /at least one --nodegroup/],
    [{ vpcCidr: "10.0.0.1/16" }, /host bits set/],
    [{ vpcCidr: "10.0.0.0/8" }, /IPv4 CIDR from \/16 to \/28/],
    [{ nat64: "type=t4g.nano" }, /--nat64=instance-type=TYPE/],
    [{ region: "moon-1" }, /invalid AWS region/],
    [
      { workloadCaPublish: "s3://bucket/" },
      /--workload-ca-publish "s3:\/\/bucket\/" is not an exact/,
    ],
    [{ otelLogs: "https://otel:4318,ca=s3://bkt/../x" }, /--otel-logs ca= .* is not an exact/],
    [{ otelLogs: "https://otel:4318,tls=off" }, /unknown item "tls=off"/],
  ];
  for (const [override, re] of cases) {
    assert.throws(
      () => parseSetupFlags({ ...base, ...override } as never),
      re,
      JSON.stringify(override),
    );
  }
  assert.throws(
    () => resolveZones(parseSetupFlags({ ...base, nodeGroups: ["w,zone=d"] }), ["us-east-1a"]),
    /not an available zone/,
  );
});

Deno.test("setup flags: without --cluster the documented default cluster id is used", () => {
  const f = parseSetupFlags({ ...base, cluster: undefined });
  assert.equal(f.cluster, "default");
  assert.equal(f.cluster, SETUP_DEFAULTS.cluster);
  assert.equal(parseSetupFlags({ ...base, nodeGroups: ["idle,size=0"] }).nodeGroups[0].size, 0);
});

Deno.test("setup flags: release versions are checked as MAJOR.MINOR.PATCH per flag", () => {
  assert.deepEqual(parseSetupFlags(base).releaseVersions, {});
  assert.deepEqual(
    parseSetupFlags({
      ...base,
      releaseVersions: { kubelet: "1.37.2", crictl: "1.35.0", containerd: "2.2.1" },
    }).releaseVersions,
    { kubelet: "1.37.2", crictl: "1.35.0", containerd: "2.2.1" },
  );
  const cases: [Record<string, string>, RegExp][] = [
    [
      { kubelet: "v1.37.2" },
      /^UsageError: --kubernetes-version: expected a release version MAJOR\.MINOR\.PATCH, got "v1\.37\.2"$/,
    ],
    [{ crictl: "1.35" }, /^UsageError: --crictl-version: expected a release version/],
    [{ containerd: "2.2.1-rc.1" }, /^UsageError: --containerd-version: expected a release version/],
  ];
  for (const [releaseVersions, re] of cases) {
    assert.throws(() => parseSetupFlags({ ...base, releaseVersions }), re);
  }
});

Deno.test("setup --help documents the version flags, the checksum source and the mirror", () => {
  const setup = setupCommands.find((c) => c.name === "setup")!;
  for (const flag of ["kubernetes-version", "crictl-version", "containerd-version"]) {
    assert.ok(setup.options[flag], `--${flag} is an option`);
    assert.match(setup.help, new RegExp(`^  --${flag} X\\.Y\\.Z `, "m"), flag);
  }
  assert.match(setup.help, /kubelet\.sha256/);
  assert.match(setup.help, /\.sha256sum/);
  assert.match(setup.help, /"sha256Url"/);
  assert.match(setup.help, /\$PODMIN_RELEASE_MIRROR=URL/);
});

import assert from "node:assert/strict";
import { parseCatalog, requireFluentBit } from "./dependency_catalog.ts";
import { DEFAULT_CATALOG } from "./default_catalog.ts";
import { REQUIRED_DEPENDENCIES } from "../../vmconfig/render_user_data.ts";

Deno.test("catalogue: the embedded default pins every node component for both architectures", () => {
  const c = parseCatalog(DEFAULT_CATALOG, "default catalogue");
  for (const arch of ["amd64", "arm64"]) {
    const names = c.dependencies.filter((d) => d.arch === arch).map((d) => d.name).sort();
    assert.deepEqual(
      names,
      [
        "amazon-ssm-agent",
        "cni-plugins",
        "containerd",
        "coredns",
        "crictl",
        "deno",
        "kubelet",
        "runc",
      ],
      arch,
    );
  }
  for (const d of c.dependencies) {
    assert.ok(d.url.startsWith("https://"), d.url);
    assert.ok(d.url.includes(d.version), `${d.url} names its version`);
    const npmArch = d.arch === "amd64" ? "x64" : "arm64"; // the npm packages' names
    assert.ok(d.url.includes(d.archive ? npmArch : d.arch), `${d.url} names its architecture`);
    assert.equal(d.archive !== undefined, d.name === "deno", "only the runtime is in an archive");
  }
});

Deno.test("catalogue: every node dependency vmconfig requires is pinned for both architectures", () => {
  for (const arch of ["amd64", "arm64"]) {
    const pinned = new Set(
      DEFAULT_CATALOG.dependencies.filter((d) => d.arch === arch).map((d) => d.name),
    );
    // vmconfig is built by setup itself; the agent comes from setup (binary or runtime + bundle).
    const upstream = REQUIRED_DEPENDENCIES.node.filter((n) => n !== "vmconfig");
    assert.deepEqual(upstream.filter((n) => !pinned.has(n)), [], arch);
  }
});

Deno.test("catalogue: malformed pins are rejected", () => {
  const good = {
    name: "runc",
    version: "1.3.3",
    arch: "amd64",
    url: "https://x/runc",
    sha256: "a".repeat(64),
  };
  assert.throws(
    () => parseCatalog({ dependencies: [{ ...good, sha256: "abc" }] }),
    /sha256 must be 64 hex/,
  );
  assert.throws(
    () => parseCatalog({ dependencies: [{ ...good, arch: "s390x" }] }),
    /arch must be amd64 or arm64/,
  );
  assert.throws(() => parseCatalog({ dependencies: [good, good] }), /runc\/amd64 listed twice/);
  assert.throws(
    () => parseCatalog({ dependencies: [{ ...good, url: "ftp://x" }] }),
    /url must be http/,
  );
  assert.throws(() => parseCatalog({ deps: [] }), /expected \{"dependencies"/);
  // The digest from the vendor's checksum file instead of a literal: one or the other.
  const byUrl = { ...good, sha256: undefined, sha256Url: "https://x/runc.sha256" };
  const parsed = parseCatalog({ dependencies: [byUrl] }).dependencies[0];
  assert.equal(parsed.sha256Url, "https://x/runc.sha256");
  assert.equal(parsed.sha256, undefined);
  assert.throws(
    () => parseCatalog({ dependencies: [{ ...good, sha256Url: "https://x/runc.sha256" }] }),
    /give "sha256" or "sha256Url", not both/,
  );
  assert.throws(
    () => parseCatalog({ dependencies: [{ ...byUrl, sha256Url: "runc.sha256" }] }),
    /sha256Url must be the http\(s\) URL of the vendor's checksum file/,
  );
  assert.throws(
    () => parseCatalog({ dependencies: [{ ...good, sha256: undefined }] }),
    (e: Error & { hint?: string }) =>
      /sha256 must be 64 hex/.test(e.message) && /sha256Url/.test(e.hint ?? ""),
  );
  const archive = { integrity: `sha512-${"A".repeat(86)}==`, member: "package/deno" };
  assert.equal(
    parseCatalog({ dependencies: [{ ...good, archive }] }).dependencies[0].archive?.member,
    "package/deno",
  );
  for (
    const bad of [
      { ...archive, integrity: "sha256-abc" },
      { ...archive, member: "../deno" },
      { ...archive, member: "/package/deno" },
    ]
  ) {
    assert.throws(
      () => parseCatalog({ dependencies: [{ ...good, archive: bad }] }),
      /archive must be/,
    );
  }
  assert.throws(
    () =>
      parseCatalog({
        dependencies: [{ ...good, sha256: undefined, sha256Url: "https://x/d.sha256", archive }],
      }),
    /sha256Url cannot be used with archive/,
  );
});

Deno.test("catalogue: the default kubelet has the local Pods API (1.36 with its gate, or later)", () => {
  for (const d of DEFAULT_CATALOG.dependencies.filter((d) => d.name === "kubelet")) {
    const [major, minor] = d.version.split(".").map(Number);
    assert.ok(major > 1 || minor >= 36, `kubelet ${d.version} (${d.arch}) has no Pods API`);
  }
});

Deno.test("catalogue: a name no VM kind installs is refused, naming the known ones", () => {
  const entry = {
    name: "fluentbit",
    version: "4.0.3",
    arch: "amd64",
    url: "https://x/fluent-bit.deb",
    sha256: "b".repeat(64),
  };
  assert.throws(() => parseCatalog({ dependencies: [entry] }), (err: Error & { hint?: string }) => {
    assert.match(err.message, /dependencies\[0\]: unknown dependency "fluentbit"/);
    assert.match(err.hint ?? "", /fluent-bit/);
    return true;
  });
  assert.equal(
    parseCatalog({ dependencies: [{ ...entry, name: "fluent-bit" }] }).dependencies[0].name,
    "fluent-bit",
  );
});

Deno.test("catalogue: --otel-logs needs a fluent-bit pin for every NodeGroup architecture", () => {
  const pin = (arch: "amd64" | "arm64") => ({
    name: "fluent-bit",
    version: "4.0.3",
    arch,
    url: `https://x/fluent-bit_4.0.3_${arch}.deb`,
    sha256: "c".repeat(64),
  });
  assert.throws(
    () => requireFluentBit(DEFAULT_CATALOG, ["arm64"]),
    /--otel-logs needs Fluent Bit .* pins no fluent-bit for arm64/,
  );
  const one = { dependencies: [...DEFAULT_CATALOG.dependencies, pin("arm64")] };
  requireFluentBit(one, ["arm64"]);
  assert.throws(() => requireFluentBit(one, ["amd64", "arm64"]), /for amd64$/);
  requireFluentBit({ dependencies: [...one.dependencies, pin("amd64")] }, ["amd64", "arm64"]);
});

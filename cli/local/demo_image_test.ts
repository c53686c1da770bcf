import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { openImageSource } from "../../registry/image_source.ts";
import { testWith } from "../../tests/support/requirements.ts";
import { DEMO_APP_SOURCE_SHA256 } from "./demo_app_embed.ts";
import { demoProgram, writeDemoImageLayout } from "./demo_image.ts";

Deno.test("demo program: the embedded builds are of the current demo_app.c", async () => {
  const source = await Deno.readFile(new URL("./demo_app.c", import.meta.url));
  assert.equal(
    createHash("sha256").update(source).digest("hex"),
    DEMO_APP_SOURCE_SHA256,
    "demo_app.c changed: run bash cli/local/build_demo_app.sh",
  );
  for (const [arch, machine] of [["amd64", 0x3e], ["arm64", 0xb7]] as const) {
    const elf = demoProgram(arch);
    assert.deepEqual([...elf.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], arch);
    assert.equal(new DataView(elf.buffer, elf.byteOffset).getUint16(18, true), machine, arch);
  }
});

Deno.test("demo image: one manifest per architecture, the version in tag and environment", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const digests = [];
    for (const version of ["1.0", "2.0"]) {
      await writeDemoImageLayout({ dir: `${dir}/${version}`, version });
      const src = await openImageSource(`oci:${dir}/${version}:${version}`);
      const root = await src.root();
      digests.push(root.digest);
      const index = JSON.parse(new TextDecoder().decode(root.bytes));
      assert.deepEqual(
        index.manifests.map((m: { platform: { architecture: string } }) => m.platform.architecture),
        ["amd64", "arm64"],
      );
      const manifest = JSON.parse(
        new TextDecoder().decode(
          await Deno.readFile(
            `${dir}/${version}/blobs/sha256/${index.manifests[0].digest.slice(7)}`,
          ),
        ),
      );
      const config = JSON.parse(
        new TextDecoder().decode(
          await Deno.readFile(`${dir}/${version}/blobs/sha256/${manifest.config.digest.slice(7)}`),
        ),
      );
      assert.deepEqual(config.config.Entrypoint, ["/demo"]);
      assert.deepEqual(config.config.Env, [`DEMO_VERSION=${version}`]);
    }
    assert.notEqual(digests[0], digests[1], "each version is another image");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * Inside a fresh network and mount namespace: a one-record DNS server on [::1]:53 (every AAAA
 * question answered ::1), /etc/resolv.conf naming it with a search domain, `/demo serve` and
 * `/demo get` against it.
 */
const IN_NAMESPACE = `
const [program, resolv] = Deno.args;
const sock = Deno.listenDatagram({ transport: "udp", hostname: "::1", port: 53 });
const questions = [];
(async () => {
  for await (const [q, from] of sock) {
    questions.push(new TextDecoder().decode(q.subarray(12, q.length - 4)));
    const r = new Uint8Array(q.length + 28);
    r.set(q);
    r[2] = 0x81, r[3] = 0x80, r[7] = 1;
    r.set([0xc0, 0x0c, 0, 28, 0, 1, 0, 0, 0, 5, 0, 16], q.length);
    r[q.length + 27] = 1;
    await sock.send(r, from);
  }
})();
const server = new Deno.Command(program, {
  args: ["serve", "18080"], env: { GREETING: "hi there", DEMO_VERSION: "9.9" }, stdout: "piped",
}).spawn();
const reader = server.stdout.getReader();
await reader.read(); // "demo: serving HTTP on port 18080"
const get = await new Deno.Command(program, { args: ["get", "hello", "18080", "/x"] }).output();
const direct = await (await fetch("http://[::1]:18080/")).text();
server.kill("SIGTERM");
const st = await server.status;
console.log(JSON.stringify({
  code: get.code,
  stdout: new TextDecoder().decode(get.stdout),
  stderr: new TextDecoder().decode(get.stderr),
  direct,
  questions,
  serverExit: st.code,
}));
Deno.exit(0);
`;

testWith(
  "demo program (host architecture): serves HTTP, resolves a short name through resolv.conf's nameserver and search domain, exits on SIGTERM",
  { root: true, tools: ["unshare", "ip", "mount"] },
  async () => {
    const arch = Deno.build.arch === "x86_64" ? "amd64" : "arm64";
    const dir = await Deno.makeTempDir();
    try {
      await Deno.writeFile(`${dir}/demo`, demoProgram(arch), { mode: 0o755 });
      await Deno.writeTextFile(
        `${dir}/resolv.conf`,
        "nameserver ::1\nsearch default.svc.cluster.local svc.cluster.local\n",
      );
      await Deno.writeTextFile(`${dir}/ns.ts`, IN_NAMESPACE);
      const out = await new Deno.Command("unshare", {
        args: [
          "--net",
          "--mount",
          "sh",
          "-c",
          `ip link set lo up && mount --bind "$1/resolv.conf" /etc/resolv.conf && ` +
          `exec "$2" run -q --allow-all --unstable-net "$1/ns.ts" "$1/demo"`,
          "sh",
          dir,
          Deno.execPath(),
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout);
      assert.ok(out.success, new TextDecoder().decode(out.stderr) + text);
      const r = JSON.parse(text);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `hi there (image demo:9.9, Pod ${Deno.hostname()})\n`);
      assert.equal(
        r.stderr,
        "hello.default.svc.cluster.local is ::1 (nameserver ::1); GET http://[::1]:18080/x\n",
      );
      assert.equal(r.direct, r.stdout);
      assert.equal(r.questions.length, 1);
      assert.match(r.questions[0], /hello.default.svc.cluster.local/);
      assert.equal(r.serverExit, 0, "SIGTERM ends it with 0");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

/**
 * Cases for the vmconfig env-validator fuzzer: valid env files of three layers (from the schemas
 * of vmconfig/lib/validate.sh), mutated into files the oracle knows to be valid or invalid, and
 * random byte mutations the oracle has no verdict for (those only must not crash or hang).
 */

import { Rand } from "./campaign.ts";

/** One generated env file and what the validator must say about it. */
export interface EnvCase {
  /** The schema function and kind `env_read` is called with. */
  schema: string;
  kind: string;
  bytes: Uint8Array;
  /** `accept`/`refuse` when the oracle knows, `any` for random byte mutations. */
  expect: "accept" | "refuse" | "any";
  /** The mutation applied, for the report. */
  mutation: string;
}

/** A key of a layer: a valid value, other valid values, invalid ones, and whether it is required. */
interface KeySpec {
  key: string;
  required: boolean;
  good: string[];
  bad: string[];
}

interface Layer {
  schema: string;
  kind: string;
  keys: KeySpec[];
}

const HEX64 = "0123456789abcdef".repeat(4);
const UNICODE = ["ünïcode", "日本", "\u00a0", "\u200b", "é"];
const BOOL = { good: ["true", "false"], bad: ["True", "yes", "1", "true ", " false", ""] };
const uint = (lo: number, hi: number) => ({
  good: [String(lo), String(hi), String(Math.floor((lo + hi) / 2))],
  bad: [String(hi + 1), "-1", `0${hi}`, "1e3", "", "9".repeat(30), "0x10", `${lo} `],
});
const DNS_LABEL = {
  good: ["a", "demo", "a-b", "x".repeat(63), "0"],
  bad: ["-a", "a-", "A", "x".repeat(64), "a.b", "a_b", ""],
};
const IFACE = {
  good: ["ens5", "eth0", "a.b-c_d", "x".repeat(15)],
  bad: ["x".repeat(16), ".", "..", "a/b", "a:b", "a b", ""],
};
const ENI = { good: ["eni-0123456789abcdef0", "eni-01234567"], bad: ["eni-0123", "eni-XYZ12345"] };
const IPV6 = {
  good: ["2600:1f18::1", "::1", "64:ff9b::10.0.0.1", "2600:1F18:4b2:aa00::10"],
  bad: ["1::2::3", "12345::", "fe80::1%eth0", ":1:2", "::g", "10.0.0.1"],
};
const DURATION = {
  good: ["1", "2s", "500ms", "3m", "1h", "9999999s"],
  bad: ["0s", "1d", "10000000s", "-1s", "1.5s", ""],
};

const LAYERS: Layer[] = [
  {
    schema: "schema_mutable",
    kind: "node",
    keys: [
      { key: "SSM_AGENT_ENABLED", required: false, ...BOOL },
      { key: "KUBE_LOG_LEVEL", required: false, ...uint(0, 10) },
      {
        key: "CONTAINERD_LOG_LEVEL",
        required: false,
        good: ["info", "trace", "debug", "warn", "error", "fatal", "panic"],
        bad: ["INFO", "info ", "verbose", ""],
      },
      { key: "AGENT_INTERVAL", required: false, ...DURATION },
      { key: "AGENT_SECRETS_INTERVAL", required: false, ...DURATION },
      {
        key: "LOCAL_REGISTRY_HOST",
        required: false,
        good: ["127.0.0.1", "::1", "127.255.0.9"],
        bad: ["10.0.0.1", "::2", "127.0.0.256", "localhost", "0.0.0.0"],
      },
      { key: "LOCAL_REGISTRY_PORT", required: false, ...uint(1, 65535) },
    ],
  },
  {
    schema: "schema_user_data",
    kind: "node",
    keys: [
      // env_read checks the type (node or nat); configure.sh picks the schema from the file's own
      // PODMIN_KIND, so "nat" under the node schema is valid here.
      { key: "PODMIN_KIND", required: true, good: ["node", "nat"], bad: ["Node", "vm", "nat "] },
      { key: "PODMIN_CLUSTER", required: true, ...DNS_LABEL },
      {
        key: "PODMIN_BUCKET",
        required: true,
        good: ["podmin-demo", "abc", "a.b.c"],
        bad: ["ab", "Abc", "a..b", "-abc", ""],
      },
      {
        key: "PODMIN_REGION",
        required: true,
        good: ["us-east-1", "eu-west-3", "ap-southeast-2"],
        bad: ["us-east", "US-EAST-1", "useast1", ""],
      },
      { key: "PODMIN_ARCH", required: true, good: ["amd64", "arm64"], bad: ["x86_64", "AMD64"] },
      { key: "PODMIN_NODEGROUP", required: true, ...DNS_LABEL },
      {
        key: "REGISTRY_HOSTNAME",
        required: true,
        good: ["registry.podmin.internal", "a", "a.b"],
        bad: ["a..b", ".a", "a.", "Ä.b", ""],
      },
      {
        key: "SANDBOX_IMAGE",
        required: true,
        good: ["registry.podmin.internal/mirror/pause:3.10", `h:5000/a/b@sha256:${HEX64}`],
        bad: ["Registry/x:1", "host/x", "host/x:", "host/X:1", `h/a@sha256:${HEX64}0`],
      },
      { key: "POD_ENI_WAIT_SECONDS", required: false, ...uint(1, 3600) },
    ],
  },
  {
    schema: "schema_detected",
    kind: "node",
    keys: [
      {
        key: "DETECTED_INSTANCE_ID",
        required: true,
        good: ["i-0123456789abcdef0", "i-01234567"],
        bad: ["i-0123", "i-XYZ12345", "i-0123456789abcdef01"],
      },
      {
        key: "DETECTED_AVAILABILITY_ZONE",
        required: true,
        good: ["us-east-1a", "eu-west-3c"],
        bad: ["us-east-1", "us-east-1A"],
      },
      { key: "DETECTED_IMDS_MODE", required: true, good: ["IPv6", "IPv4"], bad: ["ipv6", "v6"] },
      { key: "DETECTED_NODE_INTERFACE", required: true, ...IFACE },
      { key: "DETECTED_NODE_IPV6", required: true, ...IPV6 },
      { key: "DETECTED_POD_INTERFACE", required: true, ...IFACE },
      { key: "DETECTED_POD_ENI_ID", required: true, ...ENI },
      { key: "DETECTED_POD_IPV6", required: true, ...IPV6 },
      {
        key: "DETECTED_POD_PREFIX",
        required: true,
        good: ["2600:1f18:4b2:aa00:1234::/80", "2600:1f18:4b2::/48", "2600:1f18::10/124"],
        bad: ["2600:1f18::/32", "2600:1f18:4b2:aa00:1234::1/80", "2600:1f18::/125", "::/0"],
      },
    ],
  },
];

const CONTROL = ["\r", "\t", "\x1b", "\x7f", "\x01", "\x0b", "\x0c"];

/** Builds the lines of a valid file of `layer`: every required key, some optional ones. */
function validLines(r: Rand, layer: Layer): string[] {
  return layer.keys.filter((k) => k.required || r.int(3) > 0).map((k) =>
    `${k.key}=${r.pick(k.good)}`
  );
}

type Mutation = (r: Rand, lines: string[], layer: Layer) => string | undefined;

/** Mutations after which the file is still valid. */
const GOOD: Record<string, Mutation> = {
  shuffle(r, lines) {
    for (let i = lines.length - 1; i > 0; i--) {
      const j = r.int(i + 1);
      [lines[i], lines[j]] = [lines[j], lines[i]];
    }
    return lines.join("\n") + "\n";
  },
  comments(r, lines, _layer) {
    const c = r.pick([
      "# a comment",
      "#",
      `# ${r.pick(UNICODE)} = $(touch CANARY) \`touch CANARY\``,
      "#KEY=value",
      "",
    ]);
    lines.splice(r.int(lines.length + 1), 0, c);
    return lines.join("\n") + "\n";
  },
  "no final newline"(_r, lines) {
    return lines.join("\n");
  },
  "another valid value"(r, lines, layer) {
    const i = r.int(lines.length);
    if (i >= lines.length) return undefined;
    const key = lines[i].slice(0, lines[i].indexOf("="));
    lines[i] = `${key}=${r.pick(layer.keys.find((k) => k.key === key)!.good)}`;
    return lines.join("\n") + "\n";
  },
  "optional keys dropped"(_r, _lines, layer) {
    return layer.keys.filter((k) => k.required).map((k) => `${k.key}=${k.good[0]}`).join("\n") +
      "\n";
  },
};

/** Mutations after which the file is invalid. */
const BAD: Record<string, Mutation> = {
  "unknown key"(r, lines) {
    lines.splice(
      r.int(lines.length + 1),
      0,
      `${r.pick(["NOT_A_KEY", "PODMIN_X", "NAT64_ENABLED"])}=1`,
    );
    return lines.join("\n") + "\n";
  },
  "duplicate key"(r, lines) {
    if (!lines.length) return undefined;
    lines.push(lines[r.int(lines.length)]);
    return lines.join("\n") + "\n";
  },
  "control character"(r, lines) {
    if (!lines.length) return undefined;
    const i = r.int(lines.length);
    const at = r.int(lines[i].length + 1);
    lines[i] = lines[i].slice(0, at) + r.pick(CONTROL) + lines[i].slice(at);
    return lines.join(r.int(4) ? "\n" : "\r\n") + "\n";
  },
  CRLF(_r, lines) {
    if (!lines.length) return undefined;
    return lines.join("\r\n") + "\r\n";
  },
  "missing '='"(r, lines) {
    if (!lines.length) return undefined;
    const i = r.int(lines.length);
    lines[i] = lines[i].replace("=", r.pick(["", " ", ":"]));
    return lines.join("\n") + "\n";
  },
  "malformed line"(r, lines) {
    if (!lines.length) return undefined;
    const i = r.int(lines.length);
    lines[i] = r.pick([
      ` ${lines[i]}`,
      `export ${lines[i]}`,
      lines[i].toLowerCase(),
      lines[i].replace("=", " = "),
      `${"A".repeat(70)}=1`,
      "   ",
      "=value",
    ]);
    return lines.join("\n") + "\n";
  },
  "invalid value"(r, lines, layer) {
    if (!lines.length) return undefined;
    const i = r.int(lines.length);
    const key = lines[i].slice(0, lines[i].indexOf("="));
    const spec = layer.keys.find((k) => k.key === key)!;
    lines[i] = `${key}=${
      r.pick([
        ...spec.bad,
        r.pick(UNICODE),
        `"${spec.good[0]}"`,
        `'${spec.good[0]}'`,
        `${spec.good[0]}$(touch CANARY)`,
        "`touch CANARY`",
        "a[$(touch CANARY)]",
        "x".repeat(5_000),
      ])
    }`;
    return lines.join("\n") + "\n";
  },
  "required key missing"(r, _lines, layer) {
    const required = layer.keys.filter((k) => k.required);
    if (!required.length) return undefined;
    const drop = r.pick(required).key;
    return layer.keys.filter((k) => k.key !== drop).map((k) => `${k.key}=${k.good[0]}`).join(
      "\n",
    ) + "\n";
  },
  oversized(_r, lines) {
    return lines.join("\n") + "\n" + `# ${"x".repeat(65_536)}\n`;
  },
  "NUL byte"(r, lines) {
    const t = lines.join("\n") + "\n";
    const at = r.int(t.length + 1);
    return t.slice(0, at) + "\0" + t.slice(at);
  },
};

function randomBytes(r: Rand, text: string): Uint8Array {
  const b = Array.from(new TextEncoder().encode(text));
  for (let n = 1 + r.int(6); n > 0; n--) {
    const i = r.int(b.length + 1);
    switch (r.int(3)) {
      case 0:
        b.splice(i, 0, r.int(256));
        break;
      case 1:
        b.splice(i, 1 + r.int(4));
        break;
      default:
        if (i < b.length) b[i] = r.int(256);
    }
  }
  return Uint8Array.from(b);
}

/** Generates one case; `canary` replaces CANARY (a path outside the root that must never appear). */
export function envCase(r: Rand, canary: string): EnvCase {
  const layer = r.pick(LAYERS);
  const lines = validLines(r, layer);
  const base = { schema: layer.schema, kind: layer.kind };
  const roll = r.int(10);
  const enc = (t: string) => new TextEncoder().encode(t.replaceAll("CANARY", canary));
  if (roll === 0) {
    return {
      ...base,
      bytes: randomBytes(r, lines.join("\n") + "\n"),
      expect: "any",
      mutation: "random bytes",
    };
  }
  const table = roll <= 3 ? GOOD : BAD;
  const name = r.pick(Object.keys(table));
  const text = table[name](r, lines, layer);
  if (text === undefined) {
    return { ...base, bytes: enc(lines.join("\n") + "\n"), expect: "accept", mutation: "none" };
  }
  return {
    ...base,
    bytes: enc(text),
    expect: table === GOOD ? "accept" : "refuse",
    mutation: name,
  };
}

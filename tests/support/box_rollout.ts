/**
 * The cluster box's rollout proof (issue 32 item 5): a client loop inside the client Pod's network
 * namespace that asks a Service without pause, a recorder of the Deployment's rollout object (the
 * cluster-wide budget, `dns/rollouts/<ns>/<name>.json`), the nodes' own account of their
 * transitions (the agents' `rollout` log lines) and which spec each node's manifests run.
 */

import * as path from "node:path";
import { GetObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { deploymentRolloutKey } from "../../core/bucket/bucket_layout.ts";
import type { Machine } from "./machine.ts";

/**
 * The worker's program: on [::]:8080, TCP (one HTTP request) and UDP (one datagram) both answered
 * with "<version> <Pod hostname> <its `greeting` value file>"; exits on SIGTERM.
 */
export function boxEchoSource(version: string): string {
  return `#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>
static void bye(int s) { (void)s; _exit(0); }
static int answer(char *out, int size) {
  char host[128] = "", value[256] = "";
  gethostname(host, sizeof host - 1);
  int fd = open("/var/run/secrets/podmin.dev/values/greeting", O_RDONLY);
  if (fd >= 0) { ssize_t n = read(fd, value, sizeof value - 1); value[n > 0 ? n : 0] = 0; close(fd); }
  return snprintf(out, size, "${version} %s %s\\n", host, value);
}
int main(void) {
  signal(SIGTERM, bye);
  struct sockaddr_in6 a; memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6; a.sin6_port = htons(8080); a.sin6_addr = in6addr_any;
  int one = 1, t = socket(AF_INET6, SOCK_STREAM, 0), u = socket(AF_INET6, SOCK_DGRAM, 0);
  setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(t, (void *)&a, sizeof a) || listen(t, 64) || bind(u, (void *)&a, sizeof a)) return 1;
  struct pollfd p[2] = {{t, POLLIN, 0}, {u, POLLIN, 0}};
  char in[1024], body[512], out[700];
  for (;;) {
    if (poll(p, 2, -1) < 0) continue;
    if (p[0].revents) {
      int c = accept(t, 0, 0);
      if (c >= 0) {
        // The whole request head first: closing with part of it unread makes the kernel reset
        // the connection (the client then reads its answer and "Connection reset by peer").
        ssize_t n = 0, r;
        while (n < (ssize_t)sizeof in - 1 && (r = read(c, in + n, sizeof in - 1 - n)) > 0) {
          n += r; in[n] = 0; if (strstr(in, "\\r\\n\\r\\n")) break;
        }
        int b = answer(body, sizeof body);
        int m = snprintf(out, sizeof out, "HTTP/1.0 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n%s", b, body);
        write(c, out, m); close(c);
      }
    }
    if (p[1].revents) {
      struct sockaddr_in6 from; socklen_t fl = sizeof from;
      ssize_t n = recvfrom(u, in, sizeof in - 1, 0, (void *)&from, &fl);
      if (n >= 0) { int m = answer(out, sizeof out); sendto(u, out, m, 0, (void *)&from, fl); }
    }
  }
}
`;
}

/** A container that exits at once. */
export const CRASH_C = `int main(void) { return 1; }\n`;

/**
 * The client loop (bash, in the client Pod's network namespace and a private mount namespace
 * where the Pod's resolv.conf is /etc/resolv.conf, so glibc resolves the name through the Pod's
 * nameserver, the node's CoreDNS, for every request): in turn, one HTTP request to NAME:80 (bash
 * resolves it with getaddrinfo each time) and one datagram to VIP:53, each bounded by 3 s, until
 * the stop file exists; one line per request: `tcp|udp N EPOCH OUTPUT`, the output's lines (the
 * HTTP body, any error) joined by `|`.
 */
const CLIENT_LOOP = String.raw`set -u
out=$1 stop=$2 vip=$3 name=$4 resolv=$5
mount --bind "$resolv" /etc/resolv.conf
: >"$out"
n=0
while [[ ! -e $stop ]]; do
  n=$((n + 1))
  t=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/80" && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3' "$name" 2>&1 | tr -d '\r' | grep -v -e '^HTTP/' -e '^Content-Length:' -e '^$' | tr '\n' '|')
  printf 'tcp %d %s %s\n' "$n" "$EPOCHREALTIME" "$t" >>"$out"
  u=$(timeout 3 bash -c 'exec 3<>"/dev/udp/$0/53" && printf ping >&3 && dd bs=1024 count=1 status=none <&3' "$vip" 2>&1 | tr '\n' '|')
  printf 'udp %d %s %s\n' "$n" "$EPOCHREALTIME" "$u" >>"$out"
done
`;

/** One request of the client loop. */
export interface ClientRequest {
  proto: "tcp" | "udp";
  /** Wall clock (ms) when it ended. */
  at: number;
  answer: string;
  /** The answer's version (undefined: the request failed). */
  version?: string;
  host?: string;
}

/** What the client loop saw. */
export interface ClientTally {
  requests: ClientRequest[];
  failed: ClientRequest[];
  /** The answers' versions in the order they changed. */
  versions: string[];
  /** Pod host names that answered. */
  hosts: Set<string>;
  /** Answered TCP requests whose connection the server reset after the answer. */
  resetAfterAnswer: number;
}

/**
 * Parses the loop's lines: a request succeeded when one line of its output is the answer,
 * `<version> <host> <value>`. (A TCP answer followed by `cat: -: Connection reset by peer` still
 * counts; `resetAfterAnswer` counts them. The cause was the echo server's: bash's `printf` writes
 * the request head line by line, and a server that answered after the first line closed with the
 * second unread, which the kernel answers with a reset. The server now reads the whole head.)
 */
export function tallyClient(lines: string, value: string): ClientTally {
  const requests: ClientRequest[] = [];
  const good = new RegExp(`^(\\S+) (\\S+) ${value.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
  for (const line of lines.split("\n")) {
    const m = /^(tcp|udp) \d+ (\d+\.\d+) ?(.*)$/.exec(line);
    if (!m) continue;
    const answer = m[3].trim();
    const g = answer.split("|").map((part) => good.exec(part.trim())).find((x) => x);
    requests.push({
      proto: m[1] as "tcp" | "udp",
      at: Number(m[2]) * 1000,
      answer,
      ...(g ? { version: g[1], host: g[2] } : {}),
    });
  }
  const versions: string[] = [];
  for (const r of requests) {
    if (r.version && versions.at(-1) !== r.version) versions.push(r.version);
  }
  return {
    requests,
    failed: requests.filter((r) => !r.version),
    versions,
    hosts: new Set(requests.flatMap((r) => r.host ? [r.host] : [])),
    resetAfterAnswer: requests.filter((r) => r.version && /reset by peer/.test(r.answer)).length,
  };
}

/** A running client loop. */
export interface ClientLoop {
  /** Stops it and returns what it saw. */
  stop(): Promise<ClientTally>;
}

/**
 * Starts the client loop on `machine` in the network namespace of the Pod of container
 * `container` (its resolv.conf as the Pod sees it), asking `name` over TCP and `vip` over UDP.
 */
export async function startClientLoop(o: {
  machine: Machine;
  container: string;
  name: string;
  vip: string;
  /** The answers' value (the Pods' `greeting`). */
  value: string;
}): Promise<ClientLoop> {
  const info = JSON.parse(await o.machine.must(["crictl", "inspect", o.container])).info;
  const resolv = info?.runtimeSpec?.mounts?.find((m: { destination: string }) =>
    m.destination === "/etc/resolv.conf"
  )?.source;
  const spec = JSON.parse(await o.machine.must(["crictl", "inspectp", info?.sandboxID])).info
    ?.runtimeSpec;
  const netns = spec?.linux?.namespaces?.find((n: { type: string }) => n.type === "network")
    ?.path;
  if (!resolv || !netns) throw new Error(`client ${o.container}: no resolv.conf or netns`);
  const id = crypto.randomUUID().slice(0, 8);
  const out = `/var/tmp/client-${id}.log`;
  const stop = `/var/tmp/client-${id}.stop`;
  const running = o.machine.exec([
    "nsenter",
    `--net=${netns}`,
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "bash",
    "-c",
    CLIENT_LOOP,
    "client-loop",
    out,
    stop,
    o.vip,
    o.name,
    resolv,
  ]);
  return {
    stop: async () => {
      await o.machine.must(["touch", stop]);
      const ended = await running;
      if (ended.code !== 0) throw new Error(`client loop: ${ended.stdout}${ended.stderr}`);
      return tallyClient(await o.machine.must(["cat", out]), o.value);
    },
  };
}

/** One read of the rollout object. */
export interface BudgetSample {
  at: number;
  spec?: string;
  admitted: string[];
  nodes: string[];
  halted?: { node: string; reason: string };
  from?: string;
}

/** What the recorder saw of the rollout object. */
export interface BudgetRecord {
  samples: BudgetSample[];
  /** Most nodes admitted at once, per spec. */
  maxAdmitted: Map<string, number>;
  /** Every node ever admitted, per spec. */
  everAdmitted: Map<string, Set<string>>;
}

/** A running recorder of a rollout object. */
export interface BudgetRecorder {
  /** The last sample. */
  last(): BudgetSample | undefined;
  /** Every sample so far. */
  samples(): BudgetSample[];
  stop(): Promise<BudgetRecord>;
}

/** Reads `dns/rollouts/<namespace>/<name>.json` every `everyMs` (200) until stopped. */
export function recordBudget(o: {
  s3: S3Client;
  bucket: string;
  namespace: string;
  name: string;
  everyMs?: number;
}): BudgetRecorder {
  const samples: BudgetSample[] = [];
  let stopped = false;
  const key = deploymentRolloutKey(o.namespace, o.name);
  const loop = (async () => {
    while (!stopped) {
      try {
        const got = await o.s3.send(new GetObjectCommand({ Bucket: o.bucket, Key: key }));
        const s = JSON.parse(await got.Body!.transformToString());
        samples.push({
          at: Date.now(),
          spec: s.spec,
          admitted: (s.admitted ?? []).map((a: { node: string }) => a.node),
          nodes: s.nodes ?? [],
          ...(s.halted ? { halted: { node: s.halted.node, reason: s.halted.reason } } : {}),
          ...(s.from ? { from: s.from } : {}),
        });
      } catch {
        // Absent (no rollout yet) or a failed read: the next one.
      }
      await new Promise((r) => setTimeout(r, o.everyMs ?? 200));
    }
  })();
  return {
    last: () => samples.at(-1),
    samples: () => samples,
    stop: async () => {
      stopped = true;
      await loop;
      const maxAdmitted = new Map<string, number>();
      const everAdmitted = new Map<string, Set<string>>();
      for (const s of samples) {
        if (!s.spec) continue;
        maxAdmitted.set(s.spec, Math.max(maxAdmitted.get(s.spec) ?? 0, s.admitted.length));
        const ever = everAdmitted.get(s.spec) ?? new Set<string>();
        for (const n of s.admitted) ever.add(n);
        everAdmitted.set(s.spec, ever);
      }
      return { samples, maxAdmitted, everAdmitted };
    },
  };
}

/** A node's transition as its agent logged it: from its first surging/replacing to settled. */
export interface Transition {
  node: string;
  start: number;
  /** Infinity when it had not settled. */
  end: number;
  phases: string[];
}

/**
 * The transitions of Deployment `deployment` (`namespace/name`) that node `node`'s agent logged
 * (its JSON lines, `journalctl -o cat`) from wall time `since`: each from the first `rollout` line
 * in phase surging, replacing or failed to the next `rollout settled`. The agent logs a phase
 * after its admitting write and `rollout settled` before it releases its admission, so each such
 * interval lies inside the node's admission.
 */
export function transitionsFromLog(
  node: string,
  log: string,
  deployment: string,
  since: number,
): Transition[] {
  const out: Transition[] = [];
  let open: Transition | undefined;
  for (const line of log.split("\n")) {
    if (!line.startsWith("{")) continue;
    let l: { ts?: string; msg?: string; deployment?: string; phase?: string };
    try {
      l = JSON.parse(line);
    } catch {
      continue;
    }
    const at = Date.parse(l.ts ?? "");
    if (l.deployment !== deployment || !(at >= since)) continue;
    if (l.msg === "rollout" && l.phase && l.phase !== "waiting") {
      if (!open) open = { node, start: at, end: Infinity, phases: [] };
      open.phases.push(l.phase);
    } else if (l.msg === "rollout settled" && open) {
      open.end = at;
      out.push(open);
      open = undefined;
    }
  }
  if (open) out.push(open);
  return out;
}

/** Most transitions in progress at one moment. */
export function maxOverlap(transitions: Transition[]): number {
  const edges = transitions.flatMap((t) => [[t.start, 1], [t.end, -1]] as [number, number][]);
  // At equal times an end goes first: a release before the next admission.
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, now += d);
  return most;
}

/** The agent's JSON log lines on `machine` (all boots with `allBoots`). */
export async function agentLog(machine: Machine, allBoots = false): Promise<string> {
  return await machine.must([
    "journalctl",
    "--no-pager",
    "-o",
    "cat",
    "-u",
    "podmin-agent.service",
    ...(allBoots ? [] : ["-b"]),
  ]);
}

/** The specs (`podmin.dev/spec`) of the manifests of Deployment `namespace/name` on `machine`. */
export async function manifestSpecs(
  machine: Machine,
  namespace: string,
  name: string,
): Promise<string[]> {
  const dir = path.join(machine.root, "etc/podmin/manifests");
  const specs: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (!new RegExp(`^podmin_${namespace}_${name}(\\.[0-9a-f]{8})?\\.json$`).test(e.name)) {
      continue;
    }
    const m = JSON.parse(await Deno.readTextFile(path.join(dir, e.name)));
    specs.push(m.metadata?.annotations?.["podmin.dev/spec"] ?? "?");
  }
  return specs.sort();
}

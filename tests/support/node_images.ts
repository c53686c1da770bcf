/**
 * Images for real-node tests: the pause image mirrored into the bucket from the CNCF distribution
 * registry (there is no internet here), a static C program pushed as an app image, and the source
 * of the echo server the Services and rollout tests push.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { writePauseImageLayout } from "../../cli/local/pause_image.ts";
import { sh } from "./dataplane_topology.ts";
import { writeOciLayout } from "./oci_image.ts";
import { podmin } from "./programs.ts";

/** Where and as whom the images go. */
export interface ImageTarget {
  /** A scratch directory. */
  work: string;
  bucket: string;
  /** Environment of `podmin` (AWS endpoint and credentials). */
  env: Record<string, string>;
}

/** Puts `pause:3.10` into the registry on `upstreamPort` and mirrors it into the bucket. */
export async function mirrorPauseImage(o: ImageTarget & { upstreamPort: number }): Promise<void> {
  const pause = await writePauseImageLayout({
    dir: path.join(o.work, "pause"),
    tag: "3.10",
    arches: ["amd64", "arm64"],
  });
  await sh("skopeo", [
    "copy",
    "--all",
    "--dest-tls-verify=false",
    `oci:${pause}:3.10`,
    `docker://127.0.0.1:${o.upstreamPort}/pause:3.10`,
  ]);
  const mirrored = await podmin(
    ["--bucket", o.bucket, "mirror", "--plain-http", `127.0.0.1:${o.upstreamPort}/pause:3.10`],
    o.env,
  );
  assert.equal(mirrored.code, 0, mirrored.stderr);
}

/** Compiles `source` (C) statically to `/<name>` and pushes it as `apps/<name>:<tag>` (`1.0`). */
export async function pushStaticProgram(
  o: ImageTarget & { name: string; source: string; tag?: string },
): Promise<void> {
  const tag = o.tag ?? "1.0";
  const src = path.join(o.work, `${o.name}-${tag}.c`);
  const bin = path.join(o.work, `${o.name}-${tag}`);
  await Deno.writeTextFile(src, o.source);
  await sh("gcc", ["-static", "-Os", "-o", bin, src]);
  const layout = path.join(o.work, `${o.name}-${tag}-image`);
  await writeOciLayout({
    dir: layout,
    ref: tag,
    platforms: [{ arch: "amd64", files: { [o.name]: await Deno.readFile(bin) } }],
  });
  const pushed = await podmin(
    ["--bucket", o.bucket, "push", `oci:${layout}:${tag}`, `apps/${o.name}:${tag}`],
    o.env,
  );
  assert.equal(pushed.code, 0, pushed.stderr);
}

/** A static TCP + UDP server on 8080 answering "<VERSION> <line>" / "<VERSION> <datagram>". */
export const echoSource = (version: string) =>
  `#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
int main(void) {
  struct sockaddr_in6 a; memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6; a.sin6_port = htons(8080); a.sin6_addr = in6addr_any;
  int one = 1, t = socket(AF_INET6, SOCK_STREAM, 0), u = socket(AF_INET6, SOCK_DGRAM, 0);
  setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(t, (void *)&a, sizeof a) || listen(t, 64) || bind(u, (void *)&a, sizeof a)) return 1;
  struct pollfd p[2] = {{t, POLLIN, 0}, {u, POLLIN, 0}};
  char in[512], out[600];
  for (;;) {
    if (poll(p, 2, -1) < 0) continue;
    if (p[0].revents) {
      int c = accept(t, 0, 0); ssize_t n = 0, r;
      while (c >= 0 && n < (ssize_t)sizeof in - 1 && (r = read(c, in + n, sizeof in - 1 - n)) > 0) {
        n += r; if (memchr(in, '\\n', n)) break;
      }
      if (c >= 0) {
        in[n > 0 ? n : 0] = 0; char *nl = strchr(in, '\\n'); if (nl) *nl = 0;
        int m = snprintf(out, sizeof out, "${version} %s\\n", in); write(c, out, m); close(c);
      }
    }
    if (p[1].revents) {
      struct sockaddr_in6 from; socklen_t fl = sizeof from;
      ssize_t n = recvfrom(u, in, sizeof in - 1, 0, (void *)&from, &fl);
      if (n >= 0) { in[n] = 0; int m = snprintf(out, sizeof out, "${version} %s", in);
        sendto(u, out, m, 0, (void *)&from, fl); }
    }
  }
}
`;

/**
 * A simulated kubelet Pods API (`tests/support/pods_api_server.ts`, no Pods) in a process of its
 * own, for benchmarks that run an agent with the endpoint mesh: Deno's `node:http2` can abort the
 * process that holds a session when its peer goes away (denoland/deno#36788), and that must not
 * be the benchmark's own process.
 *
 *   deno run -A tests/bench/pods_api_child.ts SOCKET    prints "ready"; stops at stdin's end
 */

import { PodsApiServer } from "../support/pods_api_server.ts";

const server = await PodsApiServer.start(Deno.args[0]);
console.log("ready");
for await (const _ of Deno.stdin.readable) { /* until EOF */ }
await server.stop();
Deno.exit(0);

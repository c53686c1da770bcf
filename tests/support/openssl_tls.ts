/** openssl as the TLS peer of identity tests: a server that requires client certificates. */

import { freePort } from "./moto.ts";

/**
 * Runs `cmd` to its end with `stdin` as its input; its exit code and its output. A program that
 * exits (or closes its input) before it read `stdin` — an s_client whose handshake was refused —
 * is no error here: its exit code and output say what happened.
 */
export async function run(cmd: string, args: string[], stdin?: string) {
  const child = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    try {
      await w.write(new TextEncoder().encode(stdin));
      await w.close();
    } catch (err) {
      if (!(err instanceof Deno.errors.BrokenPipe)) throw err;
    }
  }
  const out = await child.output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, text };
}

/** Files of one TLS identity. */
export interface TlsFiles {
  cert: string;
  key: string;
  /** The trust bundle this side verifies its peer with. */
  ca: string;
}

/**
 * Runs an openssl s_server (TLS 1.3, client certificate required and verified) with `server` and
 * an s_client with `client`; `ok` when the mutual handshake completed and the server answered.
 */
export async function mutualTls(
  server: TlsFiles,
  client: TlsFiles,
): Promise<{ ok: boolean; text: string }> {
  // A free port may be taken again before s_server binds it: then it exits, and another is tried.
  for (let attempt = 1;; attempt++) {
    const port = await freePort();
    const s = new Deno.Command("openssl", {
      args: [
        "s_server",
        "-accept",
        `127.0.0.1:${port}`,
        "-cert",
        server.cert,
        "-key",
        server.key,
        "-CAfile",
        server.ca,
        "-Verify",
        "1",
        "-verify_return_error",
        "-tls1_3",
        "-naccept",
        "1",
        "-www",
      ],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    let exited = false;
    const status = s.status.then((st) => (exited = true, st));
    try {
      // Wait until the server listens (a probe connection would use up its one accept).
      let listening = false;
      for (let i = 0; i < 400 && !exited; i++) {
        if ((await run("ss", ["-Hltn", `sport = :${port}`])).text.trim() !== "") {
          listening = true;
          break;
        }
        await new Promise((r) => setTimeout(r, 25));
      }
      if (!listening) {
        const why = exited ? `it exited: ${(await new Response(s.stderr).text()).trim()}` : "";
        if (exited && attempt < 3) continue;
        throw new Error(`openssl s_server did not listen on ${port} ${why}`);
      }
      const c = await run("openssl", [
        "s_client",
        "-connect",
        `127.0.0.1:${port}`,
        "-cert",
        client.cert,
        "-key",
        client.key,
        "-CAfile",
        client.ca,
        "-verify_return_error",
        "-tls1_3",
        "-quiet",
      ], "GET / HTTP/1.0\r\n\r\n");
      // -www answers only after the handshake, client certificate included, was accepted.
      return { ok: c.code === 0 && c.text.includes("HTTP/1.0 200 ok"), text: c.text };
    } finally {
      try {
        s.kill("SIGKILL");
      } catch { /* exited */ }
      await status;
      await s.stderr.cancel().catch(() => {});
    }
  }
}

/** openssl as the TLS peer of identity tests: a server that requires client certificates. */

export async function run(cmd: string, args: string[], stdin?: string) {
  const child = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
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
  const port = 20000 + Math.floor(Math.random() * 20000);
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
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  try {
    // Wait until the server listens (a probe connection would use up its one accept).
    for (let i = 0; (await run("ss", ["-Hltn", `sport = :${port}`])).text.trim() === ""; i++) {
      if (i > 200) throw new Error("openssl s_server did not listen");
      await new Promise((r) => setTimeout(r, 25));
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
    await s.status;
    await s.stdout.cancel().catch(() => {});
    await s.stderr.cancel().catch(() => {});
  }
}

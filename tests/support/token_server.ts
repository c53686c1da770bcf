/**
 * A registry token service the test owns (Docker Registry v2 bearer-token flow): it checks Basic
 * credentials and issues ES256 JWTs whose `x5c` header carries its self-signed certificate, which
 * the registry trusts through `auth.token.rootcertbundle`. Every token request is recorded.
 */

import * as path from "node:path";
import { run } from "./registry.ts";

/** One token request as the service saw it. */
export interface TokenRequest {
  /** The Basic user, or undefined for an anonymous request. */
  user?: string;
  service: string | null;
  scopes: string[];
  /** The status answered. */
  status: number;
}

/** A running token service. */
export interface TokenServer {
  /** The realm URL (`http://127.0.0.1:PORT/token`). */
  realm: string;
  /** The PEM certificate file to give the registry as `rootcertbundle`. */
  certFile: string;
  issuer: string;
  requests: TokenRequest[];
  close(): Promise<void>;
}

const b64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
const pemBody = (pem: string) =>
  Uint8Array.from(
    atob(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")),
    (c) => c.charCodeAt(0),
  );

/**
 * Starts the token service with a fresh P-256 key and certificate (openssl) in `dir`. It grants
 * every requested scope to `user:password` and refuses anything else with 401.
 */
export async function startTokenServer(
  o: { dir: string; user: string; password: string; audience: string },
): Promise<TokenServer> {
  const keyFile = path.join(o.dir, "token-key.pem");
  const certFile = path.join(o.dir, "token-cert.pem");
  await run("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    keyFile,
    "-out",
    certFile,
    "-days",
    "1",
    "-subj",
    "/CN=podmin-test-token-issuer",
  ]);
  const key = await crypto.subtle.importKey(
    "pkcs8",
    pemBody(await Deno.readTextFile(keyFile)),
    { name: "ECDSA", namedCurve: "P-256" },
    false,
    ["sign"],
  );
  const certDer = pemBody(await Deno.readTextFile(certFile));
  const issuer = "podmin-test-token-issuer";
  const requests: TokenRequest[] = [];
  const enc = new TextEncoder();

  const sign = async (claims: Record<string, unknown>) => {
    const header = { typ: "JWT", alg: "ES256", x5c: [btoa(String.fromCharCode(...certDer))] };
    const input = `${b64url(enc.encode(JSON.stringify(header)))}.${
      b64url(enc.encode(JSON.stringify(claims)))
    }`;
    const sig = new Uint8Array(
      await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, key, enc.encode(input)),
    );
    return `${input}.${b64url(sig)}`;
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const scopes = url.searchParams.getAll("scope").flatMap((s) => s.split(" ")).filter(Boolean);
    const auth = req.headers.get("authorization") ?? "";
    const [user, password] = auth.startsWith("Basic ")
      ? atob(auth.slice(6)).split(/:(.*)/s)
      : [undefined, undefined];
    const record = (status: number) =>
      requests.push({ user, service: url.searchParams.get("service"), scopes, status });
    if (url.pathname !== "/token") {
      record(404);
      return new Response("not found", { status: 404 });
    }
    if (user !== o.user || password !== o.password) {
      record(401);
      return new Response(JSON.stringify({ details: "bad credentials" }), {
        status: 401,
        headers: { "WWW-Authenticate": 'Basic realm="podmin-test-token"' },
      });
    }
    const now = Math.floor(Date.now() / 1000);
    const access = scopes.map((s) => {
      const [type, ...rest] = s.split(":");
      const actions = rest.pop()!.split(",");
      return { type, name: rest.join(":"), actions };
    });
    const token = await sign({
      iss: issuer,
      sub: user,
      aud: o.audience,
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: crypto.randomUUID(),
      access,
    });
    record(200);
    return Response.json({ token, access_token: token, expires_in: 300 });
  });
  return {
    realm: `http://127.0.0.1:${server.addr.port}/token`,
    certFile,
    issuer,
    requests,
    close: () => server.shutdown(),
  };
}

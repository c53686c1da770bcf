import assert from "node:assert/strict";
import { parseUpstreamRef } from "../core/model/image_ref.ts";
import { UpstreamSource } from "./upstream.ts";

Deno.test("upstream: answers a bearer challenge with an anonymous token, then pulls", async () => {
  const seen: string[] = [];
  const manifest = new TextEncoder().encode(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {},
      layers: [],
    }),
  );
  // Scripted HTTP exchange of a Docker-Hub-style registry (challenge → token service → retry).
  const scripted: typeof fetch = (input, init) => {
    const url = String(input);
    const auth = new Headers(init?.headers).get("authorization") ?? "";
    seen.push(`${url} ${auth}`);
    if (url.startsWith("https://auth.example/token")) {
      const u = new URL(url);
      assert.equal(u.searchParams.get("service"), "registry.example");
      assert.equal(u.searchParams.get("scope"), "repository:library/nginx:pull");
      return Promise.resolve(Response.json({ token: "t0k3n" }));
    }
    if (auth !== "Bearer t0k3n") {
      return Promise.resolve(
        new Response("", {
          status: 401,
          headers: {
            "WWW-Authenticate":
              'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:library/nginx:pull"',
          },
        }),
      );
    }
    return Promise.resolve(
      new Response(manifest as Uint8Array<ArrayBuffer>, {
        headers: { "Content-Type": "application/vnd.oci.image.manifest.v1+json" },
      }),
    );
  };

  const src = new UpstreamSource({ ref: parseUpstreamRef("nginx:1.27"), fetch: scripted });
  const root = await src.root();
  assert.equal(root.mediaType, "application/vnd.oci.image.manifest.v1+json");
  assert.deepEqual(seen.map((s) => s.split(" ")[1] ?? ""), ["", "", "Bearer"]);
  assert.ok(seen[0].startsWith("https://registry-1.docker.io/v2/library/nginx/manifests/1.27"));
});

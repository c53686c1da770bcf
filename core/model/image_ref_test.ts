import assert from "node:assert/strict";
import { parseUpstreamRef } from "./image_ref.ts";

Deno.test("upstream references normalise like Docker's", () => {
  assert.deepEqual(parseUpstreamRef("nginx"), {
    registry: "docker.io",
    repository: "library/nginx",
    tag: "latest",
    digest: undefined,
  });
  assert.deepEqual(parseUpstreamRef("registry.k8s.io/pause:3.10"), {
    registry: "registry.k8s.io",
    repository: "pause",
    tag: "3.10",
    digest: undefined,
  });
  assert.deepEqual(parseUpstreamRef("localhost:5000/team/app:v1"), {
    registry: "localhost:5000",
    repository: "team/app",
    tag: "v1",
    digest: undefined,
  });
  const d = `sha256:${"a".repeat(64)}`;
  assert.deepEqual(parseUpstreamRef(`ghcr.io/org/app@${d}`), {
    registry: "ghcr.io",
    repository: "org/app",
    tag: undefined,
    digest: d,
  });
  assert.throws(() => parseUpstreamRef("Nginx:1"), /invalid image reference/);
  assert.throws(() => parseUpstreamRef("nginx@sha256:abc"), /invalid digest/);
});

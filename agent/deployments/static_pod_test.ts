import assert from "node:assert/strict";
import { parseResource } from "../../core/model/resources.ts";
import {
  isOwnedManifest,
  MANIFEST_FILE_PATTERN,
  manifestBytes,
  manifestFileName,
  parseManifestFileName,
  renderStaticPod,
  slotOf,
  slotPodName,
} from "./static_pod.ts";

const deployment = (secrets?: unknown) =>
  parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "shop" },
    spec: {
      nodeGroup: "workers",
      ...(secrets ? { secrets } : {}),
      template: {
        metadata: { labels: { app: "web" }, annotations: { "example.com/team": "shop" } },
        spec: {
          initContainers: [{ name: "init", image: "i" }],
          containers: [{
            name: "web",
            image: "w",
            volumeMounts: [{ name: "cache", mountPath: "/cache" }],
          }],
          volumes: [{ name: "cache", emptyDir: {} }],
        },
      },
    },
  });

const spec = `sha256:${"c".repeat(64)}`;

Deno.test("static pod: labels, ownership and read-only Podmin mounts in every container", () => {
  const d = deployment([{ key: "k", from: "ssm" }]);
  if (d.kind !== "Deployment") throw new Error();
  const pod = renderStaticPod({
    deployment: d,
    specRef: spec,
    secretsDir: "/run/s",
    tlsDir: "/run/t",
  });
  assert.equal(pod.metadata?.labels?.["podmin.dev/deployment"], "web");
  assert.equal(pod.metadata?.labels?.app, "web");
  assert.equal(pod.metadata?.annotations?.["podmin.dev/spec"], spec);
  assert.equal(pod.metadata?.annotations?.["example.com/team"], "shop"); // kept, not dropped
  assert.deepEqual(pod.spec?.volumes?.map((v) => v.name), ["cache", "podmin-tls", "podmin-values"]);
  assert.equal(pod.spec?.volumes?.[2].hostPath?.path, "/run/s/shop_web");
  for (const c of [...pod.spec!.containers, ...pod.spec!.initContainers!]) {
    const mounts = (c.volumeMounts ?? []).filter((m) => m.name.startsWith("podmin-"));
    assert.equal(mounts.length, 2, c.name);
    assert.ok(mounts.every((m) => m.readOnly));
  }
  const bytes = manifestBytes(pod);
  assert.ok(isOwnedManifest(bytes));
  assert.deepEqual(manifestBytes(pod), bytes, "stable bytes");
  assert.ok(MANIFEST_FILE_PATTERN.test(manifestFileName("shop", "web")));
});

Deno.test("static pod: no values volume without declared secrets; foreign content is not owned", () => {
  const d = deployment();
  if (d.kind !== "Deployment") throw new Error();
  const pod = renderStaticPod({ deployment: d, specRef: spec, secretsDir: "/s", tlsDir: "/t" });
  assert.ok(!pod.spec?.volumes?.some((v) => v.name === "podmin-values"));
  assert.ok(!isOwnedManifest(new TextEncoder().encode("kind: Pod\n")));
  assert.ok(
    !isOwnedManifest(
      new TextEncoder().encode('{"metadata":{"annotations":{"podmin.dev/owner":"x"}}}'),
    ),
  );
  assert.ok(!MANIFEST_FILE_PATTERN.test("podmin_a_b.json.tmp"));
  assert.ok(!MANIFEST_FILE_PATTERN.test(".podmin_a_b.json"));
});

Deno.test("static pod: a surge slot is named after its spec; file names parse back", () => {
  const spec = `sha256:0123abcd${"e".repeat(56)}`;
  assert.equal(slotOf(spec), "0123abcd");
  assert.equal(manifestFileName("shop", "web", slotOf(spec)), "podmin_shop_web.0123abcd.json");
  assert.equal(manifestFileName("shop", "web"), "podmin_shop_web.json");
  assert.ok(MANIFEST_FILE_PATTERN.test("podmin_shop_web.0123abcd.json"));
  assert.ok(!MANIFEST_FILE_PATTERN.test("podmin_shop_web.b.json"));
  assert.deepEqual(parseManifestFileName("podmin_shop_web.0123abcd.json"), {
    ref: "shop/web",
    slot: "0123abcd",
  });
  assert.deepEqual(parseManifestFileName("podmin_shop_web.json"), { ref: "shop/web", slot: "" });
  assert.equal(parseManifestFileName("kube-tunnel.yaml"), undefined);
  assert.equal(slotPodName("web", "0123abcd"), "web-0123abcd");
  assert.equal(slotPodName("web", ""), "web");
});

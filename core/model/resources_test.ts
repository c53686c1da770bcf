import assert from "node:assert/strict";
import { ValidationError } from "../kit/errors.ts";
import { parseResource, selectorMatches } from "./resources.ts";

const deployment = (
  spec: Record<string, unknown>,
  metadata: Record<string, unknown> = { name: "web" },
) => ({
  apiVersion: "podmin.dev/v1",
  kind: "Deployment",
  metadata,
  spec,
});
const template = { spec: { containers: [{ name: "web", image: "r/apps/web:1" }] } };

Deno.test("resources: a minimal Deployment is normalised with the default namespace", () => {
  const d = parseResource(deployment({ nodeGroup: "workers", template }));
  assert.equal(d.kind, "Deployment");
  assert.equal(d.metadata.namespace, "default");
  if (d.kind === "Deployment") assert.equal(d.spec.nodeGroup, "workers");
});

Deno.test("resources: every problem is reported with its field path", () => {
  let err: unknown;
  try {
    parseResource(
      deployment({
        template: {
          spec: {
            nodeName: "n1",
            containers: [{ name: "a", image: "x", envFrom: [] }, { name: "a" }],
            volumes: [{ name: "cfg", configMap: { name: "c" } }],
          },
        },
        secrets: [{ key: "k", from: "vault" }, { key: "k" }],
      }, { name: "web", namespace: "_system" }),
      "f.yaml: document 1",
    );
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ValidationError);
  const lines = (err as Error).message.split("\n");
  const expect = [
    "metadata.namespace",
    "spec.nodeGroup: required",
    "spec.secrets[0].from: ssm or secretsmanager",
    "spec.secrets[1].key: duplicate key k",
    "spec.template.spec.nodeName",
    "spec.template.spec.volumes[0].configMap",
    "spec.template.spec.containers[0].envFrom",
    "spec.template.spec.containers[1].image: required",
    "spec.template.spec.containers[1].name: duplicate container name a",
  ];
  for (const e of expect) {
    assert.ok(
      lines.some((l) => l.startsWith("f.yaml: document 1: ") && l.includes(e)),
      `missing ${e} in\n${lines.join("\n")}`,
    );
  }
});

Deno.test("resources: reserved names and mount paths are rejected", () => {
  assert.throws(
    () =>
      parseResource(deployment({
        nodeGroup: "w",
        template: {
          metadata: { labels: { "podmin.dev/deployment": "x" } },
          spec: {
            volumes: [{ name: "podmin-values", emptyDir: {} }],
            containers: [{
              name: "c",
              image: "i",
              volumeMounts: [{
                name: "podmin-values",
                mountPath: "/var/run/secrets/podmin.dev/tls",
              }],
            }],
          },
        },
      })),
    (e: Error) =>
      /podmin.dev\/ prefix is reserved/.test(e.message) &&
      /podmin-values is reserved/.test(e.message) &&
      /reserved for Podmin's mounts/.test(e.message),
  );
});

Deno.test("resources: Service ports default targetPort and protocol; bad ports rejected", () => {
  const s = parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Service",
    metadata: { name: "dns", namespace: "kube" },
    spec: { selector: { app: "dns" }, ports: [{ port: 53, protocol: "UDP" }, { port: 53 }] },
  });
  assert.equal(s.kind, "Service");
  if (s.kind === "Service") {
    assert.deepEqual(s.spec.ports, [
      { port: 53, targetPort: 53, protocol: "TCP" },
      { port: 53, targetPort: 53, protocol: "UDP" },
    ]);
  }
  assert.throws(
    () =>
      parseResource({
        apiVersion: "podmin.dev/v1",
        kind: "Service",
        metadata: { name: "x" },
        spec: { selector: {}, ports: [{ port: 70000 }, { port: 80, protocol: "SCTP" }] },
      }),
    (e: Error) =>
      /spec.selector: must not be empty/.test(e.message) && /ports\[0\].port/.test(e.message) &&
      /ports\[0\].port: invalid value 70000; 1-65535/.test(e.message) &&
      /ports\[1\].protocol: invalid value "SCTP"; TCP or UDP/.test(e.message),
  );
});

Deno.test("resources: wrong apiVersion or kind", () => {
  assert.throws(
    () => parseResource({ apiVersion: "apps/v1", kind: "Deployment" }),
    /apiVersion: must be podmin.dev\/v1/,
  );
  assert.throws(
    () => parseResource({ apiVersion: "podmin.dev/v1", kind: "Pod" }),
    /kind: must be Deployment or Service/,
  );
  assert.throws(() => parseResource("text"), /a document must be a mapping/);
});

Deno.test("resources: replicas and selectors get a hint about NodeGroups", () => {
  assert.throws(
    () => parseResource(deployment({ nodeGroup: "w", replicas: 3, selector: {}, template })),
    (e: Error) =>
      /spec.replicas: a Podmin Deployment runs one Pod on every node/.test(e.message) &&
      /spec.selector: a Podmin Deployment/.test(e.message) && !/unknown field/.test(e.message),
  );
});

Deno.test("resources: the spec digest does not depend on the operator's locale", async () => {
  const script = `
    import { parseResource } from "${new URL("./resources.ts", import.meta.url).href}";
    import { contentAddress } from "${new URL("../kit/canonical_json.ts", import.meta.url).href}";
    const d = parseResource({ apiVersion: "podmin.dev/v1", kind: "Deployment", metadata: { name: "w" },
      spec: { nodeGroup: "g", secrets: [{ key: "b" }, { key: "aa" }, { key: "Z" }],
        template: { spec: { containers: [{ name: "c", image: "i" }] } } } });
    console.log(contentAddress(d).sha256);`;
  const digests = [];
  for (const lang of ["en_US.UTF-8", "da_DK.UTF-8", "C"]) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", script],
      env: { LANG: lang, LC_ALL: lang },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    digests.push(new TextDecoder().decode(out.stdout).trim());
  }
  assert.equal(new Set(digests).size, 1, digests.join(" "));
});

Deno.test("resources: reserved mount paths are matched after normalization", () => {
  for (
    const mountPath of [
      "/var/run/secrets//podmin.dev/values",
      "//var/run/secrets/podmin.dev/values",
      "/var/run/./secrets/podmin.dev/values",
      "/var/run/secrets/x/../podmin.dev/values",
      "/var/run/secrets/podmin.dev/",
      "/run/secrets/podmin.dev/values",
    ]
  ) {
    assert.throws(
      () =>
        parseResource(deployment({
          nodeGroup: "w",
          template: {
            spec: {
              volumes: [{ name: "v", emptyDir: {} }],
              containers: [{ name: "c", image: "i", volumeMounts: [{ name: "v", mountPath }] }],
            },
          },
        })),
      (e: Error) => /reserved for Podmin's mounts/.test(e.message),
      mountPath,
    );
  }
  // A sibling that only shares the prefix is not reserved.
  parseResource(deployment({
    nodeGroup: "w",
    template: {
      spec: {
        volumes: [{ name: "v", emptyDir: {} }],
        containers: [{
          name: "c",
          image: "i",
          volumeMounts: [{ name: "v", mountPath: "/var/run/secrets/podmin.dev2" }],
        }],
      },
    },
  }));
});

Deno.test("resources: annotations are kept, podmin.dev/ keys refused, unknown env sources refused", () => {
  const d = parseResource(deployment({
    nodeGroup: "w",
    template: {
      metadata: { annotations: { "example.com/team": "web" } },
      spec: template.spec,
    },
  }, { name: "web", annotations: { "example.com/owner": "ops", note: "free text: ok" } }));
  assert.deepEqual(d.metadata.annotations, { "example.com/owner": "ops", note: "free text: ok" });
  assert.ok(d.kind === "Deployment");
  assert.deepEqual(d.spec.template.metadata?.annotations, { "example.com/team": "web" });

  assert.throws(
    () =>
      parseResource(deployment({
        nodeGroup: "w",
        template: {
          metadata: { annotations: { "podmin.dev/spec": "sha256:x" } },
          spec: {
            containers: [{
              name: "c",
              image: "i",
              env: [
                { name: "A", valueFrom: { vaultRef: { path: "x" } } },
                { name: "B", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              ],
            }],
          },
        },
      }, { name: "web", labels: { "podmin.dev/owner": "me" }, annotations: { x: 1 } })),
    (e: Error) =>
      /metadata\.labels\.podmin\.dev\/owner: the podmin.dev\/ prefix is reserved/.test(e.message) &&
      /metadata\.annotations\.x: annotation value must be a string/.test(e.message) &&
      /template\.metadata\.annotations\.podmin\.dev\/spec: the podmin.dev\/ prefix/.test(
        e.message,
      ) &&
      /env\[0\]\.valueFrom: exactly one source/.test(e.message) &&
      !/env\[1\]/.test(e.message),
  );
});

Deno.test("selectorMatches: every selector label on the Pod; an empty selector selects nothing", () => {
  assert.ok(selectorMatches({ app: "web" }, { app: "web", tier: "front" }));
  assert.ok(!selectorMatches({ app: "web", tier: "back" }, { app: "web", tier: "front" }));
  assert.ok(!selectorMatches({}, { app: "web" }));
});

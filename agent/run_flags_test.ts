import assert from "node:assert/strict";
import type { CommandContext } from "../core/kit/cli_kit.ts";
import { flagOptions } from "./part.ts";
import { RUN_FLAGS, RUN_HELP, runFlags } from "./run_flags.ts";

/** The values parseArgs hands a command: the declared defaults, then the given flags. */
function ctxOf(given: Record<string, string | boolean>): CommandContext {
  const values: CommandContext["values"] = {};
  for (const [name, o] of Object.entries(flagOptions(RUN_FLAGS))) {
    if ("default" in o) values[name] = o.default as string | boolean;
  }
  return { values: { ...values, ...given } } as unknown as CommandContext;
}

Deno.test("run flags: the help names every declared flag once", () => {
  for (const name of Object.keys(RUN_FLAGS)) {
    const lines = RUN_HELP.split("\n").filter((l) =>
      l.startsWith(`  --${name} `) || l === `  --${name}`
    );
    assert.equal(lines.length, 1, `--${name}`);
  }
});

Deno.test("run flags: the declared defaults are the parsed values", () => {
  const f = runFlags(ctxOf({ cluster: "prod", nodegroup: "workers", "node-id": "n1" }));
  assert.equal(f.intervalMs, 2_000);
  assert.equal(f.secretsIntervalMs, 60_000);
  assert.equal(f.stateDir, "/run/podmin/agent");
  assert.deepEqual(f.dirs, {
    manifestDir: "/etc/podmin/manifests",
    secretsDir: "/run/podmin/secrets",
    tlsDir: "/run/podmin/tls",
  });
  assert.deepEqual(f.workloadCaKey, { kind: "ssm" });
  assert.equal(f.dataplane, false); // auto, without --mesh-listen
  assert.equal(f.registry.listen, "127.0.0.1:5000");
  assert.equal(f.workloadCaPublish, undefined);
});

Deno.test("run flags: --workload-ca-publish and --otel-ca parsed once, to bucket and key", () => {
  const f = runFlags(ctxOf({
    cluster: "prod",
    nodegroup: "workers",
    "node-id": "n1",
    "workload-ca-publish": "s3://trust-bundles/podmin/prod.pem",
    "otel-ca": "s3://otel-ca/ca.pem",
  }));
  assert.deepEqual(f.workloadCaPublish, { bucket: "trust-bundles", key: "podmin/prod.pem" });
  assert.deepEqual(f.telemetry.otelCa, { bucket: "otel-ca", key: "ca.pem" });
  assert.throws(
    () => runFlags(ctxOf({ cluster: "p", nodegroup: "w", "node-id": "n", "otel-ca": "s3://b/" })),
    /--otel-ca "s3:\/\/b\/" is not an exact s3:\/\/BUCKET\/KEY/,
  );
});

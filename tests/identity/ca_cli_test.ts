/**
 * `podmin ca status` and `podmin ca bundle` on a filesystem bucket maintained by a real
 * `CaMaintainer`: the bundle verifies a leaf with openssl; a state whose certificates are not all
 * self-signed by one key is refused.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { CaMaintainer } from "../../agent/identity/ca_maintainer.ts";
import { DEFAULT_ROTATION_POLICY } from "../../agent/identity/ca_rotation.ts";
import { WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import {
  createCaCertificate,
  fingerprint,
  generateKeyPair,
  issueLeaf,
  parseCertificatesPem,
} from "../../core/crypto/certificates.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { createBucket, openStore } from "../../core/store/store_url.ts";
import {
  checkCaState,
  parseWorkloadCaState,
  serializeWorkloadCaState,
} from "../../core/bucket/workload_ca_state.ts";
import { podmin } from "../support/programs.ts";
import { testWith } from "../support/requirements.ts";

testWith(
  "podmin ca [file bucket]: status, a bundle openssl verifies leaves with, tampering refused",
  { tools: ["openssl"] },
  async () => {
    const tmp = await Deno.makeTempDir({ prefix: "podmin-ca-cli-" });
    try {
      const url = `file://${tmp}/bucket`;
      await createBucket(url);
      const store = openStore(url);
      const keys = await generateKeyPair();
      const m = new CaMaintainer({
        store,
        cluster: "prod",
        nodeId: "node-a",
        keySource: { description: "test", load: () => Promise.resolve(keys), forget() {} },
        policy: DEFAULT_ROTATION_POLICY,
        leaseDurationMs: 60_000,
        log: silentLogger,
      });
      assert.equal((await m.pass()).status.leader, true);

      const status = await podmin(["--bucket", url, "ca", "status", "-o", "json"]);
      assert.equal(status.code, 0, status.stderr);
      const s = JSON.parse(status.stdout);
      assert.equal(s.healthy, true);
      assert.equal(s.lease.holder, "node-a");
      assert.equal(s.lease.term, 1);
      assert.deepEqual(s.certificates.map((c: { role: string }) => c.role), ["active"]);
      const text = await podmin(["--bucket", url, "ca", "status"]);
      assert.match(text.stdout, /^active +[0-9a-f]{16} /m);
      assert.match(text.stdout, /Leader: +node-a \(term 1\)/);

      const bundle = await podmin(["--bucket", url, "ca", "bundle"]);
      assert.equal(bundle.code, 0, bundle.stderr);
      const bundleFile = path.join(tmp, "ca.pem");
      await Deno.writeTextFile(bundleFile, bundle.stdout);
      const raw = (await store.get(WORKLOAD_CA_STATE)) as { body: Uint8Array };
      const state = parseWorkloadCaState(raw.body);
      const active = (await checkCaState(state, keys.publicKey)).active!;
      const leafKeys = await generateKeyPair();
      const leaf = await issueLeaf({
        ca: { certificate: active.certificate, privateKey: keys.privateKey },
        identity: { profile: "pod", cluster: "prod", namespace: "default", name: "web" },
        publicKey: leafKeys.publicKey,
      });
      const leafFile = path.join(tmp, "tls.crt");
      await Deno.writeTextFile(leafFile, leaf.toString("pem"));
      const verify = await new Deno.Command("openssl", {
        args: ["verify", "-CAfile", bundleFile, leafFile],
      }).output();
      assert.equal(verify.code, 0, new TextDecoder().decode(verify.stderr));

      // A certificate made for another key slipped into the state: refused as a whole.
      const other = await generateKeyPair();
      const foreign = await createCaCertificate({
        keys: other,
        commonName: "podmin workload CA prod intruder",
        notBefore: new Date(Date.now() - 60_000),
        notAfter: new Date(Date.now() + 3600_000),
      });
      const tampered = {
        ...state,
        certificates: [...state.certificates, {
          role: "next" as const,
          pem: foreign.toString("pem") + "\n",
          fingerprint: await fingerprint(foreign),
          notBefore: foreign.notBefore.toISOString(),
          notAfter: foreign.notAfter.toISOString(),
          addedAt: new Date().toISOString(),
          promoteAfter: new Date().toISOString(),
        }],
      };
      await store.put(WORKLOAD_CA_STATE, serializeWorkloadCaState(tampered));
      const refused = await podmin(["--bucket", url, "ca", "bundle"]);
      assert.equal(refused.code, 1);
      assert.equal(refused.stdout, "");
      assert.match(refused.stderr, /not made for the workload CA key/);
      const bad = await podmin(["--bucket", url, "ca", "status"]);
      assert.equal(bad.code, 1);
      assert.match(bad.stdout, /Error: .*not made for the workload CA key/);
      assert.equal(parseCertificatesPem(bundle.stdout).length, 1);

      const usage = await podmin(["--bucket", url, "ca", "rotate"]);
      assert.equal(usage.code, 2);
      assert.match(usage.stderr, /unknown ca command/);
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

import assert from "node:assert/strict";
import * as path from "node:path";
import { FsStore } from "../store/fs_store.ts";
import { getIfExists } from "../store/object_store.ts";
import { casUpdate } from "../store/cas_update.ts";
import { INDEX_SIGNING_KEY, INDEX_SIGNING_PUBLIC_KEY } from "./bucket_layout.ts";
import {
  DEPLOYMENT_INDEX_OBJECT,
  type DeploymentIndex,
  emptyDeploymentIndex,
  parseDeploymentIndex,
  serializeDeploymentIndex,
} from "./deployment_index.ts";
import {
  loadIndexSigner,
  parseIndexPublicKey,
  readIndexPublicKey,
  signedDeploymentIndexObject,
  signIndex,
  verifyIndexSignature,
} from "./index_signing.ts";

const S1 = `sha256:${"1".repeat(64)}`;
const S2 = `sha256:${"2".repeat(64)}`;

async function withStore(fn: (store: FsStore) => Promise<void>) {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-index-signing-" });
  try {
    await fn(new FsStore({ root: path.join(tmp, "bucket"), durable: false }));
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

const index = (spec: string, generation = 1): DeploymentIndex => ({
  ...emptyDeploymentIndex(),
  generation,
  deployments: [{ namespace: "default", name: "web", nodeGroup: "default", spec }],
});

Deno.test("index signing: the first signer creates the key and publishes its public half; later ones reuse it", async () => {
  await withStore(async (store) => {
    assert.equal(await readIndexPublicKey(store), undefined, "nothing signed yet");
    const first = await loadIndexSigner(store);
    const pem = new TextDecoder().decode((await getIfExists(store, INDEX_SIGNING_KEY))!.body);
    assert.match(pem, /^-----BEGIN PRIVATE KEY-----/);
    const published = await readIndexPublicKey(store);
    assert.equal(published?.keyId, first.keyId);
    const again = await loadIndexSigner(store);
    assert.equal(again.keyId, first.keyId, "the key never changes once made");
    // A public key object lost (or overwritten) is written again by the next signer.
    await store.delete(INDEX_SIGNING_PUBLIC_KEY);
    await loadIndexSigner(store);
    assert.equal((await readIndexPublicKey(store))?.keyId, first.keyId);
  });
});

Deno.test("index signing: a signed index verifies; any change to an entry, the generation or the signature does not", async () => {
  await withStore(async (store) => {
    const signer = await loadIndexSigner(store);
    const key = (await readIndexPublicKey(store))!;
    const signed = signIndex(index(S1), signer);
    assert.ok(verifyIndexSignature(signed, key));
    // Round trip through the stored bytes.
    assert.ok(verifyIndexSignature(parseDeploymentIndex(serializeDeploymentIndex(signed)), key));
    const forged = { ...signed, deployments: [{ ...signed.deployments[0], spec: S2 }] };
    assert.equal(verifyIndexSignature(forged, key), false, "another spec");
    assert.equal(verifyIndexSignature({ ...signed, generation: 2 }, key), false, "generation");
    assert.equal(
      verifyIndexSignature({ ...signed, deployments: [] }, key),
      false,
      "an entry dropped",
    );
    const { signature: _, ...unsigned } = signed;
    assert.equal(verifyIndexSignature(unsigned, key), false, "unsigned");
    // Another key (another bucket's) signs nothing here.
    await withStore(async (other) => {
      const stranger = signIndex(index(S1), await loadIndexSigner(other));
      assert.equal(verifyIndexSignature(stranger, key), false);
    });
  });
});

Deno.test("index signing: the signed CAS object signs every write; the plain one drops a stale signature", async () => {
  await withStore(async (store) => {
    const signer = await loadIndexSigner(store);
    const key = (await readIndexPublicKey(store))!;
    await casUpdate({
      store,
      object: signedDeploymentIndexObject(signer),
      mutate: () => index(S1),
    });
    const read = async () =>
      parseDeploymentIndex((await getIfExists(store, DEPLOYMENT_INDEX_OBJECT.key))!.body);
    assert.ok(verifyIndexSignature(await read(), key));
    await casUpdate({
      store,
      object: DEPLOYMENT_INDEX_OBJECT,
      mutate: (current) => ({ ...current, generation: current.generation + 1 }),
    });
    assert.equal((await read()).signature, undefined);
  });
});

Deno.test("index signing: the public key object and signature fields are validated as untrusted input", () => {
  const bytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  assert.throws(() => parseIndexPublicKey(bytes({ kind: "IndexSigningKey" })), /IndexSigningKey/);
  assert.throws(
    () =>
      parseIndexPublicKey(
        bytes({ apiVersion: "podmin.dev/v1", kind: "IndexSigningKey", keyId: "0", spki: "AAAA" }),
      ),
    /not a public key/,
  );
  const doc = (signature: unknown) =>
    new TextEncoder().encode(JSON.stringify({ ...index(S1), signature }));
  assert.throws(() => parseDeploymentIndex(doc({ keyId: "x", ed25519: "" })), /keyId/);
  assert.throws(
    () => parseDeploymentIndex(doc({ keyId: "0123456789abcdef", ed25519: "nope" })),
    /ed25519/,
  );
});

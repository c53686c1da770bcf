/**
 * The deployments index's signature (spec §7.9, "Changes over the mesh"; §8.2): the CLI signs
 * every index it writes with an Ed25519 key, so a member that rebuilds an index from a change a
 * mesh peer carried (`applyIndexChange`) can tell the index the CLI wrote from one a peer made up.
 *
 * The private key is `infra/index-signing-key.pem` (PKCS#8 PEM): `infra/` is the operators' prefix,
 * which the node role cannot read (spec §8.1) — whoever can read it can write `deployments/`
 * anyway. The public key is `identity/index-signing-key.json`, which agents read and cannot write.
 * The first CLI that writes the index creates both (`loadIndexSigner`); the key never changes
 * after that. Signed bytes: the index serialised without its `signature` (`indexSignedBytes`).
 */

import { Buffer } from "node:buffer";
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from "node:crypto";
import { INDEX_SIGNING_KEY, INDEX_SIGNING_PUBLIC_KEY } from "./bucket_layout.ts";
import {
  DEPLOYMENT_INDEX_OBJECT,
  type DeploymentIndex,
  serializeDeploymentIndex,
} from "./deployment_index.ts";
import type { CasObject } from "../store/cas_update.ts";
export type { IndexSignature } from "./deployment_index.ts";
import { sha256Hex } from "../kit/digest.ts";
import { PreconditionFailedError, ValidationError } from "../kit/errors.ts";
import { API_VERSION } from "../model/resources.ts";
import { getIfExists, type ObjectStore } from "../store/object_store.ts";

/** The public key agents verify with. */
export interface IndexPublicKey {
  keyId: string;
  key: KeyObject;
}

/** What the CLI signs with. */
export interface IndexSigner {
  keyId: string;
  /** The signature of `bytes`. */
  sign(bytes: Uint8Array): Uint8Array;
}

/** The public key object is small; anything larger is refused. */
const PUBLIC_KEY_MAX_BYTES = 4096;

/** The bytes a signature covers: the index serialised without its signature. */
export function indexSignedBytes(index: DeploymentIndex): Uint8Array {
  const { signature: _, ...unsigned } = index;
  return serializeDeploymentIndex(unsigned);
}

/** `index` signed by `signer` (an earlier signature is replaced). */
export function signIndex(index: DeploymentIndex, signer: IndexSigner): DeploymentIndex {
  const { signature: _, ...unsigned } = index;
  const sig = signer.sign(indexSignedBytes(unsigned));
  return {
    ...unsigned,
    signature: { keyId: signer.keyId, ed25519: btoa(String.fromCharCode(...sig)) },
  };
}

/** `deployments/index.json` as a CAS object whose every write `signer` signs. */
export function signedDeploymentIndexObject(signer: IndexSigner): CasObject<DeploymentIndex> {
  return {
    ...DEPLOYMENT_INDEX_OBJECT,
    serialize: (index) => serializeDeploymentIndex(signIndex(index, signer)),
  };
}

/** True when `index` carries a valid signature by `key`. */
export function verifyIndexSignature(index: DeploymentIndex, key: IndexPublicKey): boolean {
  const s = index.signature;
  if (!s || s.keyId !== key.keyId) return false;
  const sig = Uint8Array.from(atob(s.ed25519), (c) => c.charCodeAt(0));
  try {
    return verify(null, indexSignedBytes(index), key.key, sig);
  } catch {
    return false;
  }
}

function keyIdOf(publicKey: KeyObject): string {
  const der = publicKey.export({ type: "spki", format: "der" }) as Uint8Array;
  return sha256Hex(der).slice(0, 16);
}

function signerOf(privateKey: KeyObject): IndexSigner {
  const keyId = keyIdOf(createPublicKey(privateKey));
  return { keyId, sign: (bytes) => new Uint8Array(sign(null, bytes, privateKey)) };
}

function publicKeyObject(privateKey: KeyObject): Uint8Array {
  const publicKey = createPublicKey(privateKey);
  const der = publicKey.export({ type: "spki", format: "der" }) as Uint8Array;
  return new TextEncoder().encode(
    JSON.stringify(
      {
        apiVersion: API_VERSION,
        kind: "IndexSigningKey",
        keyId: keyIdOf(publicKey),
        spki: btoa(String.fromCharCode(...der)),
      },
      null,
      1,
    ) + "\n",
  );
}

/**
 * The cluster's index signer (CLI): reads `infra/index-signing-key.pem`, or creates it (a put
 * that only the first creator wins; a loser reads the winner's) when absent. Either way the public
 * key object is (re)written when it is missing or differs, so agents can verify.
 */
export async function loadIndexSigner(store: ObjectStore): Promise<IndexSigner> {
  let pem: string;
  const got = await getIfExists(store, INDEX_SIGNING_KEY, { maxBytes: PUBLIC_KEY_MAX_BYTES });
  if (got) pem = new TextDecoder().decode(got.body);
  else {
    const { privateKey } = generateKeyPairSync("ed25519");
    pem = privateKey.export({ type: "pkcs8", format: "pem" }) as string;
    try {
      await store.put(INDEX_SIGNING_KEY, new TextEncoder().encode(pem), {
        ifNoneMatch: "*",
        contentType: "application/x-pem-file",
      });
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
      return loadIndexSigner(store); // another CLI created it first: use theirs
    }
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch (err) {
    throw new ValidationError(`${INDEX_SIGNING_KEY}: not a PEM private key`, { cause: err });
  }
  if (privateKey.asymmetricKeyType !== "ed25519") {
    throw new ValidationError(`${INDEX_SIGNING_KEY}: not an Ed25519 key`);
  }
  const published = publicKeyObject(privateKey);
  const current = await getIfExists(store, INDEX_SIGNING_PUBLIC_KEY, {
    maxBytes: PUBLIC_KEY_MAX_BYTES,
  });
  if (!current || new TextDecoder().decode(current.body) !== new TextDecoder().decode(published)) {
    await store.put(INDEX_SIGNING_PUBLIC_KEY, published, { contentType: "application/json" });
  }
  return signerOf(privateKey);
}

/**
 * The public key agents verify with, from `identity/index-signing-key.json` (untrusted bytes:
 * validated); undefined when it is absent (no index was ever signed: nothing from a peer is).
 */
export async function readIndexPublicKey(store: ObjectStore): Promise<IndexPublicKey | undefined> {
  const got = await getIfExists(store, INDEX_SIGNING_PUBLIC_KEY, {
    maxBytes: PUBLIC_KEY_MAX_BYTES,
  });
  if (!got) return undefined;
  return parseIndexPublicKey(got.body);
}

/** Parses the public key object; throws `ValidationError`. */
export function parseIndexPublicKey(bytes: Uint8Array): IndexPublicKey {
  const bad = (why: string) => new ValidationError(`${INDEX_SIGNING_PUBLIC_KEY}: ${why}`);
  let doc: { apiVersion?: unknown; kind?: unknown; keyId?: unknown; spki?: unknown };
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw bad("not JSON");
  }
  if (!doc || typeof doc !== "object") throw bad("not an object");
  if (doc.apiVersion !== API_VERSION || doc.kind !== "IndexSigningKey") {
    throw bad("not an IndexSigningKey");
  }
  if (typeof doc.spki !== "string") throw bad("spki must be base64");
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.from(doc.spki, "base64"), format: "der", type: "spki" });
  } catch {
    throw bad("spki is not a public key");
  }
  if (key.asymmetricKeyType !== "ed25519") throw bad("not an Ed25519 key");
  const keyId = keyIdOf(key);
  if (doc.keyId !== keyId) throw bad("keyId does not match the key");
  return { keyId, key };
}

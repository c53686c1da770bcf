/**
 * The one certificate module: ECDSA P-256 keys (WebCrypto), CA certificates for a fixed key,
 * CSR-less issuance of Pod, Fluent Bit and node certificates, validation, and PEM I/O
 * (spec §8.5). Private keys stay in memory; callers write them only to tmpfs.
 *
 * Profiles:
 * - `pod`: digitalSignature; EKU serverAuth + clientAuth; SAN URI
 *   `spiffe://<cluster>.podmin/ns/<namespace>/deployment/<name>` plus the DNS names of the
 *   Services that select the Pod.
 * - `fluent-bit`: digitalSignature; EKU clientAuth only; SAN URI
 *   `spiffe://<cluster>.podmin/telemetry/<nodegroup>/<node>`.
 * - `node`: digitalSignature; EKU serverAuth + clientAuth; SAN URI
 *   `spiffe://<cluster>.podmin/node/<nodegroup>/<node>` plus the node's addresses.
 */

import "reflect-metadata";
import {
  AuthorityKeyIdentifierExtension,
  BasicConstraintsExtension,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  KeyUsageFlags,
  KeyUsagesExtension,
  PemConverter,
  SubjectAlternativeNameExtension,
  SubjectKeyIdentifierExtension,
  X509Certificate,
  X509CertificateGenerator,
} from "@peculiar/x509";
import * as der from "./der.ts";
import { Buffer } from "node:buffer";
import { PodminError } from "../kit/errors.ts";
import {
  checkClusterId,
  checkNamespace,
  checkNodeGroup,
  checkNodeId,
  checkObjectName,
} from "../model/names.ts";

/** Key and signature algorithm of every Podmin key and certificate. */
export const KEY_ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

/** A certificate could not be parsed, issued or validated. */
export class CertificateError extends PodminError {}

/** What a leaf certificate is for. */
export type LeafProfile = "pod" | "fluent-bit" | "node";

/** A key pair in memory. */
export interface KeyPair {
  privateKey: CryptoKey;
  publicKey: CryptoKey;
}

/** A CA: its certificate and the private key that signs for it. */
export interface CertificateAuthority {
  certificate: X509Certificate;
  privateKey: CryptoKey;
}

const DAY_MS = 24 * 3600_000;

/** Default lifetimes. */
export const LIFETIMES = {
  /** Pod, Fluent Bit and node certificates. */
  leafMs: DAY_MS,
  /** A workload CA certificate. */
  caMs: 365 * DAY_MS,
  /** Issued certificates start this far in the past (bounded clock skew between nodes). */
  backdateMs: 5 * 60_000,
} as const;

/** A new extractable P-256 key pair. */
export async function generateKeyPair(): Promise<KeyPair> {
  return await crypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"]) as KeyPair;
}

/** PKCS#8 PEM of a private key. */
export async function privateKeyPem(key: CryptoKey): Promise<string> {
  return pemBlock(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

/** One PEM block (RFC 7468: base64 in 64-character lines). */
function pemBlock(der: ArrayBuffer, label: string): string {
  const b64 = Buffer.from(der).toString("base64");
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

/**
 * Reads a PKCS#8 PEM P-256 private key (as setup stores the workload CA key) and derives its public
 * key. Throws `CertificateError` for anything else.
 */
export async function importPrivateKeyPem(pem: string): Promise<KeyPair> {
  let der: ArrayBuffer;
  try {
    const blocks = PemConverter.decodeWithHeaders(pem).filter((b) => b.type === "PRIVATE KEY");
    if (blocks.length !== 1) throw new Error(`found ${blocks.length} PRIVATE KEY blocks`);
    der = blocks[0].rawData;
  } catch (err) {
    throw new CertificateError(`not a PKCS#8 PEM private key: ${(err as Error).message}`, {
      hint: "the workload CA key is one '-----BEGIN PRIVATE KEY-----' block (ECDSA P-256)",
    });
  }
  try {
    const privateKey = await crypto.subtle.importKey("pkcs8", der, KEY_ALGORITHM, true, ["sign"]);
    const jwk = await crypto.subtle.exportKey("jwk", privateKey);
    delete jwk.d;
    jwk.key_ops = ["verify"];
    const publicKey = await crypto.subtle.importKey("jwk", jwk, KEY_ALGORITHM, true, ["verify"]);
    return { privateKey, publicKey };
  } catch (err) {
    throw new CertificateError(`private key is not ECDSA P-256: ${(err as Error).message}`);
  }
}

/** Options of `createCaCertificate`. */
export interface CaCertificateOptions {
  keys: KeyPair;
  /** Subject common name; each CA certificate of a cluster has its own (leaves name their CA). */
  commonName: string;
  notBefore: Date;
  notAfter: Date;
}

/** A self-signed CA certificate for `keys` (pathLen 0: it signs leaves only). */
export async function createCaCertificate(options: CaCertificateOptions): Promise<X509Certificate> {
  return await X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: [{ CN: [options.commonName] }],
    notBefore: options.notBefore,
    notAfter: options.notAfter,
    keys: options.keys,
    signingAlgorithm: KEY_ALGORITHM,
    extensions: [
      new BasicConstraintsExtension(true, 0, true),
      new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
      await SubjectKeyIdentifierExtension.create(options.keys.publicKey),
    ],
  });
}

/** The identity a leaf certificate names. */
export type LeafIdentity =
  | { profile: "pod"; cluster: string; namespace: string; name: string; dnsNames?: string[] }
  | { profile: "fluent-bit"; cluster: string; nodeGroup: string; node: string }
  | {
    profile: "node";
    cluster: string;
    nodeGroup: string;
    node: string;
    dnsNames?: string[];
    ipAddresses?: string[];
  };

/** The SPIFFE-style URI of an identity (spec §8.5). */
export function identityUri(identity: LeafIdentity): string {
  const domain = `${checkClusterId(identity.cluster)}.podmin`;
  switch (identity.profile) {
    case "pod":
      return `spiffe://${domain}/ns/${checkNamespace(identity.namespace)}/deployment/${
        checkObjectName("Deployment", identity.name)
      }`;
    case "fluent-bit":
      return `spiffe://${domain}/telemetry/${checkNodeGroup(identity.nodeGroup)}/${
        checkNodeId(identity.node)
      }`;
    case "node":
      return `spiffe://${domain}/node/${checkNodeGroup(identity.nodeGroup)}/${
        checkNodeId(identity.node)
      }`;
  }
}

/** Options of `issueLeaf`. */
export interface IssueOptions {
  ca: CertificateAuthority;
  identity: LeafIdentity;
  /** The leaf's public key. */
  publicKey: CryptoKey;
  /** Issuance time (default now); the certificate starts `LIFETIMES.backdateMs` earlier. */
  now?: Date;
  /** Lifetime from `now` (default `LIFETIMES.leafMs`); capped at the CA certificate's end. */
  lifetimeMs?: number;
}

/** Signs a leaf certificate for `identity` (no CSR: the agent holds both keys). */
export async function issueLeaf(options: IssueOptions): Promise<X509Certificate> {
  const { ca, identity } = options;
  const now = options.now ?? new Date();
  const notBefore = new Date(
    Math.max(now.getTime() - LIFETIMES.backdateMs, ca.certificate.notBefore.getTime()),
  );
  const notAfter = new Date(
    Math.min(
      now.getTime() + (options.lifetimeMs ?? LIFETIMES.leafMs),
      ca.certificate.notAfter.getTime(),
    ),
  );
  if (notAfter <= now) {
    throw new CertificateError(
      `CA certificate ${ca.certificate.subject} expired at ${ca.certificate.notAfter.toISOString()}`,
    );
  }
  const uri = identityUri(identity);
  const names: { type: "url" | "dns" | "ip"; value: string }[] = [{ type: "url", value: uri }];
  if (identity.profile !== "fluent-bit") {
    for (const dns of identity.dnsNames ?? []) names.push({ type: "dns", value: dns });
  }
  if (identity.profile === "node") {
    for (const ip of identity.ipAddresses ?? []) names.push({ type: "ip", value: ip });
  }
  // The TBSCertificate is assembled directly (RFC 5280 §4.1): the issuer name and the fixed
  // extensions come encoded from the CA, the key from WebCrypto; only the SAN is built per leaf.
  const fixed = await fixedParts(ca.certificate, identity.profile === "fluent-bit");
  const san = new Uint8Array(new SubjectAlternativeNameExtension(names, false).rawData);
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", options.publicKey));
  const tbs = der.sequence(
    der.tlv(0xa0, der.unsignedInteger(Uint8Array.of(2))), // v3
    der.unsignedInteger(randomSerialBytes()),
    ECDSA_SHA256,
    fixed.issuer,
    der.sequence(der.time(notBefore), der.time(notAfter)),
    der.sequence(der.tlv(0x31, der.sequence(COMMON_NAME, der.utf8String(commonNameOf(identity))))),
    spki,
    der.tlv(0xa3, der.sequence(fixed.extensions, san)),
  );
  const signature = new Uint8Array(await crypto.subtle.sign(KEY_ALGORITHM, ca.privateKey, tbs));
  return new X509Certificate(
    der.sequence(tbs, ECDSA_SHA256, der.bitString(der.ecdsaSignature(signature))),
  );
}

/** AlgorithmIdentifier of ecdsa-with-SHA256 (no parameters). */
const ECDSA_SHA256 = der.sequence(der.oid("1.2.840.10045.4.3.2"));
/** The commonName attribute type. */
const COMMON_NAME = der.oid("2.5.4.3");

/** DER parts that are the same for every leaf of one CA and kind, built once. */
const fixedCache = new WeakMap<
  X509Certificate,
  Map<boolean, Promise<{ issuer: Uint8Array; extensions: Uint8Array }>>
>();

function fixedParts(
  ca: X509Certificate,
  clientOnly: boolean,
): Promise<{ issuer: Uint8Array; extensions: Uint8Array }> {
  let byKind = fixedCache.get(ca);
  if (!byKind) fixedCache.set(ca, byKind = new Map());
  let parts = byKind.get(clientOnly);
  if (!parts) {
    const eku = clientOnly
      ? [ExtendedKeyUsage.clientAuth]
      : [ExtendedKeyUsage.serverAuth, ExtendedKeyUsage.clientAuth];
    parts = AuthorityKeyIdentifierExtension.create(ca, false).then((aki) => ({
      issuer: new Uint8Array(ca.subjectName.toArrayBuffer()),
      extensions: der.join(
        [
          new BasicConstraintsExtension(false, undefined, true),
          new KeyUsagesExtension(KeyUsageFlags.digitalSignature, true),
          new ExtendedKeyUsageExtension(eku, false),
          aki,
        ].map((e) => new Uint8Array(e.rawData)),
      ),
    }));
    byKind.set(clientOnly, parts);
  }
  return parts;
}

function commonNameOf(identity: LeafIdentity): string {
  switch (identity.profile) {
    case "pod":
      return `${identity.namespace}/${identity.name}`;
    case "fluent-bit":
      return `fluent-bit ${identity.node}`;
    case "node":
      return `node ${identity.node}`;
  }
}

/** A random positive 128-bit serial. */
function randomSerialBytes(): Uint8Array {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] &= 0x7f;
  bytes[0] |= 0x01; // positive, no leading zero byte
  return bytes;
}

/** A random positive 128-bit serial, hex. */
function randomSerial(): string {
  return Array.from(randomSerialBytes(), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** PEM of certificates, one block each, in order. */
export function certificatesPem(certs: readonly X509Certificate[]): string {
  return certs.map((c) => pemBlock(c.rawData, "CERTIFICATE")).join("");
}

/**
 * Parses a PEM bundle of certificates. Throws `CertificateError` for a bundle with no certificate,
 * a block that is not a certificate, or a certificate that does not parse.
 */
export function parseCertificatesPem(pem: string, what = "certificate bundle"): X509Certificate[] {
  let blocks: { type: string; rawData: ArrayBuffer }[];
  try {
    blocks = PemConverter.decodeWithHeaders(pem);
  } catch (err) {
    throw new CertificateError(`${what}: not PEM: ${(err as Error).message}`);
  }
  if (!blocks.length) throw new CertificateError(`${what}: no PEM certificate found`);
  return blocks.map((b, i) => {
    if (b.type !== "CERTIFICATE") {
      throw new CertificateError(`${what}: block ${i + 1} is ${b.type}, not CERTIFICATE`);
    }
    try {
      return new X509Certificate(b.rawData);
    } catch (err) {
      throw new CertificateError(
        `${what}: block ${i + 1} does not parse: ${(err as Error).message}`,
      );
    }
  });
}

/** Hex SHA-256 of a certificate's DER (the fingerprint operators and node records show). */
export async function fingerprint(cert: X509Certificate): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", cert.rawData);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Options of `validateLeaf`. */
export interface ValidateOptions {
  certificate: X509Certificate;
  /** The trust bundle: the CA certificates a verifier accepts. */
  trust: readonly X509Certificate[];
  profile: LeafProfile;
  now?: Date;
  /** When given, the certificate must certify this key's public half. */
  privateKey?: CryptoKey;
  /** When given, the certificate's URI SAN must be exactly this. */
  uri?: string;
}

/**
 * Validates a leaf against its trust bundle and profile: validity window (leaf and issuing CA),
 * issuer found in the bundle and a CA (basicConstraints, keyCertSign), signature, key usage,
 * EKU, URI SAN and key match. Returns the problems found (empty when valid).
 */
export async function validateLeaf(options: ValidateOptions): Promise<string[]> {
  const { certificate: cert, profile } = options;
  const now = options.now ?? new Date();
  const problems: string[] = [];
  if (now < cert.notBefore) problems.push(`not valid before ${cert.notBefore.toISOString()}`);
  if (now > cert.notAfter) problems.push(`expired at ${cert.notAfter.toISOString()}`);

  const issuers = options.trust.filter((ca) => ca.subject === cert.issuer);
  let signedBy: X509Certificate | undefined;
  for (const ca of issuers) {
    if (await cert.verify({ publicKey: ca, signatureOnly: true })) {
      signedBy = ca;
      break;
    }
  }
  if (!signedBy) {
    problems.push(`issuer ${cert.issuer} is not a CA of the trust bundle`);
  } else {
    problems.push(...caProblems(signedBy, now));
  }

  const basic = cert.getExtension(BasicConstraintsExtension);
  if (basic?.ca) problems.push("is a CA certificate, not a leaf");
  const usage = cert.getExtension(KeyUsagesExtension);
  if (!usage || !(usage.usages & KeyUsageFlags.digitalSignature)) {
    problems.push("key usage lacks digitalSignature");
  }
  const eku = new Set(cert.getExtension(ExtendedKeyUsageExtension)?.usages.map(String) ?? []);
  const wantServer = profile !== "fluent-bit";
  if (!eku.has(ExtendedKeyUsage.clientAuth)) problems.push("EKU lacks clientAuth");
  if (wantServer && !eku.has(ExtendedKeyUsage.serverAuth)) problems.push("EKU lacks serverAuth");
  if (!wantServer && eku.has(ExtendedKeyUsage.serverAuth)) {
    problems.push("EKU has serverAuth on a client-only identity");
  }
  if (options.uri !== undefined) {
    const uris = sanValues(cert, "url");
    if (!uris.includes(options.uri)) {
      problems.push(`URI SAN ${uris.join(",") || "(none)"} is not ${options.uri}`);
    }
  }
  if (options.privateKey && !await keyMatches(cert, options.privateKey)) {
    problems.push("does not certify the private key beside it");
  }
  return problems;
}

/** Problems of a CA certificate at `now`: validity window and CA constraints. */
export function caProblems(ca: X509Certificate, now: Date): string[] {
  const problems: string[] = [];
  if (now < ca.notBefore) {
    problems.push(`CA ${ca.subject} not valid before ${ca.notBefore.toISOString()}`);
  }
  if (now > ca.notAfter) problems.push(`CA ${ca.subject} expired at ${ca.notAfter.toISOString()}`);
  if (!ca.getExtension(BasicConstraintsExtension)?.ca) {
    problems.push(`CA ${ca.subject} is not a CA`);
  }
  const usage = ca.getExtension(KeyUsagesExtension);
  if (!usage || !(usage.usages & KeyUsageFlags.keyCertSign)) {
    problems.push(`CA ${ca.subject} lacks keyCertSign`);
  }
  return problems;
}

/** The values of one SAN type (`url`, `dns`, `ip`). */
export function sanValues(cert: X509Certificate, type: "url" | "dns" | "ip"): string[] {
  const san = cert.getExtension(SubjectAlternativeNameExtension);
  return san?.names.items.filter((n) => n.type === type).map((n) => n.value) ?? [];
}

/** True when `cert` certifies the public half of `privateKey`. */
export async function keyMatches(cert: X509Certificate, privateKey: CryptoKey): Promise<boolean> {
  const jwk = await crypto.subtle.exportKey("jwk", privateKey);
  const pub = await crypto.subtle.exportKey(
    "jwk",
    await cert.publicKey.export(KEY_ALGORITHM, ["verify"]),
  );
  return jwk.x === pub.x && jwk.y === pub.y;
}

/** True when two keys are the same public key (a CA certificate made for the fixed CA key). */
export async function samePublicKey(a: CryptoKey, b: CryptoKey): Promise<boolean> {
  const [x, y] = await Promise.all([
    crypto.subtle.exportKey("jwk", a),
    crypto.subtle.exportKey("jwk", b),
  ]);
  return x.x === y.x && x.y === y.y;
}

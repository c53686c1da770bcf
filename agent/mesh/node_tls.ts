/**
 * The node's mesh TLS material (spec §7.9): a node certificate issued in memory from the cluster
 * CA (`/<cluster>/_system/cluster-ca`: certificate and key PEM; renewed at half-life by
 * `NodeIdentity`, node_identity.ts), and the credentials of the mesh's gRPC server and clients:
 * TLS 1.3 only, both sides authenticated by the cluster CA. Keys never leave memory.
 */

import { Buffer } from "node:buffer";
import * as tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import type { X509Certificate } from "@peculiar/x509";
import {
  certificatesPem,
  generateKeyPair,
  identityUri,
  importPrivateKeyPem,
  issueLeaf,
  parseCertificatesPem,
  privateKeyPem,
} from "../../core/crypto/certificates.ts";
import { PodminError } from "../../core/kit/errors.ts";
import { renewAt } from "../identity/pod_certificates.ts";

/** The cluster CA as read from its SecureString (or a file for local nodes and tests). */
export interface ClusterCa {
  certificate: X509Certificate;
  privateKey: CryptoKey;
  /** PEM of the CA certificate (what peers trust). */
  pem: string;
}

/** Parses the cluster CA parameter: one certificate and one PKCS#8 key, PEM. */
export async function parseClusterCa(pem: string): Promise<ClusterCa> {
  const certs = parseCertificatesPem(
    pem.replace(/-----BEGIN PRIVATE KEY-----[\s\S]*?-----END PRIVATE KEY-----\s*/g, ""),
    "cluster CA",
  );
  if (certs.length !== 1) throw new PodminError(`cluster CA: ${certs.length} certificates, want 1`);
  const key = await importPrivateKeyPem(
    /-----BEGIN PRIVATE KEY-----[\s\S]*?-----END PRIVATE KEY-----/.exec(pem)?.[0] ?? "",
  );
  return {
    certificate: certs[0],
    privateKey: key.privateKey,
    pem: certificatesPem(certs),
  };
}

/** The DNS name a node's certificate carries and clients verify: `<node>.nodes.<cluster>.podmin`. */
export function nodeServerName(cluster: string, nodeId: string): string {
  return `${nodeId.toLowerCase()}.nodes.${cluster}.podmin`;
}

/** A node's TLS identity, PEM, in memory. */
export interface NodeTls {
  caPem: string;
  certPem: string;
  keyPem: string;
  /** The certificate's serial number (hex), for status and logs. */
  serial: string;
  notAfter: Date;
  /** When it is due for renewal (epoch ms): 45–55 % of its life from issuance. */
  renewAt: number;
}

/** Options of `issueNodeTls`. */
export interface IssueNodeTlsOptions {
  ca: ClusterCa;
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  /** Issuance time (default now). */
  now?: Date;
  /** Lifetime from `now` (default `LIFETIMES.leafMs`, 24 h); capped at the CA certificate's end. */
  lifetimeMs?: number;
}

/** Issues this node's certificate (and a new key) from the cluster CA. */
export async function issueNodeTls(options: IssueNodeTlsOptions): Promise<NodeTls> {
  const now = options.now ?? new Date();
  const keys = await generateKeyPair();
  const cert = await issueLeaf({
    ca: { certificate: options.ca.certificate, privateKey: options.ca.privateKey },
    identity: {
      profile: "node",
      cluster: options.cluster,
      nodeGroup: options.nodeGroup,
      node: options.nodeId,
      dnsNames: [nodeServerName(options.cluster, options.nodeId)],
    },
    publicKey: keys.publicKey,
    now,
    lifetimeMs: options.lifetimeMs,
  });
  return {
    caPem: options.ca.pem,
    certPem: certificatesPem([cert]),
    keyPem: await privateKeyPem(keys.privateKey),
    serial: cert.serialNumber,
    notAfter: cert.notAfter,
    // From issuance, not from the backdated notBefore: a short lifetime renews within it.
    renewAt: renewAt(cert, now.getTime()),
  };
}

/** The cluster's node URI prefix a peer certificate must carry. */
export function nodeUriPrefix(cluster: string): string {
  return identityUri({ profile: "node", cluster, nodeGroup: "x", node: "x" }).replace(
    /node\/x\/x$/,
    "node/",
  );
}

/**
 * What a server's secure context is made of: TLS 1.3 only, this node's certificate, clients
 * verified by the cluster CA. `minVersion` belongs here, not only in the server's constructor
 * options: a secure context swapped in by `setSecureContext` without it accepts TLS 1.2 (seen with
 * Deno 2.9's node:http2).
 */
function serverContextOptions(t: NodeTls): tls.SecureContextOptions {
  return {
    ca: Buffer.from(t.caPem),
    cert: Buffer.from(t.certPem),
    key: Buffer.from(t.keyPem),
    minVersion: "TLSv1.3",
  };
}

/**
 * Server credentials whose certificate can be replaced while the server runs: grpc-js (1.14)
 * watches `ServerCredentials` for new secure context options and hands them to its http2 server's
 * `setSecureContext`, so new handshakes get the new certificate and established sessions go on.
 * TLS 1.3 only, a client certificate from the cluster CA required.
 */
export class NodeServerCredentials extends grpc.ServerCredentials {
  constructor(t: NodeTls) {
    super(
      { requestCert: true, rejectUnauthorized: true, minVersion: "TLSv1.3" },
      serverContextOptions(t),
    );
  }

  /**
   * Serves `t` to new handshakes. The material is checked first (`tls.createSecureContext`
   * throws on a key that does not match): grpc-js would otherwise drop every new connection
   * after a context it could not set.
   */
  update(t: NodeTls): void {
    const options = serverContextOptions(t);
    tls.createSecureContext(options);
    this.updateSecureContextOptions(options);
  }

  /** Only itself: each server binds its own. */
  override _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

/** Server credentials of `t` (replace the certificate later with `update`). */
export function serverCredentials(t: NodeTls): NodeServerCredentials {
  return new NodeServerCredentials(t);
}

/** Client credentials: TLS 1.3 only, this node's certificate, servers verified by the cluster CA. */
export function clientCredentials(t: NodeTls): grpc.ChannelCredentials {
  const context = tls.createSecureContext({
    ca: t.caPem,
    cert: t.certPem,
    key: t.keyPem,
    minVersion: "TLSv1.3",
  });
  return grpc.credentials.createFromSecureContext(context);
}

/** The node id a verified peer certificate names (its `spiffe://<cluster>.podmin/node/…` URI). */
export function peerNodeId(
  cert: { subjectaltname?: string } | undefined,
  cluster: string,
): string | undefined {
  const prefix = nodeUriPrefix(cluster);
  for (const part of (cert?.subjectaltname ?? "").split(/,\s*/)) {
    if (!part.startsWith("URI:")) continue;
    const uri = part.slice(4);
    if (uri.startsWith(prefix)) return uri.slice(prefix.length).split("/")[1];
  }
  return undefined;
}

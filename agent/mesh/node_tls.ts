/**
 * The node's mesh identity (spec §7.9): a node certificate issued in memory from the cluster CA
 * (`/<cluster>/_system/cluster-ca`: certificate and key PEM), renewed at half-life; and the TLS
 * material of the mesh's gRPC server and clients: TLS 1.3 only, both sides authenticated by the
 * cluster CA. Keys never leave memory.
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
} from "../../core/certificates.ts";
import { PodminError } from "../../core/errors.ts";
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
  notAfter: Date;
  renewAt: number;
}

/** Issues this node's certificate from the cluster CA. */
export async function issueNodeTls(options: {
  ca: ClusterCa;
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  now?: Date;
  lifetimeMs?: number;
}): Promise<NodeTls> {
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
    now: options.now,
    lifetimeMs: options.lifetimeMs,
  });
  return {
    caPem: options.ca.pem,
    certPem: certificatesPem([cert]),
    keyPem: await privateKeyPem(keys.privateKey),
    notAfter: cert.notAfter,
    renewAt: renewAt(cert),
  };
}

/** The cluster's node URI prefix a peer certificate must carry. */
export function nodeUriPrefix(cluster: string): string {
  return identityUri({ profile: "node", cluster, nodeGroup: "x", node: "x" }).replace(
    /node\/x\/x$/,
    "node/",
  );
}

/** Server credentials: TLS 1.3 only, a client certificate from the cluster CA required. */
export function serverCredentials(t: NodeTls): grpc.ServerCredentials {
  const creds = grpc.ServerCredentials.createSsl(
    Buffer.from(t.caPem),
    [{ private_key: Buffer.from(t.keyPem), cert_chain: Buffer.from(t.certPem) }],
    true,
  );
  // grpc-js builds its http2 server from these options: add the protocol floor.
  const base = creds._getConstructorOptions.bind(creds);
  creds._getConstructorOptions = () => ({ ...base(), minVersion: "TLSv1.3" });
  return creds;
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

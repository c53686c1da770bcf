/**
 * The cluster's two CAs, created directly as SSM SecureStrings when missing:
 * `/<cluster>/_system/workload-ca-key` (PEM private key) and
 * `/<cluster>/_system/cluster-ca` (PEM certificate + PEM private key). Keys
 * are generated in memory and never written to disk, to the bucket or to
 * OpenTofu state. Teardown keeps them; destroy deletes them.
 */

import { DeleteParameterCommand, PutParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import {
  certificatesPem,
  createCaCertificate,
  generateKeyPair,
  privateKeyPem,
} from "../../core/crypto/certificates.ts";
import { PodminError } from "../../core/kit/errors.ts";
import { clusterCaName, workloadCaKeyName } from "../../core/model/provider_names.ts";

/** What happened to each parameter. */
export interface CaResult {
  name: string;
  outcome: "created" | "kept";
}

/** A new self-signed CA certificate and key, PEM, in memory. */
export async function newCaPem(
  commonName: string,
  years = 10,
): Promise<{ certPem: string; keyPem: string }> {
  const keys = await generateKeyPair();
  const notBefore = new Date(Date.now() - 5 * 60_000);
  const notAfter = new Date(notBefore.getTime() + years * 365 * 24 * 3600_000);
  const cert = await createCaCertificate({ keys, commonName, notBefore, notAfter });
  return { certPem: certificatesPem([cert]), keyPem: await privateKeyPem(keys.privateKey) };
}

async function putIfMissing(
  ssm: SSMClient,
  name: string,
  value: () => Promise<string>,
  description: string,
): Promise<CaResult> {
  try {
    await ssm.send(
      new PutParameterCommand({
        Name: name,
        Value: await value(),
        Type: "SecureString",
        Overwrite: false,
        Description: description,
      }),
    );
    return { name, outcome: "created" };
  } catch (err) {
    if ((err as { name?: string }).name === "ParameterAlreadyExists") {
      return { name, outcome: "kept" };
    }
    throw new PodminError(`cannot create ${name}: ${(err as Error).message}`, {
      hint: "the operator's credentials need ssm:PutParameter on /<cluster>/_system/*",
      cause: err,
    });
  }
}

/** Creates the workload CA key and the cluster CA when missing. Existing values are kept. */
export async function ensureClusterCas(
  options: { ssm: SSMClient; cluster: string },
): Promise<CaResult[]> {
  const { ssm, cluster } = options;
  return [
    await putIfMissing(
      ssm,
      workloadCaKeyName(cluster),
      async () => await privateKeyPem((await generateKeyPair()).privateKey),
      "Podmin workload CA private key (agents issue Pod certificates with it)",
    ),
    await putIfMissing(
      ssm,
      clusterCaName(cluster),
      async () => {
        const ca = await newCaPem(`podmin cluster CA ${cluster}`);
        return `${ca.certPem}\n${ca.keyPem}`;
      },
      "Podmin cluster CA certificate and private key (agent mutual TLS)",
    ),
  ];
}

/** Deletes both CA parameters (destroy). Absent parameters are fine. */
export async function deleteClusterCas(
  options: { ssm: SSMClient; cluster: string },
): Promise<string[]> {
  const deleted: string[] = [];
  for (const name of [workloadCaKeyName(options.cluster), clusterCaName(options.cluster)]) {
    try {
      await options.ssm.send(new DeleteParameterCommand({ Name: name }));
      deleted.push(name);
    } catch (err) {
      if ((err as { name?: string }).name !== "ParameterNotFound") throw err;
    }
  }
  return deleted;
}

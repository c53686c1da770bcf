/**
 * Names in AWS Parameter Store and Secrets Manager. Like bucket keys, every
 * name is built here from validated parts.
 */

import {
  checkClusterId,
  checkNamespace,
  checkObjectName,
  checkValueKey,
  SYSTEM_NAMESPACE,
} from "./names.ts";

/** `/<cluster>/<namespace>/<pod-name>/<key>`: an app value (SSM parameter or secret). */
export function valueName(
  { cluster, namespace, podName, key }: {
    cluster: string;
    namespace: string;
    podName: string;
    key: string;
  },
): string {
  return `/${checkClusterId(cluster)}/${checkNamespace(namespace)}/${
    checkObjectName("Pod", podName)
  }/${checkValueKey(key)}`;
}

/** The workload CA private key (SecureString). */
export function workloadCaKeyName(cluster: string): string {
  return `/${checkClusterId(cluster)}/${SYSTEM_NAMESPACE}/workload-ca-key`;
}

/** The cluster CA certificate and private key (SecureString, PEM bundle). */
export function clusterCaName(cluster: string): string {
  return `/${checkClusterId(cluster)}/${SYSTEM_NAMESPACE}/cluster-ca`;
}

/** Small operator resources for tests: one-container Deployments of NodeGroup workers. */

import { type Deployment, parseResource, type SecretRef } from "../../core/model/resources.ts";

/** A validated Deployment `name` (image `r/apps/<name>:1`) with optional labels and values. */
export function workerDeployment(
  name: string,
  options: { labels?: Record<string, string>; secrets?: Pick<SecretRef, "key" | "from">[] } = {},
): Deployment {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      nodeGroup: "workers",
      ...(options.secrets ? { secrets: options.secrets } : {}),
      template: {
        ...(options.labels ? { metadata: { labels: options.labels } } : {}),
        spec: { containers: [{ name, image: `r/apps/${name}:1` }] },
      },
    },
  }) as Deployment;
}

/** Deployment `web` of NodeGroup workers, image `r/apps/web:<tag>`, with a `spec.rollout`. */
export function rolloutDeployment(tag: string, rollout: Record<string, unknown>): Deployment {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name: "web" },
    spec: {
      nodeGroup: "workers",
      rollout,
      template: { spec: { containers: [{ name: "c", image: `r/apps/web:${tag}` }] } },
    },
  }) as Deployment;
}

/**
 * The secrets part of `podmin-agent run`: the declared Parameter Store / Secrets Manager values of
 * the node's Pods, kept in tmpfs. It has no loop of its own: the deployments pass syncs it.
 */

import type { Logger } from "../../core/kit/log.ts";
import type { FlagSpecs, Part } from "../part.ts";
import { SecretsSync } from "./secrets_sync.ts";
import type { AwsValueProvider } from "./value_provider.ts";

/** The secrets part's flags. */
export const SECRETS_FLAGS = {
  "secrets-dir": {
    type: "string",
    default: "/run/podmin/secrets",
    arg: "DIR",
    help: "tmpfs root of per-Pod values (default {default})",
  },
  "secrets-interval": {
    type: "string",
    default: "60s",
    arg: "DUR",
    help: "value refresh interval (default {default})",
  },
} as const satisfies FlagSpecs;

/** The secrets part: the sync the deployments pass drives. */
export function secretsPart(o: {
  cluster: string;
  /** `--secrets-dir`. */
  secretsDir: string;
  provider: AwsValueProvider;
  /** `--secrets-interval`. */
  refreshMs: number;
  log: Logger;
}): Part & { sync: SecretsSync } {
  return {
    name: "secrets",
    sync: new SecretsSync({
      cluster: o.cluster,
      secretsDir: o.secretsDir,
      provider: o.provider,
      refreshMs: o.refreshMs,
      log: o.log,
    }),
  };
}

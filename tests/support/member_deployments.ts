/**
 * A mesh member's deployments pass for tests without a node: its files under one directory, no
 * values provider (Deployments here declare none), index reads gated by the member's notifier.
 */

import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
import type { IndexNotifier } from "../../agent/index_notifier.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { type Logger, silentLogger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";

/** The pass of a member whose manifests, values and certificates live under `base`. */
export function memberDeploymentsPass(o: {
  store: ObjectStore;
  base: string;
  notifier: IndexNotifier;
  log?: Logger;
}): DeploymentsPass {
  const secretsDir = path.join(o.base, "secrets");
  return new DeploymentsPass({
    store: o.store,
    nodeGroup: "workers",
    manifestDir: path.join(o.base, "manifests"),
    secretsDir,
    tlsDir: path.join(o.base, "tls"),
    secrets: new SecretsSync({
      cluster: "test",
      secretsDir,
      provider: { fetch: () => Promise.reject(new Error("no values")) },
      refreshMs: 60_000,
      log: silentLogger,
    }),
    shouldReadIndex: (held) => o.notifier.shouldRead(held),
    log: o.log ?? silentLogger,
  });
}

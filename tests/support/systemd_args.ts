/** A systemd unit's command line as systemd expands it, for tests that run a unit's ExecStart. */

import assert from "node:assert/strict";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";

/**
 * The unit's arguments as systemd builds them: `${VAR}` is replaced inside its word (one
 * argument); a bare `$VAR` word is split at whitespace into zero or more arguments. Every
 * variable the line uses must be in `env`.
 */
export function systemdArgs(line: string, env: Record<string, string>): string[] {
  return line.split(" ").flatMap((a) => {
    const bare = /^\$([A-Z0-9_]+)$/.exec(a);
    if (bare) {
      assert.ok(bare[1] in env, `unit uses ${bare[1]}, which the test must provide`);
      return env[bare[1]].split(/\s+/).filter(Boolean);
    }
    return [
      a.replace(/\$\{([A-Z0-9_]+)\}/g, (_, k: string) => {
        assert.ok(k in env, `unit uses ${k}, which the test must provide`);
        return env[k];
      }),
    ];
  });
}

/** podmin-agent.service's ExecStart: the program and its arguments, expanded with `env`. */
export function agentUnitCommand(env: Record<string, string>): { program: string; args: string[] } {
  const unit = VMCONFIG_ASSETS["units/podmin-agent.service"];
  const exec = /^ExecStart=(\S+) (.+)$/m.exec(unit);
  assert.ok(exec, "ExecStart present");
  return { program: exec[1], args: systemdArgs(exec[2], env) };
}

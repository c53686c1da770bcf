/**
 * Where an agent gets the fixed workload CA key: Parameter Store (`/<cluster>/_system/
 * workload-ca-key`, the default on nodes) or a PEM file on tmpfs (`podmin local`). The key is held
 * in memory only, loaded once and reloaded after `forget()` (e.g. when the state's certificates no
 * longer match it).
 */

import { importPrivateKeyPem, type KeyPair } from "../../core/crypto/certificates.ts";
import { UsageError } from "../../core/kit/errors.ts";
import { workloadCaKeyName } from "../../core/model/provider_names.ts";
import type { ValueProvider } from "../secrets/value_provider.ts";

/** A source of the workload CA key. */
export interface CaKeySource {
  /** Where the key comes from, for status and errors (never the key). */
  readonly description: string;
  /** The key pair; throws the provider's typed errors or `CertificateError`. */
  load(): Promise<KeyPair>;
  /** Drops the cached key, so the next `load()` reads it again. */
  forget(): void;
}

/** Caches one successful read of `read`. */
class CachedKey implements CaKeySource {
  #key?: Promise<KeyPair>;
  constructor(readonly description: string, private readonly read: () => Promise<string>) {}

  load(): Promise<KeyPair> {
    if (!this.#key) {
      const loading = this.read().then(importPrivateKeyPem);
      // A failed read is not cached: the next pass tries again.
      loading.catch(() => {
        if (this.#key === loading) this.#key = undefined;
      });
      this.#key = loading;
    }
    return this.#key;
  }

  forget(): void {
    this.#key = undefined;
  }
}

/** The SecureString `/<cluster>/_system/workload-ca-key` through `provider`. */
export function ssmCaKey(options: { provider: ValueProvider; cluster: string }): CaKeySource {
  const name = workloadCaKeyName(options.cluster);
  return new CachedKey(`Parameter Store ${name}`, async () => {
    return new TextDecoder().decode(await options.provider.fetch("ssm", name));
  });
}

/** A PEM file (keep it on tmpfs). */
export function fileCaKey(path: string): CaKeySource {
  return new CachedKey(`file ${path}`, () => Deno.readTextFile(path));
}

/** `--workload-ca-key` or `--cluster-ca`: where a CA key comes from. */
export type CaKeyFlag = { kind: "ssm" } | { kind: "file"; path: string } | { kind: "off" };

/** The workload CA key source of `--workload-ca-key`, or undefined for "off". */
export function caKeySource(options: {
  flag: CaKeyFlag;
  provider: ValueProvider;
  cluster: string;
}): CaKeySource | undefined {
  const { flag } = options;
  if (flag.kind === "off") return undefined;
  if (flag.kind === "file") return fileCaKey(flag.path);
  return ssmCaKey({ provider: options.provider, cluster: options.cluster });
}

/** Parses `--workload-ca-key` or `--cluster-ca` (`flag` names it in the error). */
export function parseCaKeyFlag(value: string, flag = "--workload-ca-key"): CaKeyFlag {
  if (value === "ssm" || value === "off") return { kind: value };
  if (value.startsWith("file:") && value.length > 5 && value.slice(5).startsWith("/")) {
    return { kind: "file", path: value.slice(5) };
  }
  throw new UsageError(`${flag} ${JSON.stringify(value)} is not a key source`, {
    hint: 'use "ssm", "file:/run/…/<name>.pem" (an absolute path on tmpfs) or "off"',
  });
}

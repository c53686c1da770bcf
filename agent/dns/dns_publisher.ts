/**
 * Publishes Service VIPs through CoreDNS: writes the cluster zone (`zone_file.ts`) to
 * `<dns-dir>/<domain>.db` atomically (temporary file, then rename) whenever the Services change;
 * CoreDNS's `file` plugin reloads it when the SOA serial changes. A failed read of the Services
 * keeps the zone as it is (names keep resolving).
 */

import * as path from "node:path";
import type { Logger } from "../../core/kit/log.ts";
import { writeFileAtomic } from "../../core/store/atomic_write.ts";
import type { ServicesView } from "../services/services_view.ts";
import { nextSerial, renderZone, zoneSerial } from "./zone_file.ts";

/** Options of `DnsPublisher`. */
export interface DnsPublisherOptions {
  services: ServicesView;
  /** Directory of the zone file (tmpfs; CoreDNS reads it). */
  dir: string;
  domain: string;
  /**
   * Each pass refreshes the Services (default true); false where one Services loop refreshes them
   * for every reader (`podmin-agent run`): the pass reports that loop's last error.
   */
  refreshServices?: boolean;
  log: Logger;
}

/** What a pass did. */
export interface DnsStatus {
  zoneFile: string;
  serial?: number;
  records: number;
  /** Index generation the zone was rendered from. */
  generation?: number;
  error?: string;
}

/** Keeps the zone file equal to the Services. */
export class DnsPublisher {
  readonly #o: DnsPublisherOptions;
  #body?: string;
  #serial?: number;

  constructor(options: DnsPublisherOptions) {
    this.#o = options;
  }

  /** The zone file's path. */
  get zoneFile(): string {
    return path.join(this.#o.dir, `${this.#o.domain}.db`);
  }

  /** Refreshes the Services (unless a loop does) and rewrites the zone when they changed. Never throws. */
  async pass(now = Date.now()): Promise<DnsStatus> {
    const error = this.#o.refreshServices === false
      ? this.#o.services.lastError
      : await this.#o.services.refresh(now);
    const services = this.#o.services.services();
    const status: DnsStatus = {
      zoneFile: this.zoneFile,
      records: services.length,
      generation: this.#o.services.generation,
      error,
    };
    try {
      // The body without the SOA decides whether anything changed.
      const body = renderZone({ domain: this.#o.domain, serial: 0, services });
      if (this.#serial === undefined) this.#serial = await this.#readSerial();
      if (body !== this.#body || !await exists(this.zoneFile)) {
        const serial = nextSerial(this.#serial, now);
        await Deno.mkdir(this.#o.dir, { recursive: true, mode: 0o755 });
        // Not durable: the first pass after a restart writes the zone again.
        await writeFileAtomic(
          this.zoneFile,
          renderZone({ domain: this.#o.domain, serial, services }),
          { mode: 0o644, durable: false },
        );
        this.#body = body;
        this.#serial = serial;
        this.#o.log.info("dns zone written", { serial, services: services.length });
      }
      status.serial = this.#serial;
    } catch (err) {
      status.error = `writing ${this.zoneFile}: ${(err as Error).message}`;
    }
    return status;
  }

  async #readSerial(): Promise<number | undefined> {
    try {
      return zoneSerial(await Deno.readTextFile(this.zoneFile));
    } catch {
      return undefined;
    }
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await Deno.stat(file);
    return true;
  } catch {
    return false;
  }
}

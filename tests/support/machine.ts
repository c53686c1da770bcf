/**
 * A machine of the machine harness (issue 31 item 2, "instances that boot"): a systemd-nspawn
 * container standing in for an EC2 instance, with its lifecycle: create (its own copy of the cached
 * Debian root filesystem, tests/peers/build_machine_rootfs.sh; its ENIs in the run's VPC,
 * tests/support/box_vpc.ts; its own IMDSv2 emulator), boot, exec, read a unit's journal, stop
 * (power off), boot again (the root filesystem persists) and destroy.
 *
 * What is real: the kernel (shared with the host: no VM here), Debian's systemd as PID 1 and
 * every unit, program and file of the node. What stands in for AWS, and how:
 * - the instance is a container: nspawn with all capabilities, its own PID, mount, UTS, IPC and
 *   network namespaces, its cgroups `<run>/<machine>` bound at /sys/fs/cgroup (a private mount
 *   namespace of the launcher puts each hierarchy's machine directory there, so the machine's
 *   systemd manages only its own subtree), /dev/kmsg bound in (kubelet reads it), nspawn's seccomp
 *   filter off (`SYSTEMD_SECCOMP=0`: it refuses bpf()), `--private-network` with the machine's
 *   namespace (else /proc/sys/net is read-only and pod-network.sh cannot set accept_ra);
 * - cloud-init: the unit `podmin-box-user-data.service` runs the user-data once per instance
 *   (cloud-init's scripts-user semantics: `/var/lib/cloud/instance/sem/config_scripts_user`) after
 *   network-online.target, as root, its output appended to /var/log/cloud-init-output.log (and to
 *   the journal); nothing else of cloud-init (no hostname, no network configuration);
 * - IMDS, the ENI attachment and the VPC's addressing: see box_vpc.ts; the emulator
 *   (tests/support/imds_emulator.ts) answers the instance id, role credentials, instance tags,
 *   ENIs (with the VPC's IPv6 block) and the delegated /80 (assigned at launch), and EC2's
 *   AttachNetworkInterface for the machine's spare ENIs, which the VPC then hot-plugs.
 */

import * as path from "node:path";
import { cgroupDirs, createCgroup } from "./box_cgroups.ts";
import type { BoxRun } from "./box_run.ts";
import type { MachineNetwork, SpareEni, Vpc } from "./box_vpc.ts";
import { CommandError, type CommandOutput, mustRun, runCommand } from "./command.ts";
import { type Imds, startImds } from "./imds_emulator.ts";

/** The stand-in for cloud-init's user-data stage. */
/** A power off slower than this prints which units systemd waited for. */
const SLOW_POWER_OFF_MS = 15_000;

export const USER_DATA_UNIT = "podmin-box-user-data.service";

/** Where cloud-init (and its stand-in) write the user-data's output. */
export const CLOUD_INIT_OUTPUT = "/var/log/cloud-init-output.log";

/** A machine step that did not happen in time or failed; `report` holds what the machine said. */
export class MachineError extends Error {
  /** The machine's cloud-init output and journals, when they were read. */
  readonly report: string;
  constructor(message: string, report = "") {
    super(report ? `${message}\n${report}` : message);
    this.name = "MachineError";
    this.report = report;
  }
}

/** A file written into a machine's root filesystem. */
export interface MachineFile {
  /** Real path inside the machine. */
  file: string;
  content: string;
  mode?: number;
}

/** What a machine is made of. */
export interface MachineOptions {
  run: BoxRun;
  vpc: Vpc;
  /** A short name (`m0`): the namespace `<run>-<name>`, the cgroup `<run>/<name>`. */
  name: string;
  /** Picks its addresses in the VPC (0-99). */
  index: number;
  /** The cached root filesystem (tests/peers/build_machine_rootfs.sh prints it). */
  rootfs: string;
  /** The user-data EC2 would hand to cloud-init (a script: `#!` first). */
  userData: string;
  /** Files written into the root filesystem before the first boot (default mode 0644). */
  files?: MachineFile[];
  /** Units enabled before the first boot (WantedBy=multi-user.target). */
  enable?: string[];
  /** The instance id (default a random `i-0…`), e.g. the one moto gave an ASG's instance. */
  instanceId?: string;
  /** The instance's zone in the metadata (default `us-east-1a`). */
  availabilityZone?: string;
  /**
   * Environment of the stand-in for cloud-init, i.e. of the user-data: the user-data's own test
   * overrides (`PODMIN_S3_BASE_URL`: AWS's S3 names do not resolve here).
   */
  userDataEnvironment?: Record<string, string>;
  /** A Pod ENI as device 1 (a node's; default true). */
  podEni?: boolean;
  /** Instance tags in the metadata (instance metadata tags on). */
  tags?: Record<string, string>;
  /** ENIs AttachNetworkInterface may attach to this machine (the VPC hot-plugs them). */
  spareEnis?: SpareEni[];
  /** The instance role's credentials in the metadata (default the emulator's). */
  roleCredentials?: { accessKeyId: string; secretAccessKey: string; sessionToken: string };
}

const cloudInitUnit = (environment: Record<string, string>) =>
  `# Podmin machine harness: stand-in for cloud-init's user-data stage (scripts-user, once per
# instance). Not cloud-init: it only runs the user-data script EC2 would hand to it.
[Unit]
Description=Stand-in for cloud-init: the instance's user-data (podmin machine harness)
After=network-online.target
Wants=network-online.target
ConditionPathExists=!/var/lib/cloud/instance/sem/config_scripts_user

[Service]
Type=oneshot
RemainAfterExit=yes
${Object.entries(environment).map(([k, v]) => `Environment="${k}=${v}"\n`).join("")}
ExecStart=/bin/bash -c 'set -o pipefail; rc=0; /var/lib/cloud/instance/scripts/part-001 2>&1 | tee -a ${CLOUD_INIT_OUTPUT} || rc=$$?; mkdir -p /var/lib/cloud/instance/sem; date -u +%%s >/var/lib/cloud/instance/sem/config_scripts_user; exit $$rc'
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
`;

/**
 * The launcher: joins the machine's cgroups, makes a private mount namespace (a tmpfs on
 * /run/systemd/nspawn, whose clean-up refuses a disk-backed /run; the machine's cgroup tree) and
 * execs systemd-nspawn (same PID: the child this module spawns is nspawn).
 */
const LAUNCHER = String.raw`set -euo pipefail
exec >>"$BOX_CONSOLE" 2>&1
while read -r _ dir; do echo $$ >"$dir/cgroup.procs"; done <<<"$BOX_CGROUPS"
exec unshare --mount --propagation private -- bash -c '
set -euo pipefail
mkdir -p /run/systemd/nspawn
mount -t tmpfs -o mode=0755 podmin-box /run/systemd/nspawn
mount -t tmpfs -o mode=0755 podmin-box-cgroup "$BOX_CGROUPFS"
while read -r name dir; do
  mkdir -p "$BOX_CGROUPFS/$name"
  mount --bind "$dir" "$BOX_CGROUPFS/$name"
done <<<"$BOX_CGROUPS"
exec systemd-nspawn --quiet --boot --register=no --keep-unit --capability=all \
  --console=read-only --machine="$BOX_MACHINE" --hostname="$BOX_HOSTNAME" \
  --private-network --network-namespace-path="$BOX_NETNS" --bind="$BOX_CGROUPFS:/sys/fs/cgroup" \
  --bind=/dev/kmsg --directory="$BOX_ROOT"
'`;

const MACHINE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** A machine: see the module comment. */
export class Machine {
  readonly name: string;
  /** The machine's directory on the host (root filesystem, console log). */
  readonly dir: string;
  /** Its root filesystem on the host. */
  readonly root: string;
  readonly network: MachineNetwork;
  /** Its IMDSv2 emulator. */
  readonly imds: Imds;
  readonly instanceId: string;
  readonly #run: BoxRun;
  #nspawn?: Deno.ChildProcess;
  #leader?: number;

  private constructor(o: {
    run: BoxRun;
    name: string;
    dir: string;
    network: MachineNetwork;
    imds: Imds;
    instanceId: string;
  }) {
    this.#run = o.run;
    this.name = o.name;
    this.dir = o.dir;
    this.root = path.join(o.dir, "root");
    this.network = o.network;
    this.imds = o.imds;
    this.instanceId = o.instanceId;
  }

  /** Makes a machine (not booted): its root filesystem, network, IMDS and cgroups. */
  static async create(o: MachineOptions): Promise<Machine> {
    if (!/^[a-z][a-z0-9]{0,5}$/.test(o.name)) {
      throw new RangeError(`machine name ${JSON.stringify(o.name)}: 1-6 of [a-z0-9]`);
    }
    const dir = path.join(o.run.dir, o.name);
    await Deno.mkdir(dir);
    await mustRun("cp", ["-a", "--reflink=auto", o.rootfs, path.join(dir, "root")]);
    const network = await o.vpc.attach(o.name, o.index, { podEni: o.podEni });
    const instanceId = o.instanceId ?? "i-0" +
        [...crypto.getRandomValues(new Uint8Array(8))].map((b) => b.toString(16).padStart(2, "0"))
          .join("");
    const vpcIpv6CidrBlocks = [o.vpc.block6];
    const spares = o.spareEnis ?? [];
    const imds = startImds({
      instanceId,
      availabilityZone: o.availabilityZone ?? "us-east-1a",
      roleCredentials: o.roleCredentials,
      enis: [network.node, ...network.pod ? [network.pod] : []].map((e) => ({
        mac: e.mac,
        deviceNumber: e.deviceNumber,
        interfaceId: e.interfaceId,
        ipv6s: [e.ipv6],
        vpcIpv6CidrBlocks,
        ...("prefix" in e ? { ipv6Prefix: e.prefix } : {}),
        ...("ipv4" in e ? { localIpv4s: [e.ipv4], subnetIpv4CidrBlock: o.vpc.subnet4 } : {}),
      })),
      tags: o.tags,
      attachable: spares.map((e) => ({
        mac: e.mac,
        interfaceId: e.interfaceId,
        ipv6s: [e.ipv6],
        localIpv4s: [e.ipv4],
        subnetIpv4CidrBlock: o.vpc.subnet4,
        vpcIpv6CidrBlocks,
      })),
      onAttach: async (attached) => {
        const eni = spares.find((e) => e.interfaceId === attached.interfaceId)!;
        await o.vpc.plug(network, eni, attached.deviceNumber);
      },
    });
    await o.vpc.routeImds(network, Number(new URL(imds.endpoint).port));
    const m = new Machine({ run: o.run, name: o.name, dir, network, imds, instanceId });
    const files: MachineFile[] = [
      {
        file: `/etc/systemd/system/${USER_DATA_UNIT}`,
        content: cloudInitUnit(o.userDataEnvironment ?? {}),
      },
      { file: "/var/lib/cloud/instance/user-data.txt", content: o.userData, mode: 0o600 },
      { file: "/var/lib/cloud/instance/scripts/part-001", content: o.userData, mode: 0o700 },
      ...o.files ?? [],
    ];
    for (const f of files) await m.#write(f.file, f.content, f.mode ?? 0o644);
    const wants = path.join(m.root, "etc/systemd/system/multi-user.target.wants");
    await Deno.mkdir(wants, { recursive: true });
    for (const unit of [USER_DATA_UNIT, ...o.enable ?? []]) {
      await Deno.symlink(`/etc/systemd/system/${unit}`, path.join(wants, unit));
    }
    await createCgroup(`${o.run.id}/${o.name}`);
    await createCgroup(`${o.run.id}/exec`);
    return m;
  }

  async #write(real: string, content: string, mode: number): Promise<void> {
    const file = path.join(this.root, real);
    await Deno.mkdir(path.dirname(file), { recursive: true });
    await Deno.writeTextFile(file, content, { mode });
    await Deno.chmod(file, mode);
  }

  /** True while the machine runs (its nspawn process has not exited). */
  get running(): boolean {
    return this.#nspawn !== undefined;
  }

  /** Boots the machine; resolves once its systemd answers (not when its units are up). */
  async boot(timeoutMs = 60_000): Promise<void> {
    if (this.#nspawn) throw new MachineError(`${this.name} is already running`);
    const cgroups = [];
    for (const dir of await cgroupDirs(`${this.#run.id}/${this.name}`)) {
      const hierarchy = dir.slice(0, -`/${this.#run.id}/${this.name}`.length);
      cgroups.push(`${path.relative("/sys/fs/cgroup", hierarchy) || "."} ${dir}`);
    }
    const cgroupfs = path.join(this.dir, "cgroupfs");
    await Deno.mkdir(cgroupfs, { recursive: true });
    const child = new Deno.Command("bash", {
      args: ["-c", LAUNCHER],
      clearEnv: true,
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin",
        SYSTEMD_SECCOMP: "0",
        BOX_CONSOLE: path.join(this.dir, "console.log"),
        BOX_CGROUPS: cgroups.join("\n"),
        BOX_CGROUPFS: cgroupfs,
        BOX_MACHINE: `${this.#run.id}-${this.name}`,
        BOX_HOSTNAME: `ip-${this.network.node.ipv4.replaceAll(".", "-")}`,
        BOX_NETNS: this.network.netnsPath,
        BOX_ROOT: this.root,
      },
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.#nspawn = child;
    child.status.then(() => {
      if (this.#nspawn === child) {
        this.#nspawn = undefined;
        this.#leader = undefined;
      }
    });
    const deadline = Date.now() + timeoutMs;
    while (true) {
      if (!this.#nspawn) {
        throw new MachineError(
          `${this.name}: systemd-nspawn exited during boot`,
          await this.console(),
        );
      }
      this.#leader ??= await this.#findLeader(child.pid);
      if (this.#leader !== undefined) {
        const state = await this.exec(["systemctl", "is-system-running"]).catch(() => undefined);
        if (/^(initializing|starting|running|degraded)$/m.test(state?.stdout ?? "")) return;
      }
      if (Date.now() > deadline) {
        throw new MachineError(
          `${this.name}: systemd did not answer within ${timeoutMs} ms`,
          await this.console(),
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** The container's PID 1: nspawn's child (nspawn is a subreaper) running in a new PID namespace. */
  async #findLeader(nspawn: number): Promise<number | undefined> {
    const children = await Deno.readTextFile(`/proc/${nspawn}/task/${nspawn}/children`)
      .catch(() => "");
    for (const c of children.trim().split(/\s+/).filter(Boolean)) {
      const status = await Deno.readTextFile(`/proc/${c}/status`).catch(() => "");
      // NSpid: <pid on the host> 1 — PID 1 of its own namespace.
      if (/^NSpid:\s+\d+\s+1$/m.test(status)) return Number(c);
    }
    return undefined;
  }

  /**
   * Runs a command inside the machine (all its namespaces, a clean environment), the process in
   * the run's `exec` cgroup. Never throws on a non-zero exit.
   */
  async exec(command: string[]): Promise<CommandOutput> {
    const leader = this.#leader;
    if (leader === undefined) throw new MachineError(`${this.name} is not running`);
    const cgroups = (await cgroupDirs(`${this.#run.id}/exec`)).join(" ");
    return await runCommand("bash", [
      "-c",
      'for d in $BOX_EXEC_CGROUPS; do echo $$ >"$d/cgroup.procs"; done; exec "$@"',
      "box-exec",
      "nsenter",
      `--target=${leader}`,
      "--mount",
      "--uts",
      "--ipc",
      "--net",
      "--pid",
      "--cgroup",
      "--root",
      "--wd",
      "--",
      "/usr/bin/env",
      "-i",
      `PATH=${MACHINE_PATH}`,
      "LC_ALL=C",
      ...command,
    ], { env: { BOX_EXEC_CGROUPS: cgroups, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" } });
  }

  /** `exec` that throws `CommandError` when the command fails. */
  async must(command: string[]): Promise<string> {
    const out = await this.exec(command);
    if (out.code !== 0) throw new CommandError([`[${this.name}]`, ...command], out);
    return out.stdout;
  }

  /** A unit's journal of the current boot (all boots with `allBoots`). */
  async journal(unit: string, allBoots = false): Promise<string> {
    const out = await this.exec([
      "journalctl",
      "--no-pager",
      "-o",
      "short-precise",
      "-u",
      unit,
      ...(allBoots ? [] : ["-b"]),
    ]);
    return out.stdout + out.stderr;
  }

  /** A unit's state: `ActiveState/SubState (Result)`, e.g. `active/running (success)`. */
  async unitState(unit: string): Promise<string> {
    const out = await this.must([
      "systemctl",
      "show",
      "--property=ActiveState,SubState,Result",
      unit,
    ]);
    const p = Object.fromEntries(out.trim().split("\n").map((l) => l.split("=", 2)));
    return `${p.ActiveState}/${p.SubState} (${p.Result})`;
  }

  /** What cloud-init (its stand-in) wrote: /var/log/cloud-init-output.log (read from the host). */
  async cloudInitOutput(): Promise<string> {
    return await Deno.readTextFile(path.join(this.root, CLOUD_INIT_OUTPUT)).catch((err) =>
      `(no ${CLOUD_INIT_OUTPUT}: ${(err as Error).message})`
    );
  }

  /** nspawn's console output (systemd's boot messages). */
  async console(): Promise<string> {
    return await Deno.readTextFile(path.join(this.dir, "console.log")).catch(() => "");
  }

  /**
   * What a failure report shows: the cloud-init output, the failed units, and the journal of
   * each of `units` that is not active, every failed one and each of `journals` (the units a
   * failed step was about, even when active).
   */
  async report(units: string[], journals: string[] = []): Promise<string> {
    const parts = [`--- ${this.name}: ${CLOUD_INIT_OUTPUT}\n${await this.cloudInitOutput()}`];
    if (!this.running) {
      return parts.concat(`--- ${this.name}: console\n${await this.console()}`).join("\n");
    }
    const failed =
      (await this.exec(["systemctl", "list-units", "--failed", "--plain", "--no-legend"]))
        .stdout.split("\n").map((l) => l.split(" ")[0]).filter(Boolean);
    parts.push(`--- ${this.name}: failed units: ${failed.join(", ") || "none"}`);
    const shown = new Set([...failed, ...journals]);
    for (const u of units) {
      const state = await this.unitState(u).catch((e) => String(e));
      if (!state.startsWith("active/")) shown.add(u);
      parts.push(`--- ${this.name}: ${u}: ${state}`);
    }
    for (const u of shown) {
      parts.push(`--- ${this.name}: journal of ${u}\n${await this.journal(u)}`);
    }
    return parts.join("\n");
  }

  /** Waits until the stand-in for cloud-init has run the user-data; throws when it failed. */
  async waitUserData(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (true) {
      const state = await this.unitState(USER_DATA_UNIT);
      if (state.startsWith("active/exited")) return;
      if (state.startsWith("failed/")) {
        throw new MachineError(
          `${this.name}: the user-data failed (${state})`,
          await this.report([USER_DATA_UNIT]),
        );
      }
      if (Date.now() > deadline) {
        throw new MachineError(
          `${this.name}: the user-data did not finish within ${timeoutMs} ms (${state})`,
          await this.report([USER_DATA_UNIT]),
        );
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /**
   * Powers the machine off (systemctl poweroff) and waits until nspawn exits; a power off slower
   * than SLOW_POWER_OFF_MS prints the console's stop lines (which unit systemd waited for).
   */
  async stop(timeoutMs = 60_000): Promise<void> {
    const child = this.#nspawn;
    if (!child) return;
    await this.exec(["systemctl", "poweroff"]).catch(() => {});
    const timer = setTimeout(() => {
      const leader = this.#leader;
      if (leader !== undefined) Deno.kill(leader, "SIGKILL");
    }, timeoutMs);
    const started = Date.now();
    const status = await child.status;
    clearTimeout(timer);
    this.#nspawn = undefined;
    this.#leader = undefined;
    if (Date.now() - started > SLOW_POWER_OFF_MS) {
      // systemd waits for a unit that does not stop (DefaultTimeoutStopSec, 90 s): name it.
      const waits = (await this.console()).split("\n").filter((l) =>
        /stop job|Stopping|Stopped|timed out|Killing/i.test(l)
      );
      console.error(
        `${this.name}: power off took ${((Date.now() - started) / 1000).toFixed(1)} s:\n${
          waits.slice(-30).join("\n")
        }`,
      );
    }
    if (status.signal === "SIGKILL" || status.code !== 0) {
      throw new MachineError(
        `${this.name}: did not power off cleanly (nspawn exited ${status.code}${
          status.signal ? `, ${status.signal}` : ""
        })`,
        await this.console(),
      );
    }
  }

  /**
   * Cuts the power: SIGKILL to the machine's PID 1 (its whole PID namespace dies at once, no unit
   * is stopped), then waits until nspawn exits. The root filesystem keeps what was written.
   */
  async powerCut(): Promise<void> {
    const child = this.#nspawn;
    const leader = this.#leader;
    if (!child || leader === undefined) throw new MachineError(`${this.name} is not running`);
    Deno.kill(leader, "SIGKILL");
    await child.status;
    this.#nspawn = undefined;
    this.#leader = undefined;
  }

  /** Stops the machine (killing it if need be) and its emulator; the run removes the rest. */
  async destroy(): Promise<void> {
    await this.stop(20_000).catch(() => {});
    await this.imds.close();
  }
}

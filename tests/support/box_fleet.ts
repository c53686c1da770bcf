/**
 * The cluster box's EC2 (issue 31 item 3): the instances moto's Auto Scaling Groups launched for a
 * cluster, each booted as a machine of the machine harness (tests/support/machine.ts) from exactly
 * the user-data EC2 hands it (DescribeInstanceAttribute userData: the launch template version the
 * ASG launched it from), with the instance id and zone moto gave it. What moto does not do, the
 * fleet does as EC2 would: run the instance (boot the machine), and terminate the machines of
 * instances that are gone (an instance refresh, a scale-in, a destroy).
 */

import {
  DescribeInstanceAttributeCommand,
  DescribeInstancesCommand,
  type EC2Client,
} from "@aws-sdk/client-ec2";
import type { BoxRun } from "./box_run.ts";
import type { Vpc } from "./box_vpc.ts";
import { Machine, type MachineFile } from "./machine.ts";

/** One instance as moto launched it. */
export interface BoxInstance {
  instanceId: string;
  /** Its `podmin:nodegroup` tag. */
  nodeGroup: string;
  zone: string;
  /** The launch template version it was launched from (`aws:ec2launchtemplate:version`). */
  launchTemplateVersion: string;
  /** The user-data, decoded. */
  userData: string;
}

/** The running instances of `cluster` (tag `podmin:cluster`), NAT64 instances excluded. */
export async function clusterInstances(ec2: EC2Client, cluster: string): Promise<BoxInstance[]> {
  const out: BoxInstance[] = [];
  const described = await ec2.send(
    new DescribeInstancesCommand({
      Filters: [
        { Name: "tag:podmin:cluster", Values: [cluster] },
        { Name: "instance-state-name", Values: ["pending", "running"] },
      ],
    }),
  );
  for (const i of (described.Reservations ?? []).flatMap((r) => r.Instances ?? [])) {
    const tag = (k: string) => i.Tags?.find((t) => t.Key === k)?.Value;
    const nodeGroup = tag("podmin:nodegroup");
    if (!nodeGroup || !i.InstanceId) continue;
    const attr = await ec2.send(
      new DescribeInstanceAttributeCommand({ InstanceId: i.InstanceId, Attribute: "userData" }),
    );
    const encoded = attr.UserData?.Value;
    if (!encoded) throw new Error(`instance ${i.InstanceId} has no user-data`);
    out.push({
      instanceId: i.InstanceId,
      nodeGroup,
      zone: i.Placement?.AvailabilityZone ?? "us-east-1a",
      launchTemplateVersion: tag("aws:ec2launchtemplate:version") ?? "",
      userData: new TextDecoder().decode(
        Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0)),
      ),
    });
  }
  return out.sort((a, b) => a.instanceId.localeCompare(b.instanceId));
}

/** What every machine of the fleet gets. */
export interface FleetOptions {
  run: BoxRun;
  vpc: Vpc;
  rootfs: string;
  /** Files written into each machine before its first boot (the host overrides). */
  files: MachineFile[];
  /** Units enabled before the first boot. */
  enable?: string[];
  /** The environment of each machine's user-data (its test overrides). */
  userDataEnvironment?: Record<string, string>;
}

/** A booted instance. */
export interface FleetMember {
  instance: BoxInstance;
  machine: Machine;
}

/** The machines of a cluster's instances. */
export class Fleet {
  readonly #o: FleetOptions;
  readonly #members = new Map<string, FleetMember>();
  #next = 0;

  constructor(o: FleetOptions) {
    this.#o = o;
  }

  /** The members, by instance id order. */
  get members(): FleetMember[] {
    return [...this.#members.values()].sort((a, b) =>
      a.instance.instanceId.localeCompare(b.instance.instanceId)
    );
  }

  /** The members of one NodeGroup. */
  of(nodeGroup: string): FleetMember[] {
    return this.members.filter((m) => m.instance.nodeGroup === nodeGroup);
  }

  /**
   * Makes EC2's side true: a machine for each of `instances` without one (created and booted,
   * all at once), and the machines of instances no longer listed destroyed. Returns the new ones.
   */
  async reconcile(instances: BoxInstance[]): Promise<FleetMember[]> {
    const wanted = new Set(instances.map((i) => i.instanceId));
    for (const id of [...this.#members.keys()]) {
      if (!wanted.has(id)) await this.retire(id);
    }
    return await this.launch(instances);
  }

  /** Boots a machine for each of `instances` that has none (all at once); returns them. */
  async launch(instances: BoxInstance[]): Promise<FleetMember[]> {
    const added: FleetMember[] = [];
    for (const instance of instances) {
      if (this.#members.has(instance.instanceId)) continue;
      const index = this.#next++;
      const machine = await Machine.create({
        run: this.#o.run,
        vpc: this.#o.vpc,
        name: `m${index}`,
        index,
        rootfs: this.#o.rootfs,
        userData: instance.userData,
        instanceId: instance.instanceId,
        availabilityZone: instance.zone,
        userDataEnvironment: this.#o.userDataEnvironment,
        files: this.#o.files,
        enable: this.#o.enable,
      });
      const member = { instance, machine };
      this.#members.set(instance.instanceId, member);
      added.push(member);
    }
    await Promise.all(added.map((m) => m.machine.boot()));
    return added;
  }

  /** Terminates the machine of instance `id` (EC2 after TerminateInstances). */
  async retire(id: string): Promise<void> {
    const m = this.#members.get(id);
    if (!m) return;
    this.#members.delete(id);
    await m.machine.destroy();
  }

  /** Destroys every machine (their run removes the rest). */
  async destroy(): Promise<void> {
    const all = [...this.#members.values()];
    this.#members.clear();
    await Promise.all(all.map((m) => m.machine.destroy()));
  }
}

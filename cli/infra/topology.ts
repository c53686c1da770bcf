/**
 * The network and instance topology derived from checked inputs, before any Terraform syntax:
 * route domains (node subnets), NAT64 groups, NAT64 subnets, NodeGroups, AWS names and
 * subnet addresses. Pure and deterministic, so setup can also use it for progress reporting
 * (ASG names and their capacity timeouts).
 *
 * Addressing. Node subnets are IPv6-native (/64 each); NAT64 subnets are dual-stack (a /64 and
 * an IPv4 /27, the only IPv4 Podmin uses). Blocks are allocated from the top of the VPC's
 * ranges, keyed by the zone letter or a hash of the NodeGroup name, so adding or removing a
 * NodeGroup never moves another subnet and a reused VPC's own subnets (usually at the bottom)
 * stay clear:
 *
 * | Subnet | IPv6 /64 index in the VPC block | IPv4 |
 * |---|---|---|
 * | shared node subnet of zone letter L (a=0) | 255 - L | none |
 * | NAT64 subnet of zone letter L | 223 - L | the (last - L)-th /27 of the VPC CIDR |
 * | node subnet of a NodeGroup with a dedicated NAT64 | 16 + sha256(name) mod 176, probing upward on a collision | none |
 */

import { ValidationError } from "../../core/kit/errors.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { type Cidr, formatCidr, overlaps, parseCidr, subnetOf } from "./cidr.ts";
import type { CheckedInputs, CheckedNodeGroup } from "./infra_inputs.ts";
import { zoneLetter } from "./infra_inputs.ts";
import { type Architecture, architectureOf } from "./instance_types.ts";

/** Minutes setup (and `wait_for_capacity_timeout`) waits for a NodeGroup's ASG. */
export const NODEGROUP_CAPACITY_WAIT_MINUTES = 3;
/** Minutes setup (and `wait_for_capacity_timeout`) waits for a NAT64 ASG. */
export const NAT64_CAPACITY_WAIT_MINUTES = 15;
/** Length of the IPv4 block of each NAT64 subnet. */
export const NAT64_SUBNET_IPV4_LENGTH = 27;

const DEDICATED_SLOT_FIRST = 16;
const DEDICATED_SLOT_COUNT = 176; // 16..191

/** A NAT64 instance behind its own ASG, with a stable ENI and an EIP. */
export interface Nat64Plan {
  /** `zone-<letter>` (shared per zone) or `ng-<nodegroup>` (dedicated). */
  key: string;
  /** Terraform name suffix (`zone_a`, `ng_workers`). */
  tfName: string;
  zone: string;
  instanceType: string;
  architecture: Architecture;
  /** The NodeGroup it serves, for a dedicated NAT64 instance. */
  nodeGroup?: string;
  asgName: string;
  launchTemplateName: string;
  roleName: string;
  capacityWaitMinutes: number;
}

/** A node subnet with its own route table: shared per zone, or one NodeGroup's own. */
export interface RouteDomainPlan {
  /** `zone-<letter>` or `ng-<nodegroup>`. */
  key: string;
  tfName: string;
  zone: string;
  /** Index of its /64 in the VPC's IPv6 block. */
  ipv6Index: number;
  /** The NAT64 instance its 64:ff9b::/96 route points at; DNS64 is on exactly when set. */
  nat64?: Nat64Plan;
  /** NodeGroups placed here. */
  nodeGroups: string[];
}

/** The dual-stack subnet of a zone that hosts NAT64 instances. */
export interface Nat64SubnetPlan {
  zone: string;
  tfName: string;
  ipv6Index: number;
  ipv4Cidr: string;
}

/** A NodeGroup with its placement and AWS names. */
export interface NodeGroupPlan extends CheckedNodeGroup {
  tfName: string;
  /** Key of its route domain. */
  domain: string;
  asgName: string;
  launchTemplateName: string;
  capacityWaitMinutes: number;
}

/** The whole plan. */
export interface Topology {
  domains: RouteDomainPlan[];
  nat64Subnets: Nat64SubnetPlan[];
  nat64: Nat64Plan[];
  nodeGroups: NodeGroupPlan[];
  names: {
    nodeRole: string;
    nodeSecurityGroup: string;
    nat64SecurityGroup: string;
  };
}

/** A Terraform-safe name part: DNS labels and zone keys with '-' mapped to '_'. */
export function tfSafe(key: string): string {
  return key.replaceAll("-", "_");
}

/**
 * An AWS resource name of at most `max` characters: the parts joined with '-', or, when too
 * long, a prefix of that followed by 8 hex digits of its sha256 (stable and unique enough).
 */
export function boundedName(parts: string[], max: number): string {
  const full = parts.join("-");
  if (full.length <= max) return full;
  return `${full.slice(0, max - 9)}-${sha256Hex(full).slice(0, 8)}`;
}

function letterOf(zone: string): string {
  return zone.slice(-1);
}

function dedicatedSlots(names: string[]): Map<string, number> {
  const taken = new Set<number>();
  const out = new Map<string, number>();
  for (const name of [...names].sort()) {
    let slot = Number(BigInt(`0x${sha256Hex(name).slice(0, 12)}`) % BigInt(DEDICATED_SLOT_COUNT));
    while (taken.has(slot)) slot = (slot + 1) % DEDICATED_SLOT_COUNT;
    taken.add(slot);
    out.set(name, DEDICATED_SLOT_FIRST + slot);
  }
  return out;
}

function nat64Plan(
  c: CheckedInputs,
  key: string,
  zone: string,
  instanceType: string,
  nodeGroup?: string,
): Nat64Plan {
  const { cluster, region } = c.spec;
  return {
    key,
    tfName: tfSafe(key),
    zone,
    instanceType,
    architecture: architectureOf(instanceType),
    ...(nodeGroup ? { nodeGroup } : {}),
    asgName: boundedName(["podmin", cluster, "nat64", key], 255),
    launchTemplateName: boundedName(["podmin", cluster, "nat64", key], 128),
    roleName: boundedName(["podmin", cluster, region, "nat64", key], 64),
    capacityWaitMinutes: NAT64_CAPACITY_WAIT_MINUTES,
  };
}

/**
 * One NAT64 subnet per zone with a NAT64 instance: an IPv4 /27 from the top of the VPC CIDR by
 * zone letter, and an IPv6 /64.
 */
function planNat64Subnets(c: CheckedInputs, nat64: Nat64Plan[]): Nat64SubnetPlan[] {
  const { region } = c.spec;
  const natZones = [...new Set(nat64.map((n) => n.zone))].sort();
  const v4Slots = 2 ** (NAT64_SUBNET_IPV4_LENGTH - c.vpcCidr.length);
  return natZones.map((zone): Nat64SubnetPlan => {
    const letter = zoneLetter(region, zone);
    if (letter >= v4Slots) {
      throw new ValidationError(
        `VPC CIDR ${c.spec.vpcCidr} is too small for a NAT64 subnet in zone ${zone}`,
        { hint: "use a larger --vpc-cidr (a /16 fits every zone)" },
      );
    }
    const ipv4 = subnetOf(c.vpcCidr, {
      length: NAT64_SUBNET_IPV4_LENGTH,
      index: v4Slots - 1 - letter,
    });
    return {
      zone,
      tfName: `zone_${letterOf(zone)}`,
      ipv6Index: 223 - letter,
      ipv4Cidr: formatCidr(ipv4),
    };
  });
}

/** Derives the topology from checked inputs (see the module comment for addressing). */
export function planTopology(c: CheckedInputs): Topology {
  const { cluster, region } = c.spec;
  const shared = c.spec.nat64?.instanceType;
  const dedicated = c.spec.nodeGroups.filter((ng) => ng.nat64 !== undefined);
  const slots = dedicatedSlots(dedicated.map((ng) => ng.name));

  const domains: RouteDomainPlan[] = [];
  const nat64: Nat64Plan[] = [];
  for (const zone of c.zones) {
    const key = `zone-${letterOf(zone)}`;
    const members = c.spec.nodeGroups.filter((ng) => ng.zone === zone && ng.nat64 === undefined);
    // No shared subnet (nor route table, routes, NAT64) where no NodeGroup would use it: a zone
    // whose NodeGroups all have a dedicated NAT64 only needs their own subnets.
    if (members.length === 0) continue;
    const nat = shared !== undefined && members.length > 0
      ? nat64Plan(c, key, zone, shared)
      : undefined;
    if (nat) nat64.push(nat);
    domains.push({
      key,
      tfName: tfSafe(key),
      zone,
      ipv6Index: 255 - zoneLetter(region, zone),
      ...(nat ? { nat64: nat } : {}),
      nodeGroups: members.map((ng) => ng.name),
    });
  }
  for (const ng of dedicated) {
    const key = `ng-${ng.name}`;
    const nat = nat64Plan(c, key, ng.zone, ng.nat64!, ng.name);
    nat64.push(nat);
    domains.push({
      key,
      tfName: tfSafe(key),
      zone: ng.zone,
      ipv6Index: slots.get(ng.name)!,
      nat64: nat,
      nodeGroups: [ng.name],
    });
  }

  const nat64Subnets = planNat64Subnets(c, nat64);

  const domainOf = new Map<string, string>();
  for (const d of domains) for (const ng of d.nodeGroups) domainOf.set(ng, d.key);
  const nodeGroups = c.spec.nodeGroups.map((ng): NodeGroupPlan => ({
    ...ng,
    tfName: `ng_${tfSafe(ng.name)}`,
    domain: domainOf.get(ng.name)!,
    asgName: boundedName(["podmin", cluster, "ng", ng.name], 255),
    launchTemplateName: boundedName(["podmin", cluster, "ng", ng.name], 128),
    capacityWaitMinutes: NODEGROUP_CAPACITY_WAIT_MINUTES,
  }));

  const topology: Topology = {
    domains,
    nat64Subnets,
    nat64,
    nodeGroups,
    names: {
      nodeRole: boundedName(["podmin", cluster, region, "node"], 64),
      nodeSecurityGroup: boundedName(["podmin", cluster, "nodes"], 255),
      nat64SecurityGroup: boundedName(["podmin", cluster, "nat64"], 255),
    },
  };
  checkForeignOverlaps(c, topology);
  return topology;
}

/** The IPv6 /64 of a subnet, when the VPC's IPv6 block is already known. */
export function ipv6SubnetCidr(vpcIpv6: Cidr, index: number): string {
  return formatCidr(subnetOf(vpcIpv6, { length: 64, index }));
}

function checkForeignOverlaps(c: CheckedInputs, t: Topology): void {
  const foreign = c.existingVpc?.foreignSubnetCidrs ?? [];
  if (foreign.length === 0) return;
  const planned: [string, Cidr][] = [];
  for (const s of t.nat64Subnets) {
    planned.push([`NAT64 subnet of ${s.zone}`, parseCidr(s.ipv4Cidr)]);
  }
  if (c.vpcIpv6) {
    for (const d of t.domains) {
      planned.push([
        `node subnet ${d.key}`,
        subnetOf(c.vpcIpv6, { length: 64, index: d.ipv6Index }),
      ]);
    }
    for (const s of t.nat64Subnets) {
      planned.push([
        `NAT64 subnet of ${s.zone}`,
        subnetOf(c.vpcIpv6, { length: 64, index: s.ipv6Index }),
      ]);
    }
  }
  for (const text of foreign) {
    const other = parseCidr(text);
    for (const [what, cidr] of planned) {
      if (overlaps(cidr, other)) {
        throw new ValidationError(
          `the reused VPC's subnet ${text} overlaps Podmin's ${what} (${formatCidr(cidr)})`,
          {
            hint:
              "Podmin allocates from the top of the VPC's ranges; free that range or use another --vpc-cidr",
          },
        );
      }
    }
  }
}

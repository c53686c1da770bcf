/**
 * VPC, internet gateway, subnets, route tables and security groups.
 *
 * - A reused VPC is a data source (so `destroy` can never delete it); a created one has an
 *   Amazon-provided IPv6 /56. A reused VPC without IPv6 gets an Amazon-provided /56
 *   association, a reused VPC without an internet gateway gets one (both are Podmin's and go
 *   away with teardown).
 * - Node subnets are public and IPv6-native: `::/0` goes to the internet gateway, and, when
 *   the subnet's route domain has a NAT64 instance, `64:ff9b::/96` goes to that instance's
 *   stable ENI and the subnet has DNS64.
 * - NAT64 subnets are dual-stack (the EIP needs an IPv4 address) with `0.0.0.0/0` and `::/0`
 *   to the internet gateway.
 * - Security groups admit no traffic from the internet: nodes accept only traffic from nodes,
 *   NAT64 instances only from nodes; egress is open.
 */

import { type GenContext, nat64Name, nat64SubnetName, nodeSubnetName, TF } from "./context.ts";
import { ref } from "./tofu_json.ts";

/** The NAT64 well-known prefix routed to NAT64 instances (RFC 6052). */
export const NAT64_PREFIX = "64:ff9b::/96";

function addVpc(g: GenContext): void {
  const { inputs, builder } = g;
  if (inputs.existingVpc) {
    builder.data("aws_vpc", TF.vpc, { id: inputs.existingVpc.id });
    if (inputs.existingVpc.ipv6CidrBlock === undefined) {
      builder.resource("aws_vpc_ipv6_cidr_block_association", TF.ipv6Association, {
        vpc_id: g.vpcId(),
        assign_generated_ipv6_cidr_block: true,
      });
    }
    if (inputs.existingVpc.internetGatewayId !== undefined) {
      builder.data("aws_internet_gateway", TF.igw, {
        internet_gateway_id: inputs.existingVpc.internetGatewayId,
      });
      return;
    }
  } else {
    builder.resource("aws_vpc", TF.vpc, {
      cidr_block: inputs.spec.vpcCidr,
      assign_generated_ipv6_cidr_block: true,
      enable_dns_support: true,
      enable_dns_hostnames: true,
      tags: g.tags(`podmin-${inputs.spec.cluster}`),
    });
  }
  builder.resource("aws_internet_gateway", TF.igw, {
    vpc_id: g.vpcId(),
    tags: g.tags(`podmin-${inputs.spec.cluster}`),
  });
}

function addRouteTable(g: GenContext, name: string, subnetId: string, label: string): string {
  g.builder.resource("aws_route_table", name, { vpc_id: g.vpcId(), tags: g.tags(label) });
  g.builder.resource("aws_route_table_association", name, {
    subnet_id: subnetId,
    route_table_id: ref("aws_route_table", name, "id"),
  });
  return ref("aws_route_table", name, "id");
}

function addNodeSubnets(g: GenContext): void {
  const { inputs, topology, builder } = g;
  for (const d of topology.domains) {
    const name = nodeSubnetName(d.tfName);
    const label = `podmin-${inputs.spec.cluster}-nodes-${d.key}`;
    builder.resource("aws_subnet", name, {
      vpc_id: g.vpcId(),
      availability_zone: d.zone,
      ipv6_native: true,
      ipv6_cidr_block: g.ipv6Subnet(d.ipv6Index),
      assign_ipv6_address_on_creation: true,
      enable_dns64: d.nat64 !== undefined,
      enable_resource_name_dns_aaaa_record_on_launch: true,
      private_dns_hostname_type_on_launch: "resource-name",
      tags: g.tags(label),
    });
    const table = addRouteTable(g, name, ref("aws_subnet", name, "id"), label);
    builder.resource("aws_route", `${name}_ipv6_default`, {
      route_table_id: table,
      destination_ipv6_cidr_block: "::/0",
      gateway_id: g.igwId(),
    });
    if (d.nat64) {
      builder.resource("aws_route", `${name}_nat64`, {
        route_table_id: table,
        destination_ipv6_cidr_block: NAT64_PREFIX,
        network_interface_id: ref("aws_network_interface", nat64Name(d.nat64.tfName), "id"),
      });
    }
  }
}

function addNat64Subnets(g: GenContext): void {
  const { inputs, topology, builder } = g;
  for (const s of topology.nat64Subnets) {
    const name = nat64SubnetName(s.tfName);
    const label = `podmin-${inputs.spec.cluster}-nat64-${s.zone}`;
    builder.resource("aws_subnet", name, {
      vpc_id: g.vpcId(),
      availability_zone: s.zone,
      cidr_block: s.ipv4Cidr,
      ipv6_cidr_block: g.ipv6Subnet(s.ipv6Index),
      assign_ipv6_address_on_creation: true,
      map_public_ip_on_launch: false,
      tags: g.tags(label),
    });
    const table = addRouteTable(g, name, ref("aws_subnet", name, "id"), label);
    builder.resource("aws_route", `${name}_ipv4_default`, {
      route_table_id: table,
      destination_cidr_block: "0.0.0.0/0",
      gateway_id: g.igwId(),
    });
    builder.resource("aws_route", `${name}_ipv6_default`, {
      route_table_id: table,
      destination_ipv6_cidr_block: "::/0",
      gateway_id: g.igwId(),
    });
  }
}

function addSecurityGroup(
  g: GenContext,
  name: string,
  awsName: string,
  description: string,
  ingressFrom: string,
): void {
  const { builder } = g;
  builder.resource("aws_security_group", name, {
    name: awsName,
    description,
    vpc_id: g.vpcId(),
    tags: g.tags(awsName),
  });
  const id = ref("aws_security_group", name, "id");
  builder.resource("aws_vpc_security_group_ingress_rule", `${name}_from_${ingressFrom}`, {
    security_group_id: id,
    referenced_security_group_id: ref("aws_security_group", ingressFrom, "id"),
    ip_protocol: "-1",
    description: `all traffic from the ${ingressFrom} security group`,
    tags: g.tags(`${awsName}-from-${ingressFrom}`),
  });
  for (const [family, cidr] of [["ipv4", "0.0.0.0/0"], ["ipv6", "::/0"]] as const) {
    builder.resource("aws_vpc_security_group_egress_rule", `${name}_all_${family}`, {
      security_group_id: id,
      [family === "ipv4" ? "cidr_ipv4" : "cidr_ipv6"]: cidr,
      ip_protocol: "-1",
      description: `all ${family} egress`,
      tags: g.tags(`${awsName}-egress-${family}`),
    });
  }
}

/** Adds the VPC (or its data source), gateway, subnets, routes and security groups. */
export function addNetwork(g: GenContext): void {
  addVpc(g);
  addNodeSubnets(g);
  addNat64Subnets(g);
  addSecurityGroup(
    g,
    TF.nodeSecurityGroup,
    g.topology.names.nodeSecurityGroup,
    "Podmin nodes: ingress only from other nodes of the cluster",
    TF.nodeSecurityGroup,
  );
  if (g.topology.nat64.length > 0) {
    addSecurityGroup(
      g,
      TF.nat64SecurityGroup,
      g.topology.names.nat64SecurityGroup,
      "Podmin NAT64 instances: ingress only from the cluster's nodes",
      TF.nodeSecurityGroup,
    );
  }
}

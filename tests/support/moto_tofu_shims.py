"""Shims of moto 5.2 faults that stop the real AWS provider from applying Podmin's generated
configuration (tests/cluster_setup/real_tofu_setup_test.ts). Each is moto's fault, not Podmin's:
the shim makes moto answer as EC2 does, for exactly the request or field at fault, and nothing
else. Five stop the first apply; two more make every later `setup` plan changes that moto then
cannot apply (a launch template's own tags copied into its data: new template versions, which
roll the Auto Scaling groups; a group rule's description not read back); the last leaves the
instances' network interfaces behind after `teardown`. Two more the cluster box found
(tests/box/cluster_box_test.ts): moto has no instance refresh, which a changed launch template
starts, and a launch template version's user-data breaks the launch of its group's instances.

They are moto patches, applied at start by tests/support/moto_server.py when
PODMIN_MOTO_TOFU_SHIMS=1 (only the real-tofu tests' own moto; every other test runs moto as
shipped). A proxy in front of moto, rewriting requests and answers, cannot reach three of them
(the root volume, the DNS name, the interface deletion): the instances an Auto Scaling group
launches are created inside moto, with no HTTP request to rewrite.

`apply()` installs all of them; each `shim_*` function installs one and says why.
"""

import ipaddress

from moto.ec2.models import elastic_network_interfaces, instances
from moto.ec2.models.security_groups import SecurityGroupRule
from moto.ec2.models.subnets import Subnet
from moto.ec2.responses.launch_templates import LaunchTemplates
from moto.ec2.responses.subnets import Subnets


def shim_subnet_ipv6_association_state():
    """DescribeSubnets renders a subnet's `Ipv6CidrBlockState.State` as a Python dict repr
    (`{'State': 'associated'}`): moto nests the state dict inside another one. The provider
    waits for the association to be `associated` and never sees it. EC2 answers `associated`."""

    def association_set(self):
        return [
            {
                "ipv6CidrBlock": a["ipv6CidrBlock"],
                "associationId": a["associationId"],
                "ipv6CidrBlockState": {"State": a["ipv6CidrBlockState"]["State"]},
            }
            for a in self.ipv6_cidr_block_associations.values()
            if a["ipv6CidrBlockState"]["State"] == "associated"
        ]

    Subnet.ipv6_cidr_block_association_set = property(association_set)


def shim_ipv6_only_subnet_free_addresses():
    """An IPv6-only subnet's `AvailableIpAddressCount` is moto's count of its /64 less five
    (2^64 - 5), which the SDK cannot decode as the int32 EC2 declares. EC2 counts free IPv4
    addresses only, and an IPv6-only subnet has none: 0."""
    counted = Subnet.available_ip_address_count

    def available(self):
        if isinstance(self.cidr, ipaddress.IPv6Network):
            return 0
        return counted.fget(self)

    Subnet.available_ip_address_count = property(available)


def shim_subnet_dns_attributes():
    """ModifySubnetAttribute ignores `EnableDns64`, `EnableResourceNameDnsAAAARecordOnLaunch`
    and `PrivateDnsHostnameTypeOnLaunch` (moto knows three other attributes only), so the
    provider's read-back never matches what it set. EC2 stores them and DescribeSubnets shows
    them (`EnableDns64`, `PrivateDnsNameOptionsOnLaunch`)."""
    original = Subnets.modify_subnet_attribute
    Subnet.enable_dns64 = False  # EC2's default, shown by DescribeSubnets

    def modify(self):
        subnet = self.ec2_backend.get_subnet(self._get_param("SubnetId"))
        dns64 = self._get_param("EnableDns64.Value")
        if dns64 is not None:
            subnet.enable_dns64 = str(dns64).lower() == "true"
        aaaa = self._get_param("EnableResourceNameDnsAAAARecordOnLaunch.Value")
        if aaaa is not None:
            subnet.private_dns_name_options_on_launch["EnableResourceNameDnsAAAARecord"] = (
                str(aaaa).lower() == "true"
            )
        hostname_type = self._get_param("PrivateDnsHostnameTypeOnLaunch")
        if hostname_type is not None:
            subnet.private_dns_name_options_on_launch["HostnameType"] = hostname_type
        return original(self)

    Subnets.modify_subnet_attribute = modify


def shim_root_volume_size_from_ami():
    """A launch template's root EBS mapping without `VolumeSize` takes the AMI's snapshot size on
    EC2 (Podmin's NAT64 template sets none); moto creates the instance's volume without a size.
    The shim gives such a volume the size of a moto AMI's root volume, 8 GiB."""
    original = instances.Instance.add_block_device

    def add_block_device(self, size, device_path, snapshot_id, *args, **kwargs):
        if not size and not snapshot_id:
            size = 8
        return original(self, size, device_path, snapshot_id, *args, **kwargs)

    instances.Instance.add_block_device = add_block_device


def shim_ipv6_only_instance_dns_name():
    """An instance's network interface in an IPv6-only subnet gets an IPv6 address as its
    "private IP", and moto's DNS-name helper splits it as a dotted IPv4 address (IndexError:
    HTTP 500 on CreateAutoScalingGroup, which launches the instances). EC2 gives an interface
    without an IPv4 address no IPv4-based DNS name (`ip-a-b-c-d.ec2.internal`): empty."""
    original = elastic_network_interfaces.generate_dns_from_ip

    def dns_name(ip, dns_type="internal"):
        address = str(ip or "").split("/")[0]
        if not isinstance(ipaddress.ip_address(address) if address else None, ipaddress.IPv4Address):
            return ""
        return original(ip, dns_type)

    elastic_network_interfaces.generate_dns_from_ip = dns_name


def shim_launch_template_own_tags():
    """CreateLaunchTemplate copies the template's own tags (its `TagSpecifications` of resource
    type `launch-template`) into the template's data, the tags the instances it launches get, so
    the provider reads a `tag_specifications` the configuration does not have and plans a new
    template version on every run; with `instance_refresh`, that rolls the groups (and moto
    implements no instance refresh). EC2 keeps a template's own tags apart from its data."""
    original = LaunchTemplates.create_launch_template

    def create(self):
        result = original(self)
        template = self.ec2_backend.get_launch_template_by_name(
            self._get_param("LaunchTemplateName")
        )
        data = template.versions[0].data
        data["TagSpecifications"] = [
            spec
            for spec in data.get("TagSpecifications", [])
            if spec.get("ResourceType") != "launch-template"
        ]
        return result

    LaunchTemplates.create_launch_template = create


def shim_launch_template_version_user_data():
    """CreateLaunchTemplateVersion stores the new version's `UserData` as a plain string, while
    CreateLaunchTemplate wraps it in moto's base64 type: an Auto Scaling group on that version
    fails an assertion when it launches an instance (HTTP 500 on
    `TerminateInstanceInAutoScalingGroup`, whose replacement it launches). EC2 launches from any
    version with its user-data. The shim parses it the way CreateLaunchTemplate does."""
    from moto.ec2.utils import parse_user_data

    original = LaunchTemplates.create_launch_template_version

    def create_version(self):
        result = original(self)
        version = result.result["LaunchTemplateVersion"]
        template = self.ec2_backend.get_launch_template(version["LaunchTemplateId"])
        data = template.get_version(version["VersionNumber"]).data
        if isinstance(data.get("UserData"), str):
            data["UserData"] = parse_user_data(data["UserData"])
        return result

    LaunchTemplates.create_launch_template_version = create_version


def shim_group_rule_description():
    """DescribeSecurityGroupRules answers the description of a rule that allows a security group
    (`ReferencedGroupInfo`) as empty: moto keeps it with the group pair and reads it only from an
    address range. The provider plans to set it again on every run, and moto then refuses that
    update (ModifySecurityGroupRules for protocol -1 demands ports). EC2 answers the
    description."""

    def description(self):
        return self.ip_range.get("Description") or self.source_group.get("Description")

    SecurityGroupRule.description = property(description)


def shim_launched_interface_deletion():
    """An instance an Auto Scaling group launches keeps its network interface after it is
    terminated: moto launches it with a default interface (it does not read the template's
    `NetworkInterfaces`) whose `DeleteOnTermination` it leaves false, so `teardown` leaves one
    interface per instance behind. EC2 deletes an interface created at launch with its instance
    (Podmin's templates say so: `delete_on_termination = true`)."""
    original = instances.Instance.prep_nics

    def prep_nics(self, nic_spec, *args, **kwargs):
        original(self, nic_spec, *args, **kwargs)
        if not nic_spec:
            for nic in self.nics.values():
                nic.delete_on_termination = True

    instances.Instance.prep_nics = prep_nics


def shim_instance_refresh():
    """moto 5.2 has no instance refresh: `StartInstanceRefresh`, which the provider calls when a
    launch template version changes under a group with an `instance_refresh` block, answers as
    not implemented, the SDK retries it for minutes and the second `setup` fails. EC2 Auto
    Scaling records the refresh (an id, refused with `InstanceRefreshInProgress` while one is
    pending, `CancelInstanceRefresh` cancels it, `ActiveInstanceRefreshNotFound` when there is
    none) and replaces the instances over time. The shim records the refresh as `Pending`;
    replacing the instances is the cluster box's, which boots each replacement from its user-data
    (tests/box/cluster_box_test.ts). The refreshes are per group name in this moto process."""
    import uuid
    from datetime import datetime, timezone

    from moto.autoscaling.exceptions import AutoscalingClientError
    from moto.autoscaling.responses import AutoScalingResponse
    from moto.core.responses import ActionResult

    refreshes = {}  # group name -> list of refresh dicts, newest last

    class InProgress(AutoscalingClientError):
        code = "InstanceRefreshInProgress"

    class NotFound(AutoscalingClientError):
        code = "ActiveInstanceRefreshNotFound"

    def active(group):
        return [r for r in refreshes.get(group, []) if r["Status"] in ("Pending", "InProgress")]

    def start(self):
        group = self._get_param("AutoScalingGroupName")
        if active(group):
            raise InProgress(f"An Instance Refresh is already in progress for {group}.")
        refresh = {
            "InstanceRefreshId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Status": "Pending",
            "StartTime": datetime.now(timezone.utc),
            "PercentageComplete": 0,
        }
        refreshes.setdefault(group, []).append(refresh)
        return ActionResult({"InstanceRefreshId": refresh["InstanceRefreshId"]})

    def describe(self):
        group = self._get_param("AutoScalingGroupName")
        ids = self._get_param("InstanceRefreshIds", [])
        found = [r for r in reversed(refreshes.get(group, [])) if not ids or r["InstanceRefreshId"] in ids]
        return ActionResult({"InstanceRefreshes": found})

    def cancel(self):
        group = self._get_param("AutoScalingGroupName")
        running = active(group)
        if not running:
            raise NotFound(f"No in progress or pending Instance Refresh found for {group}.")
        running[-1]["Status"] = "Cancelled"
        return ActionResult({"InstanceRefreshId": running[-1]["InstanceRefreshId"]})

    AutoScalingResponse.start_instance_refresh = start
    AutoScalingResponse.describe_instance_refreshes = describe
    AutoScalingResponse.cancel_instance_refresh = cancel


def apply():
    """Installs every shim."""
    shim_subnet_ipv6_association_state()
    shim_ipv6_only_subnet_free_addresses()
    shim_subnet_dns_attributes()
    shim_root_volume_size_from_ami()
    shim_ipv6_only_instance_dns_name()
    shim_launch_template_own_tags()
    shim_launch_template_version_user_data()
    shim_group_rule_description()
    shim_launched_interface_deletion()
    shim_instance_refresh()

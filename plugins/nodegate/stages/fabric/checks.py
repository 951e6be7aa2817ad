"""The `fabric` stage's check table, in report order. A node's own rails: checks_node
(cabling, switch-side link, switch port errors, XmitWait, partition keys); the fabric's own
parts (subnet manager, leaf uplinks): checks_infra, whose faults mark nodes and go onto the
repair list instead of rejecting them.
"""

from __future__ import annotations

from nodegate.core.checks import Check, CheckTable
from nodegate.stages.fabric import checks_infra as infra
from nodegate.stages.fabric import checks_node as node
from nodegate.stages.fabric.checks_node import per_rail_on_fabric
from nodegate.stages.fabric.facts import FabricFacts
from nodegate.stages.fabric.profile import FabricProfile

CHECKS: CheckTable[FabricFacts, FabricProfile] = CheckTable(
    "fabric",
    [
        Check(
            "fabric.cable.expected",
            "each rail's cable lands on the expected switch and port",
            node.cable_expected,
            "HCA port -> switch port",
            "test_fabric_cable_expected",
            "fleet",
            placement=True,
        ),
        Check(
            "fabric.link",
            "width and speed at the switch side of each rail's cable",
            per_rail_on_fabric(node.link),
            "HCA port -> switch port",
            "test_fabric_link",
            "fleet",
        ),
        Check(
            "fabric.switch_port.errors",
            "error counters of the switch port facing each rail",
            per_rail_on_fabric(node.switch_port_errors),
            "HCA port -> switch port",
            "test_fabric_switch_port_errors",
            "fleet",
        ),
        Check(
            "fabric.xmit_wait",
            "PortXmitWait rate of the switch port facing each rail",
            per_rail_on_fabric(node.xmit_wait),
            "HCA port -> switch port",
            "test_fabric_xmit_wait",
            "fleet",
        ),
        Check(
            "fabric.pkey",
            "each rail port is a member of the profile's partitions",
            node.pkey,
            "HCA port",
            "test_fabric_pkey",
        ),
        Check(
            "fabric.sm",
            "exactly one MASTER subnet manager per subnet, at the expected priority (and GUID)",
            infra.subnet_manager,
            "subnet manager",
            "test_fabric_sm",
            "fleet",
            infrastructure=True,
        ),
        Check(
            "fabric.switch.firmware",
            "every switch at or above the profile's firmware, one version across the fabric",
            infra.switch_firmware,
            "switch",
            "test_fabric_switch_firmware",
            "fleet",
            infrastructure=True,
        ),
        Check(
            "fabric.uplinks",
            "each leaf's uplinks to the spines: present, at width and speed, "
            "no errors, XmitWait under the limit",
            infra.uplinks,
            "switch port",
            "test_fabric_uplinks",
            "fleet",
            infrastructure=True,
        ),
    ],
)

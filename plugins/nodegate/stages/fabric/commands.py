"""What the `fabric` stage runs: command ids (they name the evidence, `raw/<node>/fabric.json#<id>`)
and argv. Every node reads its own port GUIDs and partition keys from sysfs; an observer node
also queries each subnet it observes from its port on that subnet (`-C <ca> -P <port>`):
ibnetdiscover, sminfo, saquery SMIR, the switch port counters twice over the profile's window,
and the switches' firmware. The simulated fleet answers these exact command lines.

The counter reads and the firmware read are one command each per subnet, whatever the
fabric's size: a `sh -c` loop over the switch LIDs ibnetdiscover lists, one `perfquery -x -l`
per switch (every port of the switch in one query), never a command per node port. The CA and
port are the loop's positional arguments (`"$1"`, `"$2"`), so the renderer quotes them as any
other argument.
"""

from __future__ import annotations

from nodegate.core.values import Part, Shell
from nodegate.stages.fabric.profile import FabricProfile, Subnet

GUIDS = "node_guids"
PKEYS = "pkeys"
SLEEP = "counter_window"
# Observer commands, one each per subnet observed (`subnet_id(kind, subnet)`).
DISCOVER, SMINFO, SAQUERY = "ibnetdiscover", "sminfo", "saquery"
COUNTERS, COUNTERS_AGAIN, FIRMWARE = "perfquery", "perfquery_again", "switch_fw"
PORT = 1  # rail HCAs are single-port (hca.rails name the device)

_IB = "/sys/class/infiniband"
# grep: 1 = nothing matched, 2 = a glob with no match: the lines it printed still count.
GREP_OK_RCS = (0, 1, 2)
NODE_TIMEOUT_S = 15.0

# A rail HCA's port 1 GUID is its node GUID (ConnectX); the port files make it a listing the
# sysfs parser reads as the hca stage's.
_GUID_GLOBS = " ".join(
    [f"{_IB}/*/node_guid"] + [f"{_IB}/*/ports/*/{n}" for n in ("state", "phys_state", "rate")]
)
GUIDS_ARGV: tuple[Part, ...] = ("grep", "-H", ".", Shell(f" {_GUID_GLOBS} 2>/dev/null"))
PKEYS_ARGV: tuple[Part, ...] = ("grep", "-H", ".", Shell(f" {_IB}/*/ports/*/pkeys/* 2>/dev/null"))

# The LIDs of the subnet's switches, digits only (a node's output is untrusted), each once.
_SWITCH_LIDS = (
    'ibnetdiscover -p -C "$1" -P "$2" | awk \'$1=="SW" && $2 ~ /^[0-9]+$/ {print $2}\' | sort -un'
)
COUNTERS_LOOP = (
    f'set -e; lids=$({_SWITCH_LIDS}); for l in $lids; do perfquery -x -l -C "$1" -P "$2" "$l"; done'
)
FIRMWARE_LOOP = (
    f"set -e; lids=$({_SWITCH_LIDS}); "
    'for l in $lids; do echo "# lid $l"; flint -d "lid-$l,$1,$2" q; done'
)


def subnet_id(kind: str, subnet: str) -> str:
    """Command id of an observer command on a subnet: `ibnetdiscover_compute`."""
    return f"{kind}_{subnet}"


def observer_port(prof: FabricProfile, subnet: Subnet) -> tuple[str, str]:
    """(CA, port) the observer queries the subnet from: the device of its first rail."""
    rail = prof.rail(subnet.rails[0])
    if rail is None:  # the profile loader refuses rails not in hca.rails
        raise ValueError(f"subnet {subnet.name}: rail {subnet.rails[0]} not in hca.rails")
    return rail.device, str(PORT)


def discover_argv(ca: str, port: str) -> tuple[Part, ...]:
    return ("ibnetdiscover", "-p", "-C", ca, "-P", port)


def sminfo_argv(ca: str, port: str) -> tuple[Part, ...]:
    return ("sminfo", "-C", ca, "-P", port)


def saquery_argv(ca: str, port: str) -> tuple[Part, ...]:
    return ("saquery", "-C", ca, "-P", port, "SMIR")


def counters_argv(ca: str, port: str) -> tuple[Part, ...]:
    return ("sh", "-c", COUNTERS_LOOP, "sh", ca, port)


def firmware_argv(ca: str, port: str) -> tuple[Part, ...]:
    return ("sh", "-c", FIRMWARE_LOOP, "sh", ca, port)

"""What the `hca` stage runs on a node: command ids (they name the evidence,
`raw/<node>/hca.json#<id>`) and the sysfs listings. The simulated fleet answers these exact
command lines, so they change only together with it.
"""

from __future__ import annotations

import re

from nodegate.core.values import Part, Shell
from nodegate.parsers.ib_pci import PCI_ATTRS

SYSFS = "ib_sysfs"
PCI = "ib_pci"  # not a command: parse errors of the PCI lines of SYSFS
SLEEP = "counter_window"
SYSFS_AGAIN = "ib_sysfs_again"
TOPO = "topo"
PEERMEM = "peermem"
DRIVER = "nvidia_driver"
KERNEL = "kernel"
MLXLINK_PREFIX = "mlxlink_"

# Reason recorded for SYSFS when the node has no RDMA device at all (a FAIL, not an ERROR).
NO_DEVICES = "no RDMA device under /sys/class/infiniband"

CMD_TIMEOUT_S = 15.0
MLXLINK_TIMEOUT_S = 30.0  # mlxlink reads PHY registers: seconds per port

_IB = "/sys/class/infiniband"
_PORT_FILES = ("state", "phys_state", "rate", "link_layer")


def _grep_globs(globs: list[str]) -> tuple[Part, ...]:
    """`grep -H -r .` of absolute globs, expanded by the node's shell (a `Shell` part, with the
    redirection): no `cd`, so the command is one program (grep) on every node. grep -r follows
    the named device symlinks, not the links it meets inside."""
    return ("grep", "-H", "-r", ".", Shell(" " + " ".join(globs) + " 2>/dev/null"))


SYSFS_COMMAND = _grep_globs(
    [f"{_IB}/*/{n}" for n in ("fw_ver", "board_id", "hca_type", "node_guid")]
    + [f"{_IB}/*/ports/*/{n}" for n in _PORT_FILES]
    + [f"{_IB}/*/ports/*/counters"]
    + [f"{_IB}/*/device/{n}" for n in PCI_ATTRS]
)
# The second read: port state and counters only (a port that flapped shows here too).
SYSFS_AGAIN_COMMAND = _grep_globs(
    [f"{_IB}/*/ports/*/{n}" for n in ("state", "phys_state", "rate")]
    + [f"{_IB}/*/ports/*/counters"]
)
# grep: 1 = nothing matched, 2 = some named file missing (a glob with no match): the lines it
# did print still count.
GREP_OK_RCS = (0, 1, 2)


def mlxlink_id(device: str) -> str:
    """Command id of `mlxlink -d <device>` (ids are [A-Za-z0-9_.:-]+)."""
    return MLXLINK_PREFIX + re.sub(r"[^A-Za-z0-9_.:-]", "_", device)


def mlxlink_argv(device: str) -> tuple[str, ...]:
    """`mlxlink` of one rail HCA: BER, module flags, as JSON."""
    return ("mlxlink", "-d", device, "-m", "-c", "--json")

"""Parse what `cma_roce_mode -d <dev> [-p <port>] [-m <1|2>]` prints: rdma_cm's default RoCE
mode of one port, the text of configfs `/sys/kernel/config/rdma_cm/<dev>/ports/<port>/
default_roce_mode` (the file the `roce` stage already reads with grep, so this parser is the
same fact for an operator who has only the script's output).

Written from the script (Mellanox/mlnx-tools `sbin/cma_roce_mode`): it mounts configfs, creates
the device's rdma_cm group, optionally writes `IB/RoCE v1` or `RoCE v2`, then `cat`s the file;
its failures are one of the messages in `_FAILURES`. No captured run is in the corpus
(tests/fixtures/formats/README.md says so).

>>> parse_cma_roce_mode("RoCE v2\\n").version
2
"""

from __future__ import annotations

from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

TOOL = "cma_roce_mode"
# The kernel's names for the modes (drivers/infiniband/core/cma_configfs.c prints
# ib_cache_gid_type_str: "IB/RoCE v1", "RoCE v2").
_MODES = {"IB/RoCE v1": 1, "RoCE v2": 2}
# The script's own failure messages (echo lines before it exits 1).
_FAILURES = (
    "You must be root to run this",
    "Failed to mount configfs",
    "Module rdma_cm is not loaded or does not support configfs",
    "Failed to create configuration for ",
    "Device ",  # "Device <dev> port <port> does not exist"
)


@dataclass(frozen=True, slots=True)
class CmaRoceMode:
    """The port's default RoCE mode: the text as printed and its RoCE version (1 or 2)."""

    mode: str
    version: int


def parse_cma_roce_mode(text: str) -> CmaRoceMode:
    lines = [ln.strip() for ln in clean_lines(text) if ln.strip()]
    if not lines:
        raise ParseError(TOOL, "empty output")
    for line in lines:
        if line.startswith(_FAILURES):
            raise ParseError(TOOL, f"the script failed: {line[:100]!r}")
    if len(lines) != 1 or lines[0] not in _MODES:
        want = "one line 'RoCE v2' or 'IB/RoCE v1'"
        raise ParseError(TOOL, f"expected {want}, got {lines[0][:60]!r}")
    return CmaRoceMode(lines[0], _MODES[lines[0]])

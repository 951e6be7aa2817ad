"""`ibv_devinfo` as an operator runs it on a simulated node, consistent with the same node's
sysfs and faults.

Layout of the corpus capture ibv_devinfo__cx7-ndr-port-down-mt0000000838-excerpt
(tests/fixtures/corpus/net; spaces as published), values substituted. Answered without
arguments only; anything else fails (rc 2). (`ibstat`, `perfquery -x` and `flint q` were
answered here for parsers no stage used, removed in the house issue; the corpus keeps their
captures.)
"""

from __future__ import annotations

from collections.abc import Iterable

from nodegate.sim.tools.base import Response, SimTool
from nodegate.sim.tools.hca import Hca

_SM_LID = 334  # the corpus H100 fabric's subnet manager


def _lid(d: Hca, i: int) -> int:
    return 0 if d.link_layer != "InfiniBand" else (65535 if d.state.startswith("1") else 75 + i)


def _col(key: str, value: object, indent: int, width: int) -> str:
    return " " * indent + f"{key + ':':<{width}}{value}"


def ibv_devinfo(devs: list[Hca]) -> str:
    """`ibv_devinfo`: one hca_id block per device, blank line between devices."""
    blocks = []
    for i, d in enumerate(devs):
        code = d.state.split(": ", 1)
        ib = d.link_layer == "InfiniBand"
        lines = [
            f"hca_id: {d.name}",
            _col("transport", "InfiniBand (0)", 8, 32),
            _col("fw_ver", d.fw_ver, 8, 32),
            _col("node_guid", d.guid, 8, 32),
            _col("sys_image_guid", d.guid, 8, 32),
            _col("vendor_id", "0x02c9", 8, 32),
            _col("vendor_part_id", d.hca_type.removeprefix("MT"), 8, 32),
            _col("hw_ver", "0x0", 8, 32),
            _col("board_id", d.board_id, 8, 32),
            _col("phys_port_cnt", 1, 8, 32),
            " " * 16 + "port:   1",
            _col("state", f"PORT_{code[1]} ({code[0]})", 24, 24),
            _col("max_mtu", "4096 (5)", 24, 24),
            _col("active_mtu", "4096 (5)", 24, 24),
            _col("sm_lid", _SM_LID if ib else 0, 24, 24),
            _col("port_lid", _lid(d, i), 24, 24),
            _col("port_lmc", "0x00", 24, 24),
            _col("link_layer", d.link_layer, 24, 24),
        ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def tools(devs: list[Hca]) -> Iterable[SimTool]:
    yield SimTool("ibv_devinfo", {"": Response(ibv_devinfo(devs))})

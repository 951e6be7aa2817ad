"""The IB diagnostics an operator runs on a simulated node (`ibstat`, `ibv_devinfo`,
`perfquery -x`, `flint q`), consistent with the same node's sysfs and faults.

Layouts are the corpus captures' (tests/fixtures/corpus/net): ibstat__h100-cx7-ndr400-ib-cx6dx-
ports-down (tabs), ibv_devinfo__cx7-ndr-port-down-mt0000000838-excerpt (spaces as published),
perfquery__x-extended-edr-hca, flint__q-bluefield2-dpu-fs4-secure-fw-24.33; values substituted.
Arguments answered: `ibstat` and `ibv_devinfo` alone, `perfquery -x -C <dev> -P 1` (the
counters as of the hca stage's second read), `flint -d <dev> q`; anything else fails (rc 2).
"""

from __future__ import annotations

from collections.abc import Iterable

from nodegate.sim.tools import Response, SimTool
from nodegate.sim.tools.hca import Hca

_SM_LID = 334  # the corpus H100 fabric's subnet manager


def _lid(d: Hca, i: int) -> int:
    return 0 if d.link_layer != "InfiniBand" else (65535 if d.state.startswith("1") else 75 + i)


def _rate_gbps(d: Hca) -> str:
    return d.rate.split(" ", 1)[0]


def _hex_guid(d: Hca) -> str:
    return "0x" + d.guid.replace(":", "")


def ibstat(devs: list[Hca]) -> str:
    """`ibstat`: one CA block per device, tab-indented, CAs in name order."""
    out = []
    for i, d in enumerate(devs):
        ib = d.link_layer == "InfiniBand"
        state = d.state.split(": ", 1)[1].capitalize()
        phys = d.phys_state.split(": ", 1)[1]
        out += [
            f"CA '{d.name}'",
            f"\tCA type: {d.hca_type}",
            "\tNumber of ports: 1",
            f"\tFirmware version: {d.fw_ver}",
            "\tHardware version: 0",
            f"\tNode GUID: {_hex_guid(d)}",
            f"\tSystem image GUID: {_hex_guid(d)}",
            "\tPort 1:",
            f"\t\tState: {state}",
            f"\t\tPhysical state: {phys}",
            f"\t\tRate: {_rate_gbps(d)}",
            f"\t\tBase lid: {_lid(d, i)}",
            "\t\tLMC: 0",
            f"\t\tSM lid: {_SM_LID if ib else 0}",
            f"\t\tCapability mask: {'0xa751e848' if ib else '0x00010000'}",
            f"\t\tPort GUID: {_hex_guid(d)}",
            f"\t\tLink layer: {d.link_layer}",
        ]
    return "\n".join(out) + "\n"


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


_PERF = (
    ("PortXmitData", "port_xmit_data"),
    ("PortRcvData", "port_rcv_data"),
    ("PortXmitPkts", "port_xmit_packets"),
    ("PortRcvPkts", "port_rcv_packets"),
    ("PortUnicastXmitPkts", "unicast_xmit_packets"),
    ("PortUnicastRcvPkts", "unicast_rcv_packets"),
    ("PortMulticastXmitPkts", "multicast_xmit_packets"),
    ("PortMulticastRcvPkts", "multicast_rcv_packets"),
    ("CounterSelect2", None),
    ("SymbolErrorCounter", "symbol_error"),
    ("LinkErrorRecoveryCounter", "link_error_recovery"),
    ("LinkDownedCounter", "link_downed"),
    ("PortRcvErrors", "port_rcv_errors"),
    ("PortRcvRemotePhysicalErrors", "port_rcv_remote_physical_errors"),
    ("PortRcvSwitchRelayErrors", "port_rcv_switch_relay_errors"),
    ("PortXmitDiscards", "port_xmit_discards"),
    ("PortXmitConstraintErrors", "port_xmit_constraint_errors"),
    ("PortRcvConstraintErrors", "port_rcv_constraint_errors"),
    ("LocalLinkIntegrityErrors", "local_link_integrity_errors"),
    ("ExcessiveBufferOverrunErrors", "excessive_buffer_overrun_errors"),
    ("VL15Dropped", "VL15_dropped"),
    ("PortXmitWait", "port_xmit_wait"),
    ("QP1Dropped", None),
)


def perfquery_x(d: Hca, i: int) -> str:
    """`perfquery -x -C <dev> -P 1`: extended counters, dotted to column 33 (the later read)."""
    values = dict(d.counters)
    if d.symbol_errors is not None:
        values["symbol_error"] = d.symbol_errors[1]
    lines = [
        f"# Port extended counters: Lid {_lid(d, i)} port 1 (CapMask: 0x5A00 CapMask2: 0x0000000)",
        f"{'PortSelect:':.<33}1",
        f"{'CounterSelect:':.<33}0x0000",
    ]
    for name, key in _PERF:
        value = "0x00000000" if name == "CounterSelect2" else values.get(key or "", 0)
        lines.append(f"{name + ':':.<33}{value}")
    return "\n".join(lines) + "\n"


def flint_q(d: Hca) -> str:
    """`flint -d <dev> q`: FS4 image query with this device's firmware and PSID."""
    guid = d.guid.replace(":", "")
    mac = guid[:6] + guid[10:]
    rows = [
        ("Image type", "FS4"),
        ("FW Version", d.fw_ver),
        ("FW Release Date", "12.3.2024"),
        ("Product Version", d.fw_ver),
        ("Rom Info", "type=UEFI version=14.32.17 cpu=AMD64,AARCH64"),
        ("", "type=PXE version=3.7.300 cpu=AMD64"),
        ("Description", "UID                GuidsNumber"),
        ("Base GUID", f"{guid}        4"),
        ("Base MAC", f"{mac}            4"),
        ("Image VSD", "N/A"),
        ("Device VSD", "N/A"),
        ("PSID", d.board_id),
        ("Security Attributes", "secure-fw"),
    ]
    return "\n".join(f"{k + ':' if k else '':<23}{v}" for k, v in rows) + "\n"


def tools(devs: list[Hca]) -> Iterable[SimTool]:
    yield SimTool("ibstat", {"": Response(ibstat(devs))})
    yield SimTool("ibv_devinfo", {"": Response(ibv_devinfo(devs))})
    yield SimTool(
        "perfquery",
        {f"-x -C {d.name} -P 1": Response(perfquery_x(d, i)) for i, d in enumerate(devs)},
    )
    yield SimTool("flint", {f"-d {d.name} q": Response(flint_q(d)) for d in devs})

"""Simulated RoCE configuration of a node's rails: the tools and kernel files the `roce` stage
reads, consistent with the node's model and faults. Rendering: sim/tools/roce_render.py.

A node has RoCE rails when its hardware says `hca: {link_layer: Ethernet}` (the hca provider
then shows its rail HCAs as Ethernet ports); other nodes get none of this. Rail i is mlx5_i
over netdev enp<bus>s0np0 (the PCI bus of the hca provider's rail i), address
10.<100+i>.<index // 250>.<index % 250 + 1>/16, policy table 100+i, GID index 3 (RoCE v2,
IPv4), traffic class 106 (DSCP 26 -> priority 3, PFC on 3, CNP DSCP 48 -> priority 6).

Tools (arguments as the real tools take them; anything else fails): `rdma link [show]`,
`rdma statistic [show]` (also `stat`), `ip -j addr|address [show]`, `ip -j route show table
all`, `ip -j rule [show]`, `show_gids [DEV]`, `ethtool IF`, `ethtool -S IF`, `mlnx_qos -i IF`
(`--interface IF`), `ibv_devinfo -d DEV`. Files: /sys/class/net/IF/ecn/..., /sys/kernel/
config/rdma_cm/DEV/ports/1/..., /proc/sys/net/ipv4/conf/{all,IF}/{arp_*,rp_filter}.
Counters that climb (pause_storm, cnp_storm, retransmits) rise at every read of the tool
that prints them (a state file per node counts the reads).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.nodefs import Counter, Entry
from nodegate.sim.tools.base import Provider, SimTool

RAILS = 8
BUSES = ("18", "3a", "4b", "5c", "9a", "ba", "ca", "da")  # the hca provider's rail PCI buses
GID_INDEX = 3
TCLASS = 106
ROCE_PRIO, CNP_DSCP, CNP_PRIO = 3, 48, 6
STATE_DIR = "/var/lib/nodegate-sim/roce"
# Rise per read of a climbing counter (a storm: thousands of frames a second).
PAUSE_STEP, CNP_STEP, RETRANS_STEP = 184_320, 52_311, 1_207

FAULTS = {
    "trust_pcp": "rail ARG (default 4) trusts PCP, not DSCP (mlnx_qos prints no DSCP map)",
    "pfc_off": "rail ARG (default 4) has PFC off on every priority",
    "pfc_wrong_prio": "rail ARG (default 4) has PFC on priority 4 instead of 3",
    "ecn_off": "rail ARG (default 4) has ECN off (roce_np and roce_rp) on every priority",
    "mtu_1500": "rail ARG (default 4) netdev MTU 1500 (RDMA active MTU drops to 1024)",
    "roce_v1_only": "rail ARG (default 4) has RoCE v1 GIDs only and rdma_cm in IB/RoCE v1",
    "gid_index_moved": "rail ARG (default 4) has two more GIDs first: its v2 IPv4 GID is index 5",
    "duplicate_ip": "rail ARG (default 4) holds the address of the previous node's rail",
    "rp_filter_strict": "rail ARG (default 4) has rp_filter 1 (strict)",
    "pause_storm": "rail ARG (default 4): PFC pause frames on priority 3 climb between reads",
    "cnp_storm": "rail ARG (default 4): CNPs sent and handled climb between reads",
    "retransmits": "rail ARG (default 4): out_of_sequence, packet_seq_err, local_ack_timeout_err "
    "climb between reads",
    "tos_mismatch": "rail ARG (default 4): rdma_cm default_roce_tos 0, not 106",
}
# These faults need a RoCE fleet (hardware hca.link_layer Ethernet and a RoCE profile).
ROCE_FAULTS = frozenset(FAULTS)


@dataclass
class RoceRail:
    """One rail as the node's tools and files show it."""

    rail: int
    device: str
    netdev: str
    address: str
    mac: str
    trust: str = "dscp"
    pfc: tuple[int, ...] = (ROCE_PRIO,)
    ecn: bool = True
    mtu: int = 9000
    active_mtu: int = 4096
    gids: str = "v1v2"  # v1v2 | v1 (roce_v1_only) | moved (gid_index_moved)
    roce_mode: str = "RoCE v2"
    tos: int = TCLASS
    rp_filter: int = 2
    climb: dict[str, int] = field(default_factory=dict)  # counter -> rise per read

    @property
    def table(self) -> int:
        return 100 + self.rail


def gid_index_of(r: RoceRail) -> int | None:
    """Index of the rail's RoCE v2 IPv4 GID (None: v1 only); see roce_render.gid_rows."""
    return None if r.gids == "v1" else (5 if r.gids == "moved" else GID_INDEX)


def has_roce(node: SimNode) -> bool:
    hca = node.hw.get("hca") or {}
    return isinstance(hca, dict) and hca.get("link_layer") == "Ethernet"


def rail_address(rail: int, index: int) -> str:
    hi, lo = divmod(index, 250)
    return f"10.{100 + rail}.{hi}.{lo + 1}"


def node_rails(node: SimNode) -> list[RoceRail]:
    """The node's RoCE rails after faults (none when the node has no RoCE rails)."""
    if not has_roce(node):
        return []
    rails = [
        RoceRail(
            i,
            f"mlx5_{i}",
            f"enp{int(BUSES[i], 16)}s0np0",
            rail_address(i, node.index),
            f"94:6d:ae:{node.index // 256 % 256:02x}:{node.index % 256:02x}:{0x40 + i:02x}",
        )
        for i in range(RAILS)
    ]
    for f in node.faults:
        if f.kind not in FAULTS:
            continue
        arg = f.arg or "4"
        if not arg.isdigit() or int(arg) >= RAILS:
            continue
        _apply(rails[int(arg)], f.kind, node.index)
    return rails


def _apply(r: RoceRail, kind: str, index: int) -> None:
    if kind == "trust_pcp":
        r.trust = "pcp"
    elif kind == "pfc_off":
        r.pfc = ()
    elif kind == "pfc_wrong_prio":
        r.pfc = (4,)
    elif kind == "ecn_off":
        r.ecn = False
    elif kind == "mtu_1500":
        r.mtu, r.active_mtu = 1500, 1024
    elif kind == "roce_v1_only":
        r.gids, r.roce_mode = "v1", "IB/RoCE v1"
    elif kind == "gid_index_moved":
        r.gids = "moved"
    elif kind == "duplicate_ip":
        r.address = rail_address(r.rail, index - 1 if index > 0 else index + 1)
    elif kind == "rp_filter_strict":
        r.rp_filter = 1
    elif kind == "pause_storm":
        r.climb.update({f"rx_prio{ROCE_PRIO}_pause": PAUSE_STEP, f"tx_prio{ROCE_PRIO}_pause": 17})
    elif kind == "cnp_storm":
        r.climb.update({"np_cnp_sent": CNP_STEP, "rp_cnp_handled": CNP_STEP // 3})
    elif kind == "retransmits":
        steps = {"out_of_sequence": RETRANS_STEP, "packet_seq_err": 41}
        r.climb.update({**steps, "local_ack_timeout_err": 3})
    elif kind == "tos_mismatch":
        r.tos = 0


def files(node: SimNode) -> dict[str, Entry]:
    """ECN, CNP, rdma_cm configfs and the ARP/rp_filter sysctls of every rail."""
    rails = node_rails(node)
    if not rails:
        return {}
    conf = "/proc/sys/net/ipv4/conf"
    # Sites set conf/all to 0 so that each rail's own value is the effective one (max rule).
    out: dict[str, Entry] = {f"{conf}/all/{k}": "0\n" for k in ("arp_ignore", "arp_announce")}
    out[f"{conf}/all/rp_filter"] = "0\n"
    for r in rails:
        ecn = f"/sys/class/net/{r.netdev}/ecn"
        for p in range(8):
            out[f"{ecn}/roce_np/enable/{p}"] = f"{int(r.ecn)}\n"
            out[f"{ecn}/roce_rp/enable/{p}"] = f"{int(r.ecn)}\n"
        out[f"{ecn}/roce_np/cnp_dscp"] = f"{CNP_DSCP}\n"
        out[f"{ecn}/roce_np/cnp_802p_prio"] = f"{CNP_PRIO}\n"
        cm = f"/sys/kernel/config/rdma_cm/{r.device}/ports/1"
        out[f"{cm}/default_roce_mode"] = r.roce_mode + "\n"
        out[f"{cm}/default_roce_tos"] = f"{r.tos}\n"
        out[f"{conf}/{r.netdev}/arp_ignore"] = "1\n"
        out[f"{conf}/{r.netdev}/arp_announce"] = "2\n"
        out[f"{conf}/{r.netdev}/rp_filter"] = f"{r.rp_filter}\n"
    # How many times each counter tool was read (a file of its own: Counter, step 0): the
    # climbing faults rise with it; the flow model's counters are read at every read.
    out[f"{STATE_DIR}/reads-rdma"] = Counter(0, 0)
    for r in rails:  # `ethtool -S IF` counts its reads per interface
        out[f"{STATE_DIR}/reads-ethtool-{r.netdev}"] = Counter(0, 0)
    return out


def tools(node: SimNode) -> Iterable[SimTool]:
    from nodegate.sim.tools import roce_render  # renders RoceRail: imported here, not at the top

    rails = node_rails(node)
    if rails:
        yield from roce_render.tools(node, rails)


PROVIDER = Provider(name="roce", tools=tools, files=files, faults=FAULTS)

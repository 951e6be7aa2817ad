"""What the simulated RoCE tools print, in the real tools' formats (sim/tools/roce.py models).

Layouts: `mlnx_qos -i` from the corpus capture mlnx_qos__cx5-100gbe-dcbx-firmware-trust-dscp-
...-ets-vendor (8-space indents, three trailing spaces on PFC rows); `show_gids` from
show_gids__cx4lx-4port-12gids-one-port-down-tabs (tabs, `IPv4  ` padding); `ibv_devinfo` from
ibv_devinfo__cx4lx-4dev-fw14-roce-ethernet-one-port-down-complete (tabs); `rdma link` from
rdma_link__rxe-soft-roce; `ethtool -S` head from ethtool_S__cx4lx-mlx5-ubuntu1804-head-
excerpt plus the mlx5 per-priority and physical counters (kernel mlx5 counters.rst);
`ethtool IF`, `rdma statistic` and iproute2 JSON as in tests/fixtures/formats (README there),
the hw counter set of show_counters__cx4lx-mlx5_0-out-of-buffer-cqe-errors-no-cnp.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools.base import Response, SimTool, bad_arguments
from nodegate.sim.tools.roce import CNP_PRIO, ROCE_PRIO, STATE_DIR, RoceRail

_HW = [
    "rx_write_requests",
    "rx_read_requests",
    "rx_atomic_requests",
    "rx_dct_connect",
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "resp_local_length_error",
    "resp_cqe_error",
    "req_cqe_error",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "resp_cqe_flush_error",
    "req_cqe_flush_error",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_ignored",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rx_icrc_encapsulated",
]
_HW_BASE = {"out_of_buffer": 135, "req_cqe_error": 22, "req_cqe_flush_error": 11}
_ETH_HEAD = {
    "rx_packets": 845320277, "rx_bytes": 2195783498134, "tx_packets": 896117891,
    "tx_bytes": 2655285206479, "rx_csum_complete": 845270822, "tx_csum_partial": 726606998,
    "tx_queue_stopped": 0, "rx_discards_phy": 0, "tx_pause_storm_warning_events": 0,
    "tx_pause_storm_error_events": 0,
}  # fmt: skip
_ETHTOOL = """Settings for {ifname}:
\tSupported ports: [ FIBRE ]
\tSupported link modes:   100000baseKR4/Full 100000baseSR4/Full
\t                        200000baseCR4/Full 200000baseSR4/Full
\t                        400000baseCR4/Full 400000baseSR4/Full
\tSupported pause frame use: Symmetric
\tSupports auto-negotiation: Yes
\tSupported FEC modes: None\t RS
\tAdvertised link modes:  400000baseCR4/Full 400000baseSR4/Full
\tAdvertised pause frame use: Symmetric
\tAdvertised auto-negotiation: Yes
\tAdvertised FEC modes: RS
\tSpeed: 400000Mb/s
\tLanes: 4
\tDuplex: Full
\tAuto-negotiation: on
\tPort: FIBRE
\tPHYAD: 0
\tTransceiver: internal
\tSupports Wake-on: d
\tWake-on: d
        Current message level: 0x00000004 (4)
                               link
\tLink detected: yes
"""


def mlnx_qos(r: RoceRail) -> str:
    lines = ["DCBX mode: OS controlled", f"Priority trust state: {r.trust}"]
    if r.trust == "dscp":
        lines.append("dscp2prio mapping:")
        for p in range(8):
            dscps = ",".join(f"{d:02d}" for d in range(p * 8 + 7, p * 8 - 1, -1))
            lines.append(f"        prio:{p} dscp:{dscps},")
    lines += [
        "Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,max_buffer_size=262016",
        "Cable len: 7",
        "PFC configuration:",
        "        priority    0   1   2   3   4   5   6   7",
        "        enabled     " + "   ".join("1" if p in r.pfc else "0" for p in range(8)) + "   ",
        "        buffer      " + "   ".join("1" if p in r.pfc else "0" for p in range(8)) + "   ",
        "tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%",
    ]
    lines += [f"         priority:  {p}" for p in (0, 1, 2, 4, 5, 7)]
    lines += [f"tc: {ROCE_PRIO} ratelimit: unlimited, tsa: ets, bw: 50%"]
    lines += [
        f"         priority:  {ROCE_PRIO}",
        f"tc: {CNP_PRIO} ratelimit: unlimited, tsa: vendor",
    ]
    return "\n".join(lines + [f"         priority:  {CNP_PRIO}"]) + "\n"


def _ipv4_gid(addr: str) -> str:
    a, b, c, d = (int(x) for x in addr.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def _ll_gid(r: RoceRail) -> str:
    m = [int(x, 16) for x in r.mac.split(":")]
    eui = [m[0] ^ 2, m[1], m[2], 0xFF, 0xFE, m[3], m[4], m[5]]
    return "fe80:0000:0000:0000:" + ":".join(f"{eui[i]:02x}{eui[i + 1]:02x}" for i in (0, 2, 4, 6))


def gid_rows(r: RoceRail) -> list[tuple[str, str, str]]:
    """(GID, IPv4 or '', version) in index order."""
    ll, v4 = _ll_gid(r), _ipv4_gid(r.address)
    if r.gids == "v1":
        return [(ll, "", "v1"), (v4, r.address, "v1")]
    rows = [(ll, "", "v1"), (ll, "", "v2")]
    if r.gids == "moved":  # a second (ULA) IPv6 address comes first
        ula = "fd00:0000:0000:0000" + ll[19:]
        rows += [(ula, "", "v1"), (ula, "", "v2")]
    return rows + [(v4, r.address, "v1"), (v4, r.address, "v2")]


def show_gids(rails: list[RoceRail]) -> str:
    out = [
        "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV",
        "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---",
    ]
    for r in rails:
        for i, (gid, ip, ver) in enumerate(gid_rows(r)):
            ipcol = f"{ip}  " if ip else "\t"
            out.append(f"{r.device}\t1\t{i}\t{gid}\t{ipcol}\t{ver}\t{r.netdev}")
    n = sum(len(gid_rows(r)) for r in rails)
    return "\n".join(out + [f"n_gids_found={n}"]) + "\n"


def ibv_devinfo(r: RoceRail, node: SimNode) -> str:
    guid = f"946d:ae03:00{node.index % 256:02x}:{0x40 + r.rail:04x}"
    code = {1024: 3, 4096: 5}[r.active_mtu]
    return (
        f"hca_id:\t{r.device}\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.41.1000\n"
        f"\tnode_guid:\t\t\t{guid}\n\tsys_image_guid:\t\t\t{guid}\n\tvendor_id:\t\t\t0x02c9\n"
        "\tvendor_part_id:\t\t\t4129\n\thw_ver:\t\t\t\t0x0\n\tboard_id:\t\t\tMT_0000000838\n"
        "\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        f"\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{r.active_mtu} ({code})\n"
        "\t\t\tsm_lid:\t\t\t0\n\t\t\tport_lid:\t\t0\n\t\t\tport_lmc:\t\t0x00\n"
        "\t\t\tlink_layer:\t\tEthernet\n"
    )


def _printf(text: str, values: list[str]) -> str:
    """A shell printf of `text` whose `{}` slots are filled by shell `values`."""
    # One line of shell: the renderer indents preludes, which must not reach the text.
    fmt = text.replace("\\", "\\\\").replace("%", "%%").replace("{}", "%s").replace("\n", "\\n")
    return f"printf {shlex.quote(fmt)} " + " ".join(f'"{v}"' for v in values) + "; return 0"


# Counters the fabric's flow model moves (sim/flowmodel.py, written by the simulated
# ib_write_bw in duration mode under <root>/var/lib/nodegate-sim/traffic/<dev>/<name>).
TRAFFIC_ETHTOOL = (
    f"rx_prio{ROCE_PRIO}_bytes", f"tx_prio{ROCE_PRIO}_bytes",
    f"rx_prio{ROCE_PRIO}_packets", f"tx_prio{ROCE_PRIO}_packets",
    f"rx_prio{ROCE_PRIO}_pause", f"tx_prio{ROCE_PRIO}_pause",
    f"rx_prio{ROCE_PRIO}_pause_duration", f"tx_prio{ROCE_PRIO}_pause_duration",
    "rx_discards_phy", "tx_pause_storm_error_events",
)  # fmt: skip
TRAFFIC_RDMA = (
    "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored",
    "out_of_sequence", "packet_seq_err", "local_ack_timeout_err",
)  # fmt: skip
TRAFFIC_DIR = "/var/lib/nodegate-sim/traffic"
Slot = tuple[int, int, str]  # base, rise per read, the traffic counter's file ("" if none)


def reads_file(tool: str, args: str) -> str:
    """The state file counting the reads of one answer: `reads-rdma`, `reads-ethtool-IF`."""
    tail = args.split()[-1] if tool == "ethtool" else ""
    return f"{STATE_DIR}/reads-{tool}" + (f"-{tail}" if tail else "")


def _climbing(tool: str, answers: dict[str, tuple[str, list[Slot]]]) -> str:
    """A prelude answering `answers` (args -> (text with `{}` slots, [(base, step, file)])),
    each slot at base + step x (the number of earlier reads of `tool`) + what the flows
    added to its traffic counter file."""
    lines = [
        'ng_tc() { ng_v=0; [ -r "$NG_NODE/root$1" ] && read -r ng_v < "$NG_NODE/root$1"; '
        'printf %s "${ng_v:-0}"; }',
        'case "$*" in',
    ]
    for args, (text, slots) in answers.items():
        values = [
            f"$(({b} + {s} * ng_n + $(ng_tc {shlex.quote(f)})))" if f else f"$(({b} + {s} * ng_n))"
            for b, s, f in slots
        ]
        lines.append(f"  {shlex.quote(args)})")
        # one read count per answer (`ethtool -S IF` per interface): a read of another rail
        # is not time passing for this one's climbing counters
        state = reads_file(tool, args)
        lines.append(f'    ng_f="$NG_NODE/root{state}"; read -r ng_n < "$ng_f"')
        lines.append("    printf '%s\\n' $((ng_n + 1)) > \"$ng_f\"")
        lines.append(f"    {_printf(text, values)} ;;")
    return "\n".join(lines + ["esac"])


def ethtool_stats(r: RoceRail) -> tuple[str, list[Slot]]:
    values: dict[str, int] = dict(_ETH_HEAD)
    for p in range(8):
        for d in ("rx", "tx"):
            values[f"{d}_prio{p}_bytes"] = 0
            values[f"{d}_prio{p}_packets"] = 0
            values[f"{d}_prio{p}_pause"] = 0
            values[f"{d}_prio{p}_pause_duration"] = 0
    return _with_slots("NIC statistics:\n", "     {}: {}\n", values, r, TRAFFIC_ETHTOOL)


def _with_slots(
    head: str, row: str, values: dict[str, int], r: RoceRail, moved: tuple[str, ...]
) -> tuple[str, list[Slot]]:
    text, slots = head, []
    for k, v in values.items():
        if k in r.climb or k in moved:
            text += row.format(k, "{}")
            slots.append(
                (v, r.climb.get(k, 0), f"{TRAFFIC_DIR}/{r.device}/{k}" if k in moved else "")
            )
        else:
            text += row.format(k, v)
    return text, slots


def rdma_statistic(rails: list[RoceRail]) -> tuple[str, list[Slot]]:
    text, slots = "", list[Slot]()
    for r in rails:
        t, s = _with_slots(
            f"link {r.device}/1", " {} {}", {k: _HW_BASE.get(k, 0) for k in _HW}, r, TRAFFIC_RDMA
        )
        text, slots = text + t + "\n", slots + s
    return text, slots


def ip_addr(node: SimNode, rails: list[RoceRail]) -> str:
    def link(
        i: int, name: str, flags: list[str], mtu: int, mac: str, addrs: list[dict[str, object]]
    ) -> dict[str, object]:
        return {
            "ifindex": i, "ifname": name, "flags": flags, "mtu": mtu, "qdisc": "mq",
            "operstate": "UP", "group": "default", "txqlen": 1000, "link_type": "ether",
            "address": mac, "broadcast": "ff:ff:ff:ff:ff:ff", "addr_info": addrs,
        }  # fmt: skip

    def inet(addr: str, plen: int, label: str) -> dict[str, object]:
        forever = 4294967295
        return {"family": "inet", "local": addr, "prefixlen": plen, "scope": "global",
                "label": label, "valid_life_time": forever,
                "preferred_life_time": forever}  # fmt: skip

    lo = link(
        1,
        "lo",
        ["LOOPBACK", "UP", "LOWER_UP"],
        65536,
        "00:00:00:00:00:00",
        [inet("127.0.0.1", 8, "lo")],
    )
    lo.update(
        {
            "qdisc": "noqueue",
            "operstate": "UNKNOWN",
            "link_type": "loopback",
            "broadcast": "00:00:00:00:00:00",
        }
    )
    up = ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]
    docs = [lo, link(2, "eno1", up, 1500, "3c:ec:ef:00:00:01", [inet(node.address, 16, "eno1")])]
    for k, r in enumerate(rails):
        docs.append(link(3 + k, r.netdev, up, r.mtu, r.mac, [inet(r.address, 16, r.netdev)]))
    return json.dumps(docs, separators=(",", ":")) + "\n"


def ip_route(rails: list[RoceRail]) -> str:
    routes: list[dict[str, object]] = []
    for r in rails:
        net = ".".join(r.address.split(".")[:2]) + ".0.0/16"
        routes.append(
            {
                "dst": net,
                "dev": r.netdev,
                "table": str(r.table),
                "scope": "link",
                "prefsrc": r.address,
                "flags": [],
            }
        )
    for r in rails:
        net = ".".join(r.address.split(".")[:2]) + ".0.0/16"
        routes.append(
            {
                "dst": net,
                "dev": r.netdev,
                "protocol": "kernel",
                "scope": "link",
                "prefsrc": r.address,
                "flags": [],
            }
        )
    for r in rails:
        routes.append(
            {
                "type": "local",
                "dst": r.address,
                "dev": r.netdev,
                "table": "local",
                "protocol": "kernel",
                "scope": "host",
                "prefsrc": r.address,
                "flags": [],
            }
        )
    return json.dumps(routes, separators=(",", ":")) + "\n"


def ip_rule(rails: list[RoceRail]) -> str:
    rules: list[dict[str, object]] = [{"priority": 0, "src": "all", "table": "local"}]
    rules += [{"priority": r.table, "src": r.address, "table": str(r.table)} for r in rails]
    rules += [
        {"priority": 32766, "src": "all", "table": "main"},
        {"priority": 32767, "src": "all", "table": "default"},
    ]
    return json.dumps(rules, separators=(",", ":")) + "\n"


# mlnx_qos takes the interface as -i IF, --interface IF or --interface=IF.
MLNX_QOS_PRELUDE = """case "$1" in
  --interface) shift; set -- -i "$@" ;;
  --interface=*) set -- -i "${1#*=}" ;;
esac"""


def tools(node: SimNode, rails: list[RoceRail]) -> Iterable[SimTool]:
    stats = {f"-S {r.netdev}": ethtool_stats(r) for r in rails}
    eth = {a: Response(t) for a, (t, s) in stats.items() if not s}
    eth.update({r.netdev: Response(_ETHTOOL.format(ifname=r.netdev)) for r in rails})
    climbing = {a: ts for a, ts in stats.items() if ts[1]}
    yield SimTool(
        "ethtool",
        eth,
        prelude=_climbing("ethtool", climbing) if climbing else "",
        usage=bad_arguments("ethtool", 1),
    )
    link = "".join(
        f"link {r.device}/1 state ACTIVE physical_state LINK_UP netdev {r.netdev}\n" for r in rails
    )
    stat_text, stat_slots = rdma_statistic(rails)
    rdma: dict[str, Response] = {"link show": Response(link), "link": Response(link)}
    stat_forms = ("statistic show", "statistic", "stat show", "stat")
    prelude = ""
    if stat_slots:
        prelude = _climbing("rdma", {"statistic show": (stat_text, stat_slots)})
        prelude = (
            'case "$*" in "statistic"|"stat show"|"stat") set -- statistic show ;; esac\n' + prelude
        )
    else:
        rdma.update({f: Response(stat_text) for f in stat_forms})
    yield SimTool("rdma", rdma, prelude=prelude, usage=bad_arguments("rdma", 1))
    yield SimTool(
        "ip",
        {
            **{
                f"-j {o} {s}".strip(): Response(ip_addr(node, rails))
                for o in ("addr", "address", "a")
                for s in ("show", "")
            },
            "-j route show table all": Response(ip_route(rails)),
            **{f"-j rule {s}".strip(): Response(ip_rule(rails)) for s in ("show", "")},
        },
        usage=bad_arguments("ip", 255),
    )
    gids = {"": Response(show_gids(rails))}
    gids.update({r.device: Response(show_gids([r])) for r in rails})
    yield SimTool("show_gids", gids)
    yield SimTool(
        "mlnx_qos",
        {f"-i {r.netdev}": Response(mlnx_qos(r)) for r in rails},
        prelude=MLNX_QOS_PRELUDE,
        usage=bad_arguments("mlnx_qos", 1),
    )
    yield SimTool("ibv_devinfo", {f"-d {r.device}": Response(ibv_devinfo(r, node)) for r in rails})

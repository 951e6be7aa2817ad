"""The simulated fabric: derived from the fleet model, read back by the real parsers, and each
fault changing exactly the lines the real fault changes (ibnetdiscover -p, perfquery, sminfo,
saquery, flint, the node's sysfs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.parsers.flint import parse_switch_firmware, parse_switch_firmware_loop
from nodegate.parsers.ib_pkeys import PkeyEntry, parse_pkeys
from nodegate.parsers.ibnetdiscover import parse_ibnetdiscover_ports
from nodegate.parsers.perfquery import parse_perfquery_extended
from nodegate.parsers.saquery import parse_saquery_smir
from nodegate.parsers.sminfo import SmInfo, parse_sminfo
from nodegate.sim.fabric import BASE_FACTORS, LINK_RATES, Fabric, build_fabric
from nodegate.sim.fleet_model import FleetModel, load_model
from nodegate.sim.tools import hca, known_faults
from nodegate.sim.tools.fabric import (
    flint_query,
    ibnetdiscover_ports,
    perfquery_text,
    saquery_smir,
    sminfo,
)
from nodegate.sim.tools.hca import node_hcas

from tests.simnode import build, run_script

# 4 nodes, 2 per rack: spines LID 1-2, leaf-r01-rail0..7 LID 3-10, leaf-r02-rail0..7 LID 11-18,
# then gpu001 rails 0-7 LID 19-26, gpu002 27-34, gpu003 35-42, gpu004 43-50.
BASE: dict[str, Any] = {
    "name": "fab",
    "profile": "generic-hgx-h100",
    "nodes": "gpu[001-004]",
    "racks": {"nodes_per_rack": 2},
}
# gpu002's HCA GUID of rail i (hca.py's formula: node index 1, 16 GUIDs per node).
G2 = {i: f"0x946dae0300{0xCDE73C + i:06x}" for i in range(8)}


def model(tmp: Path, **over: Any) -> FleetModel:
    path = tmp / "m.yaml"
    path.write_text(yaml.safe_dump({**BASE, **over}))
    return load_model(path, known_faults())


def fabric(tmp: Path, **over: Any) -> Fabric:
    return build_fabric(model(tmp, **over))


def diff(tmp: Path, text: Any, **over: Any) -> tuple[list[str], list[str]]:
    """(lines only the healthy fabric prints, lines only the faulty one prints), sorted."""
    healthy = set(text(fabric(tmp)).splitlines())
    faulty = set(text(fabric(tmp, **over)).splitlines())
    return sorted(healthy - faulty), sorted(faulty - healthy)


def test_healthy_fabric_shape_and_guids(tmp_path: Path) -> None:
    m = model(tmp_path)
    fab = build_fabric(m)
    assert [s.name for s in fab.switches[:3]] == ["spine01", "spine02", "leaf-r01-rail0"]
    assert [(s.name, s.lid) for s in fab.switches[-1:]] == [("leaf-r02-rail7", 18)]
    report = parse_ibnetdiscover_ports(ibnetdiscover_ports(fab))
    # 18 switches x 64 ports, 32 CA ports
    assert len(report.lines) == 18 * 64 + 32
    cas = {ln.local.description: ln for ln in report.lines if ln.local.kind == "CA"}
    # each node's rail GUIDs are its HCAs' node GUIDs as its sysfs shows them
    for n in m.nodes:
        for d in node_hcas(n):
            if d.name.startswith("mlx5_") and d.name != "mlx5_bond_0":
                line = cas[f"{n.name} {d.name}"]
                assert line.local.guid == "0x" + d.guid.replace(":", "")
    g3 = cas["gpu003 mlx5_5"]
    assert (g3.local.lid, g3.width, g3.speed) == (40, "4x", "NDR")
    assert g3.remote is not None
    assert (g3.remote.description, g3.remote.port, g3.remote.lid) == ("leaf-r02-rail5", 1, 16)
    uplinks = [
        (ln.local.port, ln.remote.description, ln.remote.port)
        for ln in report.lines
        if ln.local.description == "leaf-r02-rail5" and ln.remote and ln.remote.kind == "SW"
    ]
    assert uplinks == [(4, "spine02", 14), (3, "spine01", 14)]
    assert fab.expected["gpu003"][5] == ("leaf-r02-rail5", 1)
    assert ibnetdiscover_ports(build_fabric(model(tmp_path))) == ibnetdiscover_ports(fab)


def test_rail_group_leaves(tmp_path: Path) -> None:
    fab = fabric(tmp_path, nodes="gpu[001-006]", fabric={"nodes_per_leaf": 4, "spines": 4})
    names = [s.name for s in fab.switches]
    assert names[:4] == ["spine01", "spine02", "spine03", "spine04"]
    assert names[4:6] == ["leaf-su01-rail0", "leaf-su01-rail1"] and len(names) == 4 + 16
    assert fab.expected["gpu005"][2] == ("leaf-su02-rail2", 1)
    assert fab.expected["gpu004"][2] == ("leaf-su01-rail2", 4)


def test_swapped_rails(tmp_path: Path) -> None:
    gone, new = diff(tmp_path, ibnetdiscover_ports, faults={"gpu002": ["fabric_rails_swapped"]})
    assert gone == [
        f"CA    29  1 {G2[2]} 4x NDR - SW     5  2 0xb83fd203006a0004 "
        "( 'gpu002 mlx5_2' - 'leaf-r01-rail2' )",
        f"CA    30  1 {G2[3]} 4x NDR - SW     6  2 0xb83fd203006a0005 "
        "( 'gpu002 mlx5_3' - 'leaf-r01-rail3' )",
        f"SW     5  2 0xb83fd203006a0004 4x NDR - CA    29  1 {G2[2]} "
        "( 'leaf-r01-rail2' - 'gpu002 mlx5_2' )",
        f"SW     6  2 0xb83fd203006a0005 4x NDR - CA    30  1 {G2[3]} "
        "( 'leaf-r01-rail3' - 'gpu002 mlx5_3' )",
    ]
    assert new == [
        f"CA    29  1 {G2[2]} 4x NDR - SW     6  2 0xb83fd203006a0005 "
        "( 'gpu002 mlx5_2' - 'leaf-r01-rail3' )",
        f"CA    30  1 {G2[3]} 4x NDR - SW     5  2 0xb83fd203006a0004 "
        "( 'gpu002 mlx5_3' - 'leaf-r01-rail2' )",
        f"SW     5  2 0xb83fd203006a0004 4x NDR - CA    30  1 {G2[3]} "
        "( 'leaf-r01-rail2' - 'gpu002 mlx5_3' )",
        f"SW     6  2 0xb83fd203006a0005 4x NDR - CA    29  1 {G2[2]} "
        "( 'leaf-r01-rail3' - 'gpu002 mlx5_2' )",
    ]


def test_rail_on_the_wrong_leaf(tmp_path: Path) -> None:
    gone, new = diff(
        tmp_path, ibnetdiscover_ports, faults={"gpu002": [{"fabric_rail_wrong_leaf": "4"}]}
    )
    # rail 4 leaves leaf-r01-rail4 port 2 and lands on leaf-r01-rail5's spare port 6
    # (2 node ports + 2 uplinks, then node 2 of the rack)
    blank = " " * 36
    assert gone == [
        f"CA    31  1 {G2[4]} 4x NDR - SW     7  2 0xb83fd203006a0006 "
        "( 'gpu002 mlx5_4' - 'leaf-r01-rail4' )",
        f"SW     7  2 0xb83fd203006a0006 4x NDR - CA    31  1 {G2[4]} "
        "( 'leaf-r01-rail4' - 'gpu002 mlx5_4' )",
        f"SW     8  6 0xb83fd203006a0007 4x ???{blank}'leaf-r01-rail5'",
    ]
    assert new == [
        f"CA    31  1 {G2[4]} 4x NDR - SW     8  6 0xb83fd203006a0007 "
        "( 'gpu002 mlx5_4' - 'leaf-r01-rail5' )",
        f"SW     7  2 0xb83fd203006a0006 4x ???{blank}'leaf-r01-rail4'",
        f"SW     8  6 0xb83fd203006a0007 4x NDR - CA    31  1 {G2[4]} "
        "( 'leaf-r01-rail5' - 'gpu002 mlx5_4' )",
    ]


def test_unplugged_rail_and_its_host_port(tmp_path: Path) -> None:
    over = {"faults": {"gpu002": ["fabric_rail_unplugged"]}}
    gone, new = diff(tmp_path, ibnetdiscover_ports, **over)
    assert gone == [
        f"CA    31  1 {G2[4]} 4x NDR - SW     7  2 0xb83fd203006a0006 "
        "( 'gpu002 mlx5_4' - 'leaf-r01-rail4' )",
        f"SW     7  2 0xb83fd203006a0006 4x NDR - CA    31  1 {G2[4]} "
        "( 'leaf-r01-rail4' - 'gpu002 mlx5_4' )",
    ]
    assert new == [f"SW     7  2 0xb83fd203006a0006 4x ???{' ' * 36}'leaf-r01-rail4'"]
    node = model(tmp_path, **over).node("gpu002")
    ports = {d.name: (d.state, d.phys_state, d.rate) for d in node_hcas(node)}
    assert ports["mlx5_4"] == ("1: DOWN", "2: Polling", "40 Gb/sec (4X QDR)")
    assert ports["mlx5_3"] == ("4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)")


@pytest.mark.parametrize(
    ("fault", "width", "speed"),
    [("fabric_switch_port_2x", "2x", "NDR"), ("fabric_switch_port_hdr", "4x", "HDR")],
)
def test_switch_side_port_width_and_speed(
    tmp_path: Path, fault: str, width: str, speed: str
) -> None:
    gone, new = diff(tmp_path, ibnetdiscover_ports, faults={"gpu002": [{fault: "6"}]})
    tail = f" - CA    33  1 {G2[6]} ( 'leaf-r01-rail6' - 'gpu002 mlx5_6' )"
    assert gone == [f"SW     9  2 0xb83fd203006a0008 4x NDR{tail}"]
    assert new == [f"SW     9  2 0xb83fd203006a0008 {width} {speed}{tail}"]  # host side: 4x NDR


def _counters(fab: Fabric, lid: int, t: int) -> dict[int, dict[str, int]]:
    sw = fab.by_lid(lid)
    assert sw is not None
    return {p.port: dict(p.counters) for p in parse_perfquery_extended(perfquery_text(fab, sw, t))}


def _deltas(fab: Fabric, lid: int, window: int) -> dict[tuple[int, str], int]:
    """Counters that rose over `window` seconds, but the traffic ones."""
    a, b = _counters(fab, lid, 100), _counters(fab, lid, 100 + window)
    traffic = {"PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"}
    traffic |= {"PortUnicastXmitPkts", "PortUnicastRcvPkts"}
    return {
        (p, k): b[p][k] - v
        for p, cs in a.items()
        for k, v in cs.items()
        if k not in traffic and b[p][k] != v
    }


def test_symbol_errors_climb_on_the_leaf_port_facing_the_rail(tmp_path: Path) -> None:
    fab = fabric(tmp_path, faults={"gpu003": [{"fabric_symbol_errors": "1"}]})
    # leaf-r02-rail1 (LID 12): port 1 faces gpu003 rail 1; every linked port's XmitWait ticks
    assert _deltas(fab, 12, 10) == {
        (1, "SymbolErrorCounter"): 300,
        (1, "PortXmitWait"): 1200,
        (2, "PortXmitWait"): 1200,
        (3, "PortXmitWait"): 1200,
        (4, "PortXmitWait"): 1200,
    }
    healthy = fabric(tmp_path)
    assert _deltas(healthy, 12, 10) == {(p, "PortXmitWait"): 1200 for p in (1, 2, 3, 4)}
    assert _counters(fab, 12, 0)[1]["SymbolErrorCounter"] == 0


def test_xmit_wait_on_an_uplink(tmp_path: Path) -> None:
    fab = fabric(tmp_path, fabric={"faults": [{"uplink_xmit_wait": "leaf-r01-rail3:4"}]})
    d = _deltas(fab, 6, 10)
    assert d[(4, "PortXmitWait")] == 450_000_000
    assert {k: v for k, v in d.items() if k != (4, "PortXmitWait")} == {
        (p, "PortXmitWait"): 1200 for p in (1, 2, 3)
    }
    # the default port is the leaf's first uplink (port 3 with 2 nodes per rack)
    fab = fabric(tmp_path, fabric={"faults": [{"uplink_xmit_wait": "leaf-r01-rail3"}]})
    assert _deltas(fab, 6, 10)[(3, "PortXmitWait")] == 450_000_000


def test_leaf_uplink_down(tmp_path: Path) -> None:
    over = {"fabric": {"faults": [{"uplink_down": "leaf-r02-rail0:4"}]}}
    gone, new = diff(tmp_path, ibnetdiscover_ports, **over)
    blank = " " * 36
    assert gone == [
        "SW     2  9 0xb83fd203006a0001 4x NDR - SW    11  4 0xb83fd203006a000a "
        "( 'spine02' - 'leaf-r02-rail0' )",
        "SW    11  4 0xb83fd203006a000a 4x NDR - SW     2  9 0xb83fd203006a0001 "
        "( 'leaf-r02-rail0' - 'spine02' )",
    ]
    assert new == [
        f"SW     2  9 0xb83fd203006a0001 4x ???{blank}'spine02'",
        f"SW    11  4 0xb83fd203006a000a 4x ???{blank}'leaf-r02-rail0'",
    ]
    # a port without a link counts nothing: its traffic counters stop
    fab = fabric(tmp_path, **over)
    assert _counters(fab, 11, 5)[4] == _counters(fab, 11, 50)[4]


def test_subnet_managers(tmp_path: Path) -> None:
    fab = fabric(tmp_path)
    master = SmInfo(1, "0xb83fd203006a0000", 52731, 14, "MASTER")
    standby = SmInfo(2, "0xb83fd203006a0001", 52704, 12, "STANDBY")
    assert parse_sminfo(sminfo(fab)) == master
    assert parse_saquery_smir(saquery_smir(fab)) == (master, standby)
    two = fabric(tmp_path, fabric={"faults": ["sm_two_masters"]})
    assert parse_sminfo(sminfo(two)) == master
    assert parse_saquery_smir(saquery_smir(two)) == (
        master,
        SmInfo(2, standby.guid, 52704, 12, "MASTER"),
    )
    assert fab.sm_running and not fabric(tmp_path, fabric={"faults": ["sm_none"]}).sm_running


def test_old_switch_firmware(tmp_path: Path) -> None:
    fab = fabric(tmp_path, fabric={"faults": [{"switch_old_firmware": "leaf-r01-rail5"}]})
    versions = {s.name: parse_switch_firmware(flint_query(s), s.lid).version for s in fab.switches}
    assert versions.pop("leaf-r01-rail5") == "31.2010.4100"
    assert set(versions.values()) == {"31.2012.1068"}


def _sysfs_changes(tmp_path: Path, faults: list[Any]) -> dict[str, tuple[Any, Any]]:
    """The node's files that a fault changes: path -> (healthy, faulty)."""
    healthy = hca.PROVIDER.files(model(tmp_path).node("gpu002"))
    faulty = hca.PROVIDER.files(model(tmp_path, faults={"gpu002": faults}).node("gpu002"))
    assert set(healthy) == set(faulty)
    return {p: (healthy[p], faulty[p]) for p in healthy if healthy[p] != faulty[p]}


def test_sysfs_changes_of_the_node_faults(tmp_path: Path) -> None:
    dev = "/sys/devices/pci0000:48/0000:4b:00.0/infiniband/mlx5_2/ports/1"
    assert _sysfs_changes(tmp_path, [{"fabric_pkey_missing": "2"}]) == {
        f"{dev}/pkeys/1": ("0x8001\n", "0x0000\n")
    }
    dev = "/sys/devices/pci0000:97/0000:9a:00.0/infiniband/mlx5_4/ports/1"
    assert _sysfs_changes(tmp_path, ["fabric_rail_unplugged"]) == {
        f"{dev}/state": ("4: ACTIVE\n", "1: DOWN\n"),
        f"{dev}/phys_state": ("5: LinkUp\n", "2: Polling\n"),
        f"{dev}/rate": ("400 Gb/sec (4X NDR)\n", "40 Gb/sec (4X QDR)\n"),
    }
    # the switch-side and cabling faults leave the host's files alone
    for fault in ("fabric_rails_swapped", "fabric_switch_port_2x", "fabric_symbol_errors"):
        assert _sysfs_changes(tmp_path, [fault]) == {}


def test_missing_partition_key(tmp_path: Path) -> None:
    node = model(tmp_path, faults={"gpu002": [{"fabric_pkey_missing": "2"}]}).node("gpu002")
    tables = {d.name: d.pkeys[:3] for d in node_hcas(node)}
    assert tables["mlx5_2"] == ("0xffff", "0x0000", "0x0000")
    assert tables["mlx5_1"] == ("0xffff", "0x8001", "0x0000")
    assert tables["mlx5_bond_0"] == ("0xffff", "0x0000", "0x0000")


def test_host_faults_carry_over(tmp_path: Path) -> None:
    faults = {"gpu002": [{"hca_port_2x": "mlx5_1"}], "gpu003": [{"hca_missing": "mlx5_0"}]}
    report = parse_ibnetdiscover_ports(ibnetdiscover_ports(fabric(tmp_path, faults=faults)))
    by = {(ln.local.description, ln.local.port): ln for ln in report.lines}
    assert by[("gpu002 mlx5_1", 1)].width == "2x" and by[("leaf-r01-rail1", 2)].width == "2x"
    assert ("gpu003 mlx5_0", 1) not in by and by[("leaf-r02-rail0", 1)].remote is None


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"fabric": {"spine": 2}}, "unknown keys ['spine']"),
        ({"fabric": {"spines": 1, "faults": ["sm_two_masters"]}}, "needs a second spine"),
        ({"fabric": {"faults": [{"uplink_down": "spine01"}]}}, "'spine01' names no leaf"),
        ({"fabric": {"faults": [{"uplink_down": "leaf-r01-rail0:2"}]}}, "is not an uplink"),
        ({"fabric": {"faults": [{"switch_old_firmware": "leaf9"}]}}, "no switch 'leaf9'"),
        ({"fabric": {"faults": ["nope"]}}, "unknown fault 'nope'"),
        ({"fabric": {"switch_ports": 3}}, "exceed 3"),
        ({"fabric": {"spines": 3, "uplinks_per_leaf": 4}}, "one must divide the other"),
        ({"fabric": {"switch_ports": 300}}, "expected a whole number 1-254"),
        ({"faults": {"gpu001": [{"fabric_rail_unplugged": "9"}]}}, "rail '9' is not 0-7"),
        ({"faults": {"gpu001": [{"fabric_rails_swapped": "2"}]}}, "is not 'A,B'"),
    ],
)
def test_bad_fabric_models(tmp_path: Path, over: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        fabric(tmp_path, **over)


def test_observer_tools_on_a_built_node(tmp_path: Path) -> None:
    """The tools as a stage script runs them (the node's fast path), answered from the fleet's
    shared fabric files; perfquery's counters at least those of the build time."""
    doc = {
        **BASE,
        "faults": {
            "gpu001": ["fabric_rail_unplugged", {"fabric_pkey_missing": "0"}],
            "gpu002": [{"fabric_symbol_errors": "0"}],
        },
        "fabric": {
            "faults": [{"switch_old_firmware": "spine02"}, {"uplink_xmit_wait": "leaf-r01-rail0"}]
        },
    }
    fleet = build(tmp_path, doc)
    # the flows under load (sim/perftest_sim.py, from the flow model) left 12345 ticks of
    # XmitWait on LID 3 port 2: perfquery adds them to that port's counter, no other
    xmit = fleet.root / "fabric" / "traffic" / "xmit_wait.tsv"
    assert xmit.read_text() == ""  # written empty at build
    xmit.write_text("3\t2\t12345\n4\t2\t999\n")
    outs = run_script(
        fleet,
        "gpu001",
        [
            ["ibnetdiscover", "-p", "-C", "mlx5_0", "-P", "1"],
            ["sminfo", "-C", "mlx5_0", "-P", "1"],
            ["saquery", "-P", "1", "-C", "mlx5_0", "SMIR"],
            ["perfquery", "-x", "-l", "-C", "mlx5_0", "-P", "1", "3"],
            ["flint", "-d", "lid-2,mlx5_0,1", "q"],
            ["ibnetdiscover", "-p", "-C", "mlx5_4", "-P", "1"],
            ["sminfo", "-C", "mlx5_9", "-P", "1"],
            ["perfquery", "-x", "-l", "-C", "mlx5_0", "-P", "1", "99"],
            ["saquery", "-C", "mlx5_4", "-P", "1", "SMIR"],
            "grep -H . /sys/class/infiniband/mlx5_0/ports/*/pkeys/*",
        ],
    )
    fab = build_fabric(load_model(tmp_path / "model.yaml", known_faults()))
    assert (outs[0].rc, outs[0].stdout) == (0, ibnetdiscover_ports(fab))
    assert (outs[1].rc, outs[1].stdout) == (0, sminfo(fab))
    assert (outs[2].rc, outs[2].stdout) == (0, saquery_smir(fab))
    ports = parse_perfquery_extended(outs[3].stdout)
    assert [p.port for p in ports] == list(range(1, 65)) and outs[3].rc == 0
    assert parse_switch_firmware(outs[4].stdout, 2).version == "31.2010.4100"
    assert outs[4].stdout == flint_query(fab.switch("spine02"))
    assert (outs[5].rc, outs[5].stdout) == (
        255,
        "ibnetdiscover: iberror: failed: discover failed\n\n",
    )
    assert (outs[6].rc, outs[6].stdout) == (
        255,
        "sminfo: iberror: failed: Failed to open 'mlx5_9' port '1'\n",
    )
    assert (outs[7].rc, outs[7].stdout) == (
        255,
        "perfquery: iberror: failed: smp query nodeinfo failed\n",
    )
    assert (outs[8].rc, outs[8].stdout) == (255, "")
    assert outs[8].stderr.endswith("main: Failed to bind to the SA: Success\n")
    pkeys = parse_pkeys(outs[9].stdout)
    assert pkeys == (PkeyEntry("mlx5_0", 1, 0, 0x7FFF, True),)
    # the node's awk prints what perfquery_text does at the seconds since the build (read back
    # from a linked port's PortXmitData), symbol errors and the starved uplink included
    sw = fab.by_lid(3)
    assert sw is not None
    start = (3 * 1000 + 1) * BASE_FACTORS["PortXmitData"]
    t, rest = divmod(ports[0].counters["PortXmitData"] - start, LINK_RATES["PortXmitData"])
    assert rest == 0 and t >= 0
    idle = {p.port: p.counters for p in parse_perfquery_extended(perfquery_text(fab, sw, t))}
    got = {p.port: dict(p.counters) for p in ports}
    assert got[2].pop("PortXmitWait") == idle[2]["PortXmitWait"] + 12345
    assert {k: v for k, v in idle[2].items() if k != "PortXmitWait"} == got.pop(2)
    assert got == {k: dict(v) for k, v in idle.items() if k != 2}
    rates = {p.port: p.counters for p in ports}
    assert rates[2]["SymbolErrorCounter"] == 30 * t and rates[1]["SymbolErrorCounter"] == 0


def test_no_subnet_manager_on_a_built_node(tmp_path: Path) -> None:
    fleet = build(tmp_path, {**BASE, "fabric": {"faults": ["sm_none"]}})
    sm, sa = run_script(
        fleet, "gpu002", [["sminfo", "-C", "mlx5_1", "-P", "1"], ["saquery", "SMIR"]]
    )
    assert (sm.rc, sm.stdout) == (255, "sminfo: iberror: failed: query\n")
    assert sm.stderr.endswith("mad_rpc: _do_madrpc failed; dport (Lid 1)\n")
    assert (sa.rc, sa.stdout) == (110, "")
    assert sa.stderr.endswith(
        "sa_query: umad_recv failed: attr 0x18: Connection timed out\n\n"
        "Query SA failed: Connection timed out\n"
    )


def test_roce_rails_are_not_on_the_infiniband_fabric(tmp_path: Path) -> None:
    fab = fabric(tmp_path, hardware={"hca": {"link_layer": "Ethernet"}})
    assert fab.cas == ()
    assert all(link.remote is not None and link.remote.kind == "SW" for link in fab.ports.values())


def test_the_stage_loops_over_every_switch(tmp_path: Path) -> None:
    """The fabric stage's loops (one command per read): every switch's counters and firmware."""
    fleet = build(tmp_path, {**BASE, "fabric": {"faults": [{"switch_old_firmware": "spine02"}]}})
    lids = (
        "$(ibnetdiscover -p -C mlx5_0 -P 1 | awk '$1==\"SW\"&&$2~/^[0-9]+$/{print $2}' | sort -un)"
    )
    counters, firmware = run_script(
        fleet,
        "gpu003",
        [
            f'for l in {lids}; do perfquery -x -l -C mlx5_0 -P 1 "$l" || exit 1; done',
            f'set -e; for l in {lids}; do echo "# lid $l"; flint -d "lid-$l,mlx5_0,1" q; done',
        ],
    )
    ports = parse_perfquery_extended(counters.stdout)
    assert counters.rc == 0 and len(ports) == 18 * 64
    assert {p.lid for p in ports} == set(range(1, 19))
    fws = parse_switch_firmware_loop(firmware.stdout)
    assert [f.lid for f in fws] == list(range(1, 19))
    assert [f.lid for f in fws if f.version == "31.2010.4100"] == [2]


def test_the_flow_model_reads_the_fabrics_switches_and_its_uplink_down(tmp_path: Path) -> None:
    """One definition of an uplink down: the fabric's fault darkens the port, and the flow
    model's topology (sim/tools/traffic.py) carries the same uplink as down, so the flows
    avoid it; the model's leaves are the fabric's switches (LID, host ports, uplinks)."""
    from nodegate.sim.flowmodel import Fabric as FlowFabric
    from nodegate.sim.tools.traffic import topology

    over = {"fabric": {"uplinks_per_leaf": 2, "faults": [{"uplink_down": "leaf-r01-rail0"}]}}
    m = model(tmp_path, **over)
    fab = build_fabric(m)
    doc = topology(m, fab)
    leaf = fab.switch("leaf-r01-rail0")
    sw = doc["switches"]["leaf01|0"]
    assert (sw["lid"], sw["hosts"]) == (leaf.lid, {"gpu001": 1, "gpu002": 2})
    assert [u[0] for u in sw["uplinks"]] == [3, 4] and [u[3] for u in sw["uplinks"]] == [
        False,
        True,
    ]
    assert (leaf.lid, 3) not in fab.ports and (leaf.lid, 4) in fab.ports  # dark, linked
    assert doc["uplinks"] == 2  # the fabric's uplinks_per_leaf, the model's too
    flows = FlowFabric(doc)
    assert [flows.uplink("leaf01", 0, i) for i in range(2)] == [1, 1]  # both on the one up
    assert [flows.uplink("leaf01", 1, i) for i in range(2)] == [0, 1]  # rail 1's leaf healthy
    assert flows.port_of(("up", "leaf01", "0", "1")) == f"{leaf.lid}:4"
    spine_lid, spine_port = sw["uplinks"][1][1], sw["uplinks"][1][2]
    assert flows.port_of(("down", "leaf01", "0", "1")) == f"{spine_lid}:{spine_port}"
    assert flows.port_of(("rx", "gpu002", "0")) == f"{leaf.lid}:2"
    assert flows.port_of(("tx", "gpu002", "0")) is None

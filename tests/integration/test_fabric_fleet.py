"""The fabric stage end to end over real SSH on a simulated fabric (sim/fabric.py): each fabric
fault blamed on exactly its node and rail, or on the switch port or cable between two named
ends (the repair list), no healthy node rejected; the subnet manager's faults on a second
fleet; an observer lost mid-stage rejects only itself."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.chaos import address_of, cut_connections, kill_orphans
from tests.integration.conftest import Run, base_model

pytestmark = pytest.mark.integration

PROFILE = """\
name: fabric-site
description: generic-hgx-h100 with this site's compute partition and cabling required
extends: generic-hgx-h100
sources:
  fabric.pkeys: "the site's compute partition 0x0001 (the simulated SM's partitions.conf)"
fabric:
  subnets:
    - name: compute
      rails: [0, 1, 2, 3, 4, 5, 6, 7]
      sm: {priority: {min: 14}, guid: null}
  observers: {per_subnet: 2}
  cabling: {required: true, naming: null}
  link: {width: {equal: 4x}, speed: {equal: NDR}}
  uplinks: {count: null, width: {equal: 4x}, speed: {equal: NDR}}
  counters:
    window_s: 1
    max_delta:
      SymbolErrorCounter: {max: 0, unit: errors}
      LinkErrorRecoveryCounter: {max: 0, unit: errors}
      LinkDownedCounter: {max: 0, unit: errors}
      PortRcvErrors: {max: 0, unit: errors}
      PortRcvRemotePhysicalErrors: {max: 0, unit: errors}
      PortXmitDiscards: {max: 0, unit: errors}
      ExcessiveBufferOverrunErrors: {max: 0, unit: errors}
      LocalLinkIntegrityErrors: {max: 0, unit: errors}
    xmit_wait_rate: {max: 1000, unit: ticks/s}
  switch_firmware: {min: "31.2012.1068", uniform: true}
  pkeys: {required: ["0x7fff", "0x0001"], full_member: true}
  timeouts: {discover_s: 60, query_s: 30}
"""


def rail(i: int, leaf: str) -> str:
    return f"mlx5_{i} (rail {i}) -> {leaf}"


def cabled(fleet: Any, tmp: Path, profile: str = "fabric-site") -> tuple[Path, Path]:
    """The fleet's inventory with every rail's cable as planned (the sim's healthy cabling, as
    an operator's cabling plan gives it) and the site profile; (inventory, profiles dir)."""
    root = Path(fleet.fleet.root)
    plan = json.loads((root / "fabric" / "topology.json").read_text())["expected"]
    inv = yaml.safe_load((root / "inventory.yaml").read_text())
    inv["defaults"]["profile"] = profile
    for node, rails in plan.items():
        spec = inv["nodes"].setdefault(node, {})
        spec.setdefault("data_plane", {})["rails"] = {
            str(r): {"switch": c["switch"], "port": c["port"]} for r, c in rails.items()
        }
    path = tmp / "inventory-cabled.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    profiles = tmp / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "fabric-site.yaml").write_text(PROFILE)
    return path, profiles


NODE_FAULTS = {
    "gpu002": [{"fabric_rails_swapped": "2,3"}],
    "gpu003": [{"fabric_rail_wrong_leaf": "5"}],
    "gpu004": [{"fabric_switch_port_2x": "1"}],
    "gpu005": [{"fabric_symbol_errors": "4"}],
    "gpu006": [{"fabric_pkey_missing": "0"}],
    "gpu007": [{"fabric_rail_unplugged": "6"}],
    "gpu010": [{"fabric_switch_port_hdr": "7"}],
}
# node -> every fabric verdict that did not pass, (check, component, status)
FAILING = {
    "gpu002": {
        ("fabric.cable.expected", rail(2, "leaf-r01-rail2 P2"), "fail"),
        ("fabric.cable.expected", rail(3, "leaf-r01-rail3 P2"), "fail"),
    },
    "gpu003": {("fabric.cable.expected", rail(5, "leaf-r01-rail5 P3"), "fail")},
    "gpu004": {("fabric.link", rail(1, "leaf-r01-rail1 P4"), "fail")},
    "gpu005": {("fabric.switch_port.errors", rail(4, "leaf-r01-rail4 P5"), "fail")},
    "gpu006": {("fabric.pkey", "mlx5_0 (rail 0)", "fail")},
    "gpu007": {  # unplugged: nothing on the switch side to judge but the missing partner
        ("fabric.cable.expected", rail(6, "leaf-r02-rail6 P1"), "fail"),
        ("fabric.link", "mlx5_6 (rail 6)", "error"),
        ("fabric.switch_port.errors", "mlx5_6 (rail 6)", "error"),
        ("fabric.xmit_wait", "mlx5_6 (rail 6)", "error"),
    },
    "gpu010": {("fabric.link", rail(7, "leaf-r02-rail7 P4"), "fail")},
}
# (node, check, component) -> (observed, expected, message) of the fault's own verdict
SAID = {
    ("gpu002", "fabric.cable.expected", rail(2, "leaf-r01-rail2 P2")): (
        "leaf-r01-rail3 P2", "leaf-r01-rail2 P2",
        "rails 2 and 3 swapped: mlx5_2 lands on leaf-r01-rail3 P2, mlx5_3's expected port",
    ),
    ("gpu003", "fabric.cable.expected", rail(5, "leaf-r01-rail5 P3")): (
        "leaf-r01-rail6 P11", "leaf-r01-rail5 P3",
        "mlx5_5 (rail 5) lands on leaf-r01-rail6 P11, expected leaf-r01-rail5 P3 "
        "(inventory data_plane.rails.5)",
    ),
    ("gpu007", "fabric.cable.expected", rail(6, "leaf-r02-rail6 P1")): (
        "no link partner", "leaf-r02-rail6 P1",
        "mlx5_6 (rail 6): no link partner (the port is not in the discovered fabric); "
        "leaf-r02-rail6 P1 has no link partner",
    ),
    ("gpu004", "fabric.link", rail(1, "leaf-r01-rail1 P4")): (
        "2x NDR", "4x NDR",
        "leaf-r01-rail1 P4 (switch side of mlx5_1) links at 2x NDR, not 4x NDR",
    ),
    ("gpu010", "fabric.link", rail(7, "leaf-r02-rail7 P4")): (
        "4x HDR", "4x NDR",
        "leaf-r02-rail7 P4 (switch side of mlx5_7) links at 4x HDR, not 4x NDR",
    ),
    ("gpu006", "fabric.pkey", "mlx5_0 (rail 0)"): ("0x7fff", "0x7fff, 0x0001", "0x0001 missing"),
}  # fmt: skip
# The repair list: (component, check, nodes behind it); the XmitWait rate itself depends on
# the time between the reads, so only its unit and threshold are pinned.
REPAIRS = [
    ("leaf-r01-rail5 P7 -> spine01 P6", "fabric.uplinks",
     ["gpu001", "gpu002", "gpu004", "gpu005", "gpu006"]),
    ("leaf-r02-rail0", "fabric.switch.firmware",
     ["gpu007", "gpu008", "gpu009", "gpu010", "gpu011", "gpu012"]),
    ("leaf-r02-rail3 P7 (uplink)", "fabric.uplinks",
     ["gpu007", "gpu008", "gpu009", "gpu010", "gpu011", "gpu012"]),
]  # fmt: skip


def verdicts(run: Any) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = run.verdicts["verdicts"]
    return got


def test_fabric_faults_blamed_exactly(sim_fleet: Any, tmp_path: Path) -> None:
    """One fleet, a fault per node (or per switch part), none in another's way: each node
    rejected for exactly its fault, the infrastructure faults on the repair list only."""
    model = base_model(12, faults=NODE_FAULTS, racks={"nodes_per_rack": 6})
    model["fabric"] = {
        "faults": [
            "uplink_down:leaf-r02-rail3",
            "uplink_xmit_wait:leaf-r01-rail5",
            "switch_old_firmware:leaf-r02-rail0",
        ]
    }
    fleet = sim_fleet(model)
    inv, profiles = cabled(fleet, tmp_path)
    run = fleet.run("-m", "reach or hca or fabric", "--profiles-dir", str(profiles), inventory=inv)
    assert run.rc == 1, run.stdout[-3000:]
    vs = verdicts(run)
    got: dict[str, set[tuple[str, str, str]]] = {}
    for v in vs:
        if v["check"].startswith("fabric.") and v["status"] != "pass":
            got.setdefault(v["node"], set()).add((v["check"], v["component"], v["status"]))
    assert got == FAILING
    for key, want in SAID.items():
        (v,) = [v for v in vs if (v["node"], v["check"], v["component"]) == key]
        assert (v["observed"], v["expected"], v["message"]) == want, v
        assert v["evidence"], v
    rejected = run.rejected()
    assert sorted(rejected) == sorted(FAILING)
    # gpu007's unplugged rail is the hca stage's too (its host port is DOWN)
    hca = {r["check"] for r in rejected["gpu007"] if not r["check"].startswith("fabric.")}
    assert hca == {"hca.port.state", "hca.port.width", "hca.port.speed", "hca.port.rate"}
    infra = run.admission["infrastructure"]
    assert [(i["component"], i["check"], i["nodes"]) for i in infra] == REPAIRS
    assert (infra[0]["expected"], infra[0]["unit"]) == ("<= 1000", "ticks/s")
    assert infra[0]["observed"] > 1000
    assert (infra[1]["observed"], infra[1]["expected"], infra[1]["message"]) == (
        "31.2010.4100",
        ">= 31.2012.1068",
        "leaf-r02-rail0 runs firmware 31.2010.4100",
    )
    assert infra[2]["message"] == (
        "leaf-r02-rail3 has 1 uplinks to the spines, expected 2 (as most leaves): "
        "P7 has no link partner"
    )
    assert "REPAIR 3 infrastructure faults (their nodes are not rejected for them):" in run.stdout
    # healthy nodes behind a degraded leaf are not rejected, only marked
    assert run.passed() == ["gpu001", "gpu008", "gpu009", "gpu011", "gpu012"]
    # report.html: the repair list, and the fabric drawn with the faulty cables and leaves
    html = (run.run_dir / "report.html").read_text()
    assert html.count('<tr class="repair">') == 3
    assert html.count('class="bad-cable"') == 2  # the starved uplink, the one gone dark
    bad_leaves = re.findall(r'<g class="leaf bad-part">.*?<text[^>]*>([^<]+)</text>', html)
    # replayed from its evidence (fleet stopped): the same plan, observers and verdicts
    fleet.fleet.stop()
    replay = ("--transport=replay", f"--replay={run.run_dir / 'raw'}")
    again = fleet.run(
        "-m", "reach or hca or fabric", "--profiles-dir", str(profiles), *replay, inventory=inv
    )
    keys = ("check", "node", "component", "status", "observed", "expected", "message")
    assert sorted(tuple(json.dumps(v[k]) for k in keys) for v in verdicts(again)) == sorted(
        tuple(json.dumps(v[k]) for k in keys) for v in vs
    )
    assert again.admission["infrastructure"] == infra
    # the leaves a failing rail lands on (expected side), or with a repair-list fault
    assert sorted(bad_leaves) == [
        "leaf-r01-rail1", "leaf-r01-rail2", "leaf-r01-rail3", "leaf-r01-rail4",
        "leaf-r01-rail5", "leaf-r02-rail0", "leaf-r02-rail3", "leaf-r02-rail6", "leaf-r02-rail7",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "observed", "message"),
    [
        ("sm_none", "no MASTER",
         "subnet compute has no MASTER SM (sminfo and saquery SMIR get no answer from an SM)"),
        ("sm_two_masters", "2 MASTERs: 0xb83fd203006a0000 (lid 1), 0xb83fd203006a0001 (lid 2)",
         "subnet compute has 2 MASTER SMs: 0xb83fd203006a0000 (lid 1), "
         "0xb83fd203006a0001 (lid 2)"),
    ],
    ids=["no-master", "two-masters"],
)  # fmt: skip
def test_subnet_manager_faults_reject_nobody(
    sim_fleet: Any, tmp_path: Path, fault: str, observed: str, message: str
) -> None:
    model = base_model(2)
    model["fabric"] = {"faults": [fault]}
    fleet = sim_fleet(model)
    inv, profiles = cabled(fleet, tmp_path)
    run = fleet.run("-m", "reach or fabric", "--profiles-dir", str(profiles), inventory=inv)
    assert run.rc == 6, run.stdout[-3000:]  # not qualified (a -m run), nobody rejected
    assert run.rejected() == {}
    sm = [v for v in verdicts(run) if v["check"] == "fabric.sm"]
    assert [(v["node"], v["status"], v["observed"]) for v in sm] == [
        ("gpu001", "pass", observed), ("gpu002", "pass", observed),
    ]  # fmt: skip
    (item,) = run.admission["infrastructure"]
    assert (item["component"], item["check"], item["message"], item["nodes"]) == (
        "subnet compute SM", "fabric.sm", message, ["gpu001", "gpu002"],
    )  # fmt: skip


def _waiting(mark: bytes, argv: bytes) -> bool:
    """A process of the node (its NG_NODE mark) runs exactly `argv` (NUL-separated)."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if (proc / "cmdline").read_bytes() == argv and mark in (
                proc / "environ"
            ).read_bytes().split(b"\0"):
                return True
    return False


def test_an_observer_lost_mid_stage_rejects_only_itself(sim_fleet: Any, tmp_path: Path) -> None:
    """gpu001, the first observer, is cut while it waits between its two counter reads: the
    second observer's reading judges every node, gpu001 alone is not admitted (ERROR: its
    session was lost), nobody FAILs."""
    fleet = sim_fleet(base_model(4))
    inv, profiles = cabled(fleet, tmp_path)
    (profiles / "fabric-site.yaml").write_text(PROFILE.replace("window_s: 1", "window_s: 3"))
    fleet.inventory.write_text(inv.read_text())
    root, addr = Path(fleet.fleet.root), address_of(fleet, "gpu001")
    mark = f"NG_NODE={root}/by-addr/{addr}".encode()
    proc, run_dir = fleet.start("-m", "reach or fabric", "--profiles-dir", str(profiles))
    try:
        for _ in range(1200):  # the run reaches the window in seconds; 60 s at most
            if _waiting(mark, b"sleep\x003\x00"):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("gpu001 never reached the counter window")
        assert cut_connections(root, [addr])
        kill_orphans(fleet, "gpu001")
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = Run(proc.returncode, out, run_dir)
    assert sorted(run.rejected()) == ["gpu001"], out[-3000:]
    vs = [v for v in verdicts(run) if v["check"].startswith("fabric.")]
    assert {v["status"] for v in vs if v["node"] == "gpu001"} == {"error"}
    assert not [v for v in vs if v["node"] != "gpu001" and v["status"] != "pass"]
    cable = [v for v in vs if v["check"] == "fabric.cable.expected" and v["node"] == "gpu003"]
    assert all("raw/gpu002/fabric.json.gz#ibnetdiscover_compute" in v["evidence"] for v in cable)


def test_golden_snapshot_finds_a_moved_cable(sim_fleet: Any, tmp_path: Path) -> None:
    """`nodegate fabric snapshot` of a known-good run; the same fabric after maintenance (two
    rails of gpu002 swapped, an uplink unplugged) diffed against it names both cables."""
    good = sim_fleet(base_model(3))
    _, profiles = cabled(good, tmp_path)  # the site profile (cabling required), for later
    run = good.run("-m", "reach or fabric")  # the shipped profile: cabling not required
    assert (run.rc, run.rejected()) == (6, {}), run.stdout[-3000:]
    snap = tmp_path / "golden.json"
    p = subprocess.run(
        [sys.executable, "-m", "nodegate.cli", "fabric", "snapshot", str(run.run_dir), "--out",
         str(snap)], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    assert p.stdout == (
        f"subnet compute: 3 nodes, 24 rail cables, 8 leaves, 16 uplinks -> {snap}\n"
    )
    doc = json.loads(snap.read_text())
    assert doc["subnets"]["compute"]["nodes"]["gpu002"]["mlx5_3"] == {
        "switch": "leaf-r01-rail3", "port": 2,
    }  # fmt: skip
    moved = base_model(3, faults={"gpu002": [{"fabric_rails_swapped": "3,4"}]})
    moved["fabric"] = {"faults": ["uplink_down:leaf-r01-rail6:5"]}
    after = sim_fleet(moved)
    inv = yaml.safe_load(after.inventory.read_text())
    inv["defaults"]["profile"] = "fabric-site"
    inv.setdefault("settings", {})["fabric_snapshot"] = str(snap)
    after.inventory.write_text(yaml.safe_dump(inv, sort_keys=False))
    run = after.run("-m", "reach or fabric", "--profiles-dir", str(profiles))
    assert run.rc == 1, run.stdout[-3000:]
    fabric = [v for v in verdicts(run) if v["check"].startswith("fabric.")]
    bad = {(v["node"], v["check"], v["component"], v["status"], v["observed"], v["expected"])
           for v in fabric if v["status"] != "pass"}  # fmt: skip
    assert bad == {
        ("gpu002", "fabric.cable.expected", "mlx5_3 (rail 3) -> leaf-r01-rail3 P2", "fail",
         "leaf-r01-rail4 P2", "leaf-r01-rail3 P2"),
        ("gpu002", "fabric.cable.expected", "mlx5_4 (rail 4) -> leaf-r01-rail4 P2", "fail",
         "leaf-r01-rail3 P2", "leaf-r01-rail4 P2"),
    }  # fmt: skip
    (why,) = {v["message"] for v in verdicts(run) if v["node"] == "gpu002"
              and v["component"] == "mlx5_3 (rail 3) -> leaf-r01-rail3 P2"}  # fmt: skip
    assert why == (
        "rails 3 and 4 swapped: mlx5_3 lands on leaf-r01-rail4 P2, mlx5_4's expected port"
    )
    (item,) = run.admission["infrastructure"]
    assert (item["component"], item["observed"], item["expected"], item["nodes"]) == (
        "leaf-r01-rail6 P5 -> spine02 P7", "no link partner", "spine02 P7 (snapshot)",
        ["gpu001", "gpu002", "gpu003"],
    )  # fmt: skip


def test_ib_pairs_names_a_suspect_path_by_the_discovered_leaves(sim_fleet: Any) -> None:
    """After the fabric stage, ib_pairs pairs by the discovered leaves and names a path that
    fails while both ends clear by each rail's own switches (not the `leaf` labels)."""
    model = base_model(8, racks={"nodes_per_rack": 2})
    model["faults"] = {"gpu[001-002]": [{"bad_link": "leaf03"}]}
    run = sim_fleet(model).run("-m", "reach or fabric or ib_pairs")
    assert run.rc == 6, run.stdout[-3000:]  # nobody rejected (a -m run: not qualified)
    loc = json.loads((run.run_dir / "ib_pairs" / "localization-generic-hgx-h100.json").read_text())
    assert sorted((tuple(p["leaves"]), p["rail"]) for p in loc["suspect_paths"]) == [
        ((f"leaf-r01-rail{r}", f"leaf-r03-rail{r}"), r) for r in range(8)
    ]


def test_a_fabric_no_observer_can_discover_is_error_never_a_pass(sim_fleet: Any) -> None:
    """Both observers' ibnetdiscover print garbage: every check that needs the topology is
    ERROR for every node (none PASSes or FAILs); the SM (saquery still answered) and each
    node's own partition keys are judged."""
    garbage = [{"garbage": "ibnetdiscover"}]
    run = sim_fleet(base_model(3, faults={"gpu001": garbage, "gpu002": garbage})).run(
        "-m", "reach or fabric"
    )
    assert run.rc == 1, run.stdout[-3000:]
    assert sorted(run.rejected()) == ["gpu001", "gpu002", "gpu003"]
    vs = [v for v in verdicts(run) if v["check"].startswith("fabric.")]
    assert {(v["check"], v["status"]) for v in vs if v["status"] != "error"} == {
        ("fabric.pkey", "pass"), ("fabric.sm", "pass"),
    }  # fmt: skip
    mine = [
        v for v in vs if v["node"] == "gpu003" and v["check"] not in ("fabric.pkey", "fabric.sm")
    ]
    assert len(mine) == 8 * 4 + 2  # 8 rails x 4 rail checks, firmware, uplinks
    firmware = [v for v in mine if v["check"] == "fabric.switch.firmware"]
    (why,) = {v["message"] for v in mine if v not in firmware}
    assert why.startswith(
        "subnet compute not read by any observer (gpu001: unrecognized output of "
        "`ibnetdiscover -p -C mlx5_0 -P 1`: line 1: not a ports-report line:"
    ), why
    # the firmware loop finds no switch LID in what ibnetdiscover printed: not read either
    (fw,) = firmware
    assert fw["message"].startswith(
        "subnet compute not read by any observer (gpu001: unrecognized output of `sh -c "
    ), fw

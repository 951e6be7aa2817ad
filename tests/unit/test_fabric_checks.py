"""The fabric stage on a small rail-optimized fabric written in the real tools' formats
(tests/fabric_texts.py): each fault blamed on its node and rail or on the infrastructure part,
healthy nodes untouched, and a fabric nobody could read an ERROR for its nodes, never a pass."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from nodegate.admission.infrastructure import infrastructure_items
from nodegate.core.values import Status, Verdict
from nodegate.profiles import Profile, ProfileLibrary
from nodegate.stages.fabric import STAGE
from nodegate.stages.fabric.profile import fabric_profile

from tests.fabric_run import FabricTransport, run_fabric
from tests.fabric_texts import Fabric

REPO = Path(__file__).resolve().parents[2]
LIB = ProfileLibrary([REPO / "inventories" / "profiles"])
PROFILE = LIB.get("generic-hgx-h100")
INFRA = {c.id for c in STAGE.checks if c.infrastructure}
NODES = ["gpu001", "gpu002", "gpu003", "gpu004"]
FAULTS = Fabric(
    swapped={"gpu002": (3, 4)},
    unplugged={("gpu003", 1)},
    narrow={("gpu004", 2): "2x"},
    rising={
        ("leaf-r01-rail5", 1): {"SymbolErrorCounter": 40},
        ("leaf-r01-rail6", 1): {"PortXmitWait": 50000},
        ("leaf-r01-rail7", 33): {"PortXmitWait": 90000},
    },
    uplink_down={("leaf-r02-rail7", 1)},
    pkeys={("gpu004", 0): ["0x8001"]},
)


def bad(vs: list[Verdict]) -> list[tuple[str, str, str, str]]:
    return sorted(
        (v.node, v.check, v.status.value, v.component) for v in vs if v.status is not Status.PASS
    )


def with_fabric(**changes: Any) -> Profile:
    data = copy.deepcopy(dict(PROFILE.data))
    data["fabric"].update(changes)
    return Profile("fab-" + "-".join(sorted(changes)), "test", data)


def test_every_fault_blamed_on_its_node_and_rail(tmp_path: Path) -> None:
    vs = run_fabric(FAULTS, PROFILE, tmp_path)
    assert bad(vs) == [
        ("gpu001", "fabric.switch_port.errors", "fail", "mlx5_5 (rail 5) -> leaf-r01-rail5 P1"),
        ("gpu001", "fabric.xmit_wait", "fail", "mlx5_6 (rail 6) -> leaf-r01-rail6 P1"),
        ("gpu002", "fabric.cable.expected", "fail", "mlx5_3 (rail 3) -> leaf-r01-rail3 P2"),
        ("gpu002", "fabric.cable.expected", "fail", "mlx5_4 (rail 4) -> leaf-r01-rail4 P2"),
        ("gpu003", "fabric.cable.expected", "fail", "mlx5_1 (rail 1) -> leaf-r02-rail1 P1"),
        ("gpu003", "fabric.link", "error", "mlx5_1 (rail 1)"),
        ("gpu003", "fabric.switch_port.errors", "error", "mlx5_1 (rail 1)"),
        ("gpu003", "fabric.xmit_wait", "error", "mlx5_1 (rail 1)"),
        ("gpu004", "fabric.link", "fail", "mlx5_2 (rail 2) -> leaf-r02-rail2 P2"),
        ("gpu004", "fabric.pkey", "fail", "mlx5_0 (rail 0)"),
    ]
    said = {(v.node, v.check, v.component): v for v in vs if v.status is Status.FAIL}
    swap = said[("gpu002", "fabric.cable.expected", "mlx5_3 (rail 3) -> leaf-r01-rail3 P2")]
    said_swap = (swap.observed, swap.expected, swap.message, swap.remediation)
    assert swap.remediation_class == "reseat_cable"
    assert said_swap == (
        "leaf-r01-rail4 P2", "leaf-r01-rail3 P2",
        "rails 3 and 4 swapped: mlx5_3 lands on leaf-r01-rail4 P2, mlx5_4's expected port",
        "swap the cables of mlx5_3 and mlx5_4 on gpu002",
    )  # fmt: skip
    gone = said[("gpu003", "fabric.cable.expected", "mlx5_1 (rail 1) -> leaf-r02-rail1 P1")]
    assert (gone.observed, gone.expected) == ("no link partner", "leaf-r02-rail1 P1")
    narrow = said[("gpu004", "fabric.link", "mlx5_2 (rail 2) -> leaf-r02-rail2 P2")]
    assert (narrow.observed, narrow.expected) == ("2x NDR", "4x NDR")
    sym = said[("gpu001", "fabric.switch_port.errors", "mlx5_5 (rail 5) -> leaf-r01-rail5 P1")]
    assert (sym.observed, sym.remediation_class) == ("SymbolErrorCounter +40", "reseat_cable")
    wait = said[("gpu001", "fabric.xmit_wait", "mlx5_6 (rail 6) -> leaf-r01-rail6 P1")]
    assert (wait.observed, wait.expected, wait.unit) == (50000.0, "<= 1000", "ticks/s")
    pk = said[("gpu004", "fabric.pkey", "mlx5_0 (rail 0)")]
    assert (pk.observed, pk.expected, pk.message) == ("0x0001", "0x7fff", "0x7fff missing")
    # Evidence: the observer's discovery and the node's own GUIDs.
    assert swap.evidence[0] == "raw/gpu002/fabric.json#node_guids"
    assert "raw/gpu001/fabric.json#ibnetdiscover_compute" in swap.evidence


def test_infrastructure_faults_mark_nodes_and_make_the_repair_list(tmp_path: Path) -> None:
    vs = run_fabric(FAULTS, PROFILE, tmp_path)
    marks = sorted((v.node, v.component) for v in vs if v.check in INFRA and v.remediation)
    assert marks == [
        ("gpu001", "leaf-r01-rail7 P33 -> spine01 P8"),
        ("gpu002", "leaf-r01-rail7 P33 -> spine01 P8"),
        ("gpu003", "leaf-r02-rail7 P34 (uplink)"),
        ("gpu004", "leaf-r02-rail7 P34 (uplink)"),
    ]
    assert all(v.status is Status.PASS for v in vs if v.check in INFRA)
    items = infrastructure_items(vs, INFRA)
    for i in items:
        del i["evidence"]
    assert items == [
        {"component": "leaf-r01-rail7 P33 -> spine01 P8", "check": "fabric.uplinks",
         "observed": 90000.0, "expected": "<= 1000", "unit": "ticks/s",
         "message": "uplink leaf-r01-rail7 P33 -> spine01 P8: leaf-r01-rail7 P33 waits for "
                    "credits (90000 ticks/s)",
         "remediation": "find the congestion behind leaf-r01-rail7 P33 -> spine01 P8: a slow "
                        "receiver or too few uplinks for the traffic",
         "nodes": ["gpu001", "gpu002"]},
        {"component": "leaf-r02-rail7 P34 (uplink)", "check": "fabric.uplinks",
         "observed": "1 uplinks", "expected": "2 (as most leaves)",
         "message": "leaf-r02-rail7 has 1 uplinks to the spines, expected 2 (as most leaves): "
                    "P34 has no link partner",
         "remediation": "repair the uplink cable at leaf-r02-rail7 P34",
         "nodes": ["gpu003", "gpu004"]},
    ]  # fmt: skip


def test_a_healthy_fabric_passes_every_check(tmp_path: Path) -> None:
    vs = run_fabric(Fabric(), PROFILE, tmp_path)
    assert bad(vs) == [] and not [v for v in vs if v.remediation]
    # per node: 8 rails x 5 rail checks, one SM and one firmware verdict, 8 leaves' uplinks
    assert len(vs) == 4 * (8 * 5 + 1 + 1 + 8)


@pytest.mark.parametrize(
    ("masters", "priority", "observed", "message"),
    [
        (0, 15, "no MASTER", "subnet compute has no MASTER SM (0x0c42a10304000000 STANDBY, "
         "0x0c42a10304000001 STANDBY)"),
        (2, 15, "2 MASTERs: 0x0c42a10304000000 (lid 1), 0x0c42a10304000001 (lid 2)",
         "subnet compute has 2 MASTER SMs: 0x0c42a10304000000 (lid 1), 0x0c42a10304000001 (lid 2)"),
        (1, 12, "priority 12", "the MASTER SM of subnet compute runs at priority 12"),
    ],
    ids=["no-master", "two-masters", "priority"],
)  # fmt: skip
def test_subnet_manager_faults_are_infrastructure(
    tmp_path: Path, masters: int, priority: int, observed: str, message: str
) -> None:
    vs = run_fabric(Fabric(masters=masters, sm_priority=priority), PROFILE, tmp_path)
    assert bad(vs) == []
    sm = [v for v in vs if v.check == "fabric.sm"]
    assert sorted(v.node for v in sm) == NODES
    assert {(v.status, v.observed, v.expected, v.message) for v in sm} == {
        (Status.PASS, observed, "one MASTER, priority >= 14", f"infrastructure: {message}")
    }
    (item,) = infrastructure_items(vs, INFRA)
    assert (item["check"], item["nodes"]) == ("fabric.sm", NODES)


def test_a_lost_observer_is_replaced_by_the_next_one(tmp_path: Path) -> None:
    """gpu001 (first observer) never answers: gpu002's reading judges the fleet; only gpu001
    is ERROR (its own session), nobody FAILs."""
    t = FabricTransport(Fabric(), lost=["gpu001"])
    vs = run_fabric(Fabric(), PROFILE, tmp_path, t)
    assert {v.node for v in vs if v.status is not Status.PASS} == {"gpu001"}
    assert {v.status for v in vs if v.node == "gpu001"} == {Status.ERROR}
    assert [n for n, ids in t.ran.items() if "ibnetdiscover_compute" in ids] == ["gpu001", "gpu002"]
    cable = next(v for v in vs if v.node == "gpu003" and v.check == "fabric.cable.expected")
    assert "raw/gpu002/fabric.json#ibnetdiscover_compute" in cable.evidence


def test_every_observer_lost_is_every_subnet_node_error_never_a_fail(tmp_path: Path) -> None:
    t = FabricTransport(FAULTS, lost=["gpu001", "gpu002"])
    vs = run_fabric(FAULTS, PROFILE, tmp_path, t)
    assert not [v for v in vs if v.status is Status.FAIL and v.check != "fabric.pkey"]
    why = (
        "subnet compute not read by any observer (gpu001: lost (its session did not complete)"
        " | gpu002: lost (its session did not complete))"
    )
    for n in ("gpu003", "gpu004"):
        mine = [v for v in vs if v.node == n and v.check != "fabric.pkey"]
        assert {(v.status, v.message) for v in mine} == {(Status.ERROR, why)}


def test_a_fabric_the_observers_cannot_read_is_error(tmp_path: Path) -> None:
    t = FabricTransport(Fabric(), garbage=["gpu001", "gpu002"])
    vs = run_fabric(Fabric(), PROFILE, tmp_path, t)
    fabric_checks = [v for v in vs if v.check != "fabric.pkey"]
    assert {v.status for v in fabric_checks} == {Status.ERROR}
    assert fabric_checks[0].message.startswith(
        "subnet compute not read by any observer (gpu001: unrecognized output of "
        "`ibnetdiscover_compute`:"
    )


def test_no_observer_when_no_node_passed_the_earlier_stages(tmp_path: Path) -> None:
    t = FabricTransport(Fabric())
    vs = run_fabric(Fabric(), PROFILE, tmp_path, t, cleared=frozenset())
    assert not any("ibnetdiscover_compute" in ids for ids in t.ran.values())
    msg = (
        "subnet compute: no observer: none of its 4 nodes passed the earlier stages "
        "(an observer must have passed hca)"
    )
    assert {(v.status, v.message) for v in vs if v.check == "fabric.cable.expected"} == {
        (Status.ERROR, msg)
    }


def test_observers_named_in_the_profile_come_first(tmp_path: Path) -> None:
    t = FabricTransport(Fabric())
    prof = with_fabric(observers={"per_subnet": 1, "nodes": ["gpu004", "gpu003"]})
    run_fabric(Fabric(), prof, tmp_path, t, cleared=frozenset({"gpu001", "gpu003"}))
    assert [n for n, ids in t.ran.items() if "ibnetdiscover_compute" in ids] == ["gpu003"]


def test_the_inventory_may_name_observers(tmp_path: Path) -> None:
    t = FabricTransport(Fabric())
    prof = with_fabric(observers={"per_subnet": 2, "nodes": ["gpu002"]})
    labels = {"gpu004": {"fabric_observer": "yes"}, "gpu003": {"fabric_observer": "no"}}
    run_fabric(Fabric(), prof, tmp_path, t, labels=labels)
    assert [n for n, ids in t.ran.items() if "ibnetdiscover_compute" in ids] == ["gpu002", "gpu004"]
    assert STAGE._plan.observers == {"compute": ("gpu004", "gpu002")}


def test_rail_on_the_wrong_leaf_by_the_naming_rule(tmp_path: Path) -> None:
    """No cabling in the inventory: the profile's rule names the leaf (the port is not said)."""
    fab = Fabric(wrong_leaf={"gpu003": (2, 5)})
    prof = with_fabric(cabling={"required": True, "naming": {"switch": "leaf-{rack}-rail{rail}"}})
    vs = run_fabric(fab, prof, tmp_path, cabled=False)
    assert bad(vs) == [
        ("gpu003", "fabric.cable.expected", "fail", "mlx5_2 (rail 2) -> leaf-r02-rail2")
    ]
    v = next(v for v in vs if v.status is Status.FAIL)
    assert (v.observed, v.expected, v.message) == (
        "leaf-r02-rail5 P1",
        "leaf-r02-rail2",
        "mlx5_2 (rail 2) lands on leaf-r02-rail5 P1, expected leaf-r02-rail2 "
        "(profile fabric.cabling.naming)",
    )


def test_required_cabling_without_an_expectation_is_error(tmp_path: Path) -> None:
    prof = with_fabric(cabling={"required": True, "naming": None})
    vs = run_fabric(Fabric(), prof, tmp_path, cabled=False)
    cable = [v for v in vs if v.check == "fabric.cable.expected"]
    assert {v.status for v in cable} == {Status.ERROR} and len(cable) == 32
    assert cable[0].message == (
        "no expected cabling for mlx5_0 (rail 0): give data_plane.rails.0.switch/port in the "
        "inventory, a fabric snapshot, or fabric.cabling.naming in the profile"
    )


def test_vm_and_roce_profiles_have_no_fabric_section() -> None:
    for name in ("nd-h100-v5", "nd-h200-v5", "nd-a100-v4", "hgx-h100-roce"):
        assert LIB.get(name).data["fabric"] is None
    prof = fabric_profile(PROFILE)
    assert [s.name for s in prof.subnets] == ["compute"]
    assert prof.subnets[0].rails == tuple(range(8))


def test_switch_firmware_below_the_minimum_or_off_the_majority(tmp_path: Path) -> None:
    """An old spine marks every node (their traffic crosses it); a leaf newer than the rest
    marks only the nodes cabled to it."""
    fab = Fabric(old_firmware={"spine02": "31.2010.4100", "leaf-r02-rail3": "31.2014.1000"})
    vs = run_fabric(fab, PROFILE, tmp_path)
    assert bad(vs) == []
    items = [(i["component"], i["observed"], i["expected"], i["message"], i["nodes"])
             for i in infrastructure_items(vs, INFRA)]  # fmt: skip
    assert items == [
        ("leaf-r02-rail3", "31.2014.1000", "31.2012.1068 (as most switches)",
         "leaf-r02-rail3 runs firmware 31.2014.1000, most switches 31.2012.1068",
         ["gpu003", "gpu004"]),
        ("spine02", "31.2010.4100", ">= 31.2012.1068", "spine02 runs firmware 31.2010.4100",
         NODES),
    ]  # fmt: skip
    (fix,) = [
        i["remediation"] for i in infrastructure_items(vs, INFRA) if i["component"] == "spine02"
    ]
    assert fix == "update spine02's firmware to 31.2012.1068"


def test_a_cable_moved_since_the_baseline_is_a_regression(tmp_path: Path) -> None:
    """No expected cabling (both runs pass): A/B mode still sees gpu002's rails 3 and 4 land
    on each other's ports and calls it a regression."""
    from nodegate.compare.abtest import compare
    from nodegate.compare.baseline import baseline_doc
    from nodegate.core.results import RunResult

    def doc(fab: Fabric, run_id: str) -> dict[str, Any]:
        result = RunResult()
        for v in run_fabric(fab, PROFILE, tmp_path, cabled=False):
            result.add(v)
        ids = sorted({v.check for vs in result.verdicts.values() for v in vs})
        admission = {"run_id": run_id, "finished_at": "t", "inventory": "i", "transport": "ssh",
                     "stages": ["fabric"], "checks": ids,
                     "nodes": {n: {"profile": "p", "admitted": True} for n in NODES}}  # fmt: skip
        return baseline_doc(admission, result)

    before = doc(Fabric(), "before")
    after = doc(Fabric(swapped={"gpu002": (3, 4)}), "after")
    got = [(c.scope, c.check, c.component, c.before, c.after, c.message)
           for c in compare(before, after, {}).regressions]  # fmt: skip
    (cable,) = [c.id for c in STAGE.checks if c.placement]
    assert got == [
        ("gpu002", cable, "mlx5_3 (rail 3)", "leaf-r01-rail3 P2", "leaf-r01-rail4 P2",
         "moved since the baseline: leaf-r01-rail3 P2 -> leaf-r01-rail4 P2"),
        ("gpu002", cable, "mlx5_4 (rail 4)", "leaf-r01-rail4 P2", "leaf-r01-rail3 P2",
         "moved since the baseline: leaf-r01-rail4 P2 -> leaf-r01-rail3 P2"),
    ]  # fmt: skip


def test_a_rail_without_a_pkey_table_says_so(tmp_path: Path) -> None:
    vs = run_fabric(Fabric(pkeys={("gpu003", 6): []}), PROFILE, tmp_path)
    (v,) = [v for v in vs if v.status is not Status.PASS]
    assert (v.node, v.check, v.component, v.observed, v.message, v.remediation) == (
        "gpu003", "fabric.pkey", "mlx5_6 (rail 6)", "none",
        "mlx5_6 port 1 has no P_Key table (the device or port is absent)",
        "find why gpu003 has no mlx5_6 port 1 (the hca stage's checks)",
    )  # fmt: skip


def test_nccl_names_the_leaves_a_failing_group_crosses() -> None:
    from nodegate.stages.fabric.discovered import leaves_crossed, node_leaf
    from nodegate.stages.nccl.checks import Judge

    cabling = {
        "gpu001": {"mlx5_0": "leaf-r01-rail0", "mlx5_1": "leaf-r01-rail1"},
        "gpu009": {"mlx5_0": "leaf-r02-rail0", "mlx5_1": "leaf-r02-rail1"},
    }
    assert node_leaf(cabling, "gpu009", ["mlx5_0", "mlx5_1"]) == "leaf-r02-rail0"
    assert node_leaf(cabling, "gpu002", ["mlx5_0"]) is None
    assert leaves_crossed(cabling, ["gpu001", "gpu009", "gpu005"]) == [
        "leaf-r01-rail0", "leaf-r01-rail1", "leaf-r02-rail0", "leaf-r02-rail1",
    ]  # fmt: skip
    judge = Judge(None, None, {}, None, cabling)  # type: ignore[arg-type]
    assert judge.crossing(["gpu001", "gpu009"]) == (
        "; it crosses 4 leaves: leaf-r01-rail0, leaf-r01-rail1, leaf-r02-rail0, "
        "leaf-r02-rail1 (and their uplinks to the spines)"
    )
    assert Judge(None, None, {}, None).crossing(["gpu001"]) == ""  # type: ignore[arg-type]

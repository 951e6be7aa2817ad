"""The roce stage's checks on outputs of the simulated RoCE node (built, not started: the stage
script runs through the node's dispatcher), exact verdicts per path; the profile section, the
`roce: null` pass, and what ib_pairs takes from the section."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.core.values import CommandResult, NodeOutcome, Reach, Status, Verdict
from nodegate.framework.stage import StageContext
from nodegate.inventory import Node
from nodegate.inventory.nodes import FrozenMap, SSHSettings
from nodegate.profiles import ProfileLibrary
from nodegate.sim.fleet import Fleet
from nodegate.stages.ib_pairs.profile import ib_pairs_profile
from nodegate.stages.ib_pairs.stage import with_roce
from nodegate.stages.roce import STAGE, RoceTransport, roce_transport
from nodegate.stages.roce.checks import CHECKS
from nodegate.stages.roce.facts import build_facts
from nodegate.stages.roce.profile import RoceProfile, roce_profile
from nodegate.transport.script import command_line

from tests.simnode import build, run_script

REPO = Path(__file__).resolve().parents[2]
LIB = ProfileLibrary([REPO / "inventories" / "profiles"])
PROFILE = LIB.get("hgx-h100-roce")
PROF = roce_profile(PROFILE)
FAULTS = {"gpu002": [{"trust_pcp": "3"}], "gpu003": [{"tos_mismatch": "1"}]}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "roce-demo.yaml").read_text())
    doc.update(nodes="gpu[001-003]", faults=FAULTS)
    yield build(tmp_path_factory.mktemp("roce"), doc)


def node_of(name: str) -> Node:
    return Node(name, ("all",), FrozenMap({}), "hgx-h100-roce", SSHSettings())


def session(fleet: Fleet, node: str) -> NodeOutcome:
    """The stage's commands for `node` (window 0) run on the simulated node."""
    specs = STAGE.commands(node_of(node), PROFILE)
    specs = [replace(s, argv=("sleep", "0")) if s.argv[0] == "sleep" else s for s in specs]
    outs = run_script(fleet, node, [s.argv for s in specs])
    results = {
        s.id: CommandResult(
            s.id, command_line(s.argv), o.rc, o.stdout, o.stderr, 0.1, evidence=f"raw#{s.id}"
        )
        for s, o in zip(specs, outs, strict=True)
    }
    return NodeOutcome(node, Reach.OK, results)


def judge(out: NodeOutcome, prof: RoceProfile = PROF) -> list[Verdict]:
    return CHECKS.judge_node(out.node, build_facts(out, prof), prof)


def bad(verdicts: list[Verdict]) -> set[tuple[str, str, Status]]:
    return {(v.check, v.component, v.status) for v in verdicts if v.status is not Status.PASS}


def test_healthy_node_passes_every_rail(fleet: Fleet) -> None:
    vs = judge(session(fleet, "gpu001"))
    assert bad(vs) == set()
    node_checks = [c.id for c in CHECKS if c.scope == "node"]
    assert len(vs) == 8 * len(node_checks)
    (gid,) = [v for v in vs if v.check == "roce.gid" and v.component.endswith("(rail 3)")]
    assert (gid.component, gid.observed, gid.expected) == (
        "mlx5_3 enp92s0np0 (rail 3)",
        "index 3: RoCE v2 10.103.0.1 on enp92s0np0",
        "index 3: RoCE v2 IPv4 10.103.0.1 on enp92s0np0",
    )
    (rt,) = [v for v in vs if v.check == "roce.ip.routing" and v.component.endswith("(rail 0)")]
    assert rt.observed == "10.100.0.0/16 dev enp24s0np0 table 100, rule from 10.100.0.1 lookup 100"
    assert rt.evidence == ("raw#ip_route", "raw#ip_rule", "raw#ip_addr")


def test_trust_pcp_and_tos_mismatch(fleet: Fleet) -> None:
    rail3, rail1 = "mlx5_3 enp92s0np0 (rail 3)", "mlx5_1 enp58s0np0 (rail 1)"
    vs = judge(session(fleet, "gpu002"))
    assert bad(vs) == {
        ("roce.qos.trust", rail3, Status.FAIL),
        ("roce.qos.dscp_map", rail3, Status.ERROR),
    }
    (dm,) = [v for v in vs if v.check == "roce.qos.dscp_map" and v.component == rail3]
    assert dm.message == "not judged: no DSCP map (trust pcp, roce.qos.trust)"
    (tr,) = [v for v in vs if v.check == "roce.qos.trust" and v.component == rail3]
    assert tr.remediation == "mlnx_qos -i enp92s0np0 --trust dscp"
    vs = judge(session(fleet, "gpu003"))
    assert bad(vs) == {("roce.tos", rail1, Status.FAIL)}
    (tos,) = [v for v in vs if v.check == "roce.tos" and v.component == rail1]
    assert (tos.observed, tos.expected, tos.remediation) == (
        "default_roce_tos 0",
        "default_roce_tos 106",
        "cma_roce_tos -d mlx5_1 -t 106",
    )


def _without(out: NodeOutcome, **changes: Any) -> NodeOutcome:
    results = dict(out.results)
    for cid, change in changes.items():
        results[cid] = replace(results[cid], **change)
    return replace(out, results=results)


def test_unreadable_inputs_are_errors_never_passes(fleet: Fleet) -> None:
    out = session(fleet, "gpu001")
    files = out.results["kernel_files"].stdout
    kept = "".join(ln + "\n" for ln in files.splitlines() if "rdma_cm/mlx5_2/" not in ln)
    broken = _without(
        out,
        kernel_files={"stdout": kept, "rc": 2},
        show_gids={"stdout": "DEV\tPORT\tINDEX\n", "rc": 0},
        stats_again_5={"timed_out": True, "rc": 124},
    )
    vs = judge(broken)
    rail2, rail5 = "mlx5_2 enp75s0np0 (rail 2)", "mlx5_5 enp186s0np0 (rail 5)"
    assert bad(vs) == {
        ("roce.mode", rail2, Status.ERROR),
        ("roce.tos", rail2, Status.ERROR),
        *{("roce.gid", f"mlx5_{i} {n} (rail {i})", Status.ERROR) for i, n in _NETDEVS},
        *{(f"roce.counters.{g}", rail5, Status.ERROR) for g in ("pause", "cnp", "retransmits")},
    }
    (mode,) = [v for v in vs if v.check == "roce.mode" and v.component == rail2]
    assert mode.message == (
        "/sys/kernel/config/rdma_cm/mlx5_2/ports/1/default_roce_mode not readable (absent on "
        "the node); cma_roce_mode -d mlx5_2 -p 1 creates the rdma_cm group"
    )
    (gid,) = [v for v in vs if v.check == "roce.gid" and v.component == rail2]
    assert gid.message == (
        "unrecognized output of `show_gids`: no n_gids_found footer (truncated?)"
    )
    (pause,) = [v for v in vs if v.check == "roce.counters.pause" and v.component == rail5]
    assert pause.message == "`ethtool -S enp186s0np0` timed out after 0.1 s"


_BUSES = ["18", "3a", "4b", "5c", "9a", "ba", "ca", "da"]
_NETDEVS = [(i, f"enp{int(b, 16)}s0np0") for i, b in enumerate(_BUSES)]


def test_counter_rise_fails_with_the_window(fleet: Fleet) -> None:
    out = session(fleet, "gpu001")
    # the first link line is mlx5_0's: its np_cnp_sent rose by 7 between the reads
    again = out.results["rdma_stat_again"].stdout.replace(" np_cnp_sent 0", " np_cnp_sent 7", 1)
    vs = judge(_without(out, rdma_stat_again={"stdout": again}))
    (cnp,) = [v for v in vs if v.status is Status.FAIL]
    assert (cnp.check, cnp.component, cnp.observed) == (
        "roce.counters.cnp",
        "mlx5_0 enp24s0np0 (rail 0)",
        "np_cnp_sent +7",
    )
    assert cnp.message == (
        "mlx5_0 enp24s0np0: np_cnp_sent +7, expected np_cnp_sent <= +0, rp_cnp_handled <= +0 in 2 s"
    )


def test_a_counter_that_went_down_is_an_error_not_a_pass(fleet: Fleet) -> None:
    out = session(fleet, "gpu001")
    first = out.results["rdma_stat"].stdout.replace(" np_cnp_sent 0", " np_cnp_sent 9", 1)
    vs = judge(_without(out, rdma_stat={"stdout": first}))
    bad = [(v.check, v.component, v.status, v.message) for v in vs if v.status is not Status.PASS]
    assert bad == [
        (
            "roce.counters.cnp",
            "mlx5_0 enp24s0np0 (rail 0)",
            Status.ERROR,
            "counters went down between the reads: np_cnp_sent 9 -> 0",
        )
    ]


def test_profile_section_and_transport() -> None:
    assert roce_transport(PROFILE) == RoceTransport(3, 106)
    assert RoceTransport(3, 106).dscp == 26
    assert roce_transport(LIB.get("generic-hgx-h100")) is None
    assert [r.netdev for r in PROF.rails][:2] == ["enp24s0np0", "enp58s0np0"]
    assert list(PROF.counters.groups["pause"]) == [
        "rx_prio3_pause",
        "tx_prio3_pause",
        "tx_pause_storm_error_events",
    ]
    sec = dict(PROFILE.data["roce"])
    sec["rails"] = [dict(sec["rails"][0], table=None)]
    with pytest.raises(ConfigError, match="rail 0 needs a table"):
        RoceProfile.of(sec, "x")


def test_ib_pairs_gets_gid_index_and_tclass_on_roce_only() -> None:
    ibp = ib_pairs_profile(PROFILE)
    assert with_roce(ibp, PROFILE).method.extra_args == ("-x", "3", "--tclass", "106")
    generic = LIB.get("generic-hgx-h100")
    assert with_roce(ib_pairs_profile(generic), generic).method.extra_args == ()


class _NoTransport:
    async def run_stage(self, *a: Any, **kw: Any) -> Any:
        raise AssertionError("a node without RoCE rails runs nothing")


def test_roce_null_profile_passes_with_a_note(tmp_path: Path) -> None:
    generic = LIB.get("generic-hgx-h100")
    transport: Any = _NoTransport()
    ctx = StageContext([node_of("gpu001")], {"gpu001": generic}, transport, tmp_path)
    vs = asyncio.run(STAGE.run(ctx))
    assert {(v.check, v.status) for v in vs} == {(c.id, Status.PASS) for c in CHECKS}
    assert {v.message for v in vs} == {"profile generic-hgx-h100 has no RoCE rails (roce: null)"}


def _pretty(one_line: str) -> str:
    """iproute2 >= 6.8's layout of `rdma statistic show` (the `-p` test was dropped): the link
    alone on its line, then `    <name> <value> ` per counter (rdma/stat.c, utils.c)."""
    out = []
    for line in one_line.splitlines():
        head, port, *pairs = line.split()
        each = zip(pairs[::2], pairs[1::2], strict=True)
        out.append(f"{head} {port} " + "".join(f"\n    {n} {v} " for n, v in each))
    return "\n".join(out) + "\n"


def test_pretty_rdma_statistic_judges_the_same(fleet: Fleet) -> None:
    out = session(fleet, "gpu001")
    pretty = {
        c: {"stdout": _pretty(out.results[c].stdout)} for c in ("rdma_stat", "rdma_stat_again")
    }
    assert pretty["rdma_stat"]["stdout"] != out.results["rdma_stat"].stdout
    assert judge(_without(out, **pretty)) == judge(out)


def test_mana_counter_names_are_not_reported_never_zero(fleet: Fleet) -> None:
    """A driver without mlx5's names (Azure MANA, corpus rdma_statistic_p__azure-mana-...): the
    profile's counters are missing, an ERROR naming them, not a pass on made-up zeros."""
    mana = (REPO / "tests/fixtures/corpus/net").glob("rdma_statistic_p__azure-mana-*")
    counters = next(mana).read_text().split("\n", 1)[1]
    out = session(fleet, "gpu001")
    changes = {}
    for cid in ("rdma_stat", "rdma_stat_again"):
        lines = out.results[cid].stdout.splitlines()
        lines[0] = "link mlx5_0/1\n" + counters.rstrip("\n")
        changes[cid] = {"stdout": "\n".join(lines) + "\n"}
    vs = judge(_without(out, **changes))
    rail0 = "mlx5_0 enp24s0np0 (rail 0)"
    assert bad(vs) == {(f"roce.counters.{g}", rail0, Status.ERROR) for g in ("cnp", "retransmits")}
    (cnp,) = [v for v in vs if v.check == "roce.counters.cnp" and v.component == rail0]
    assert cnp.message == "counters not reported: np_cnp_sent, rp_cnp_handled"

"""The blast-radius guard and systemic errors (#21 item 1), the parts without a cluster: the
max_drain bound and where it comes from, the refusal of a take-out past it, and a check that
errors on most nodes turning its nodes not_qualified. The real Slurm runs in
tests/integration/test_admission_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nodegate.actions.base import ActionRecord, refusal
from nodegate.actions.slurm import SlurmAction
from nodegate.admission.gate import admission_doc, decide
from nodegate.admission.guard import SystemicRule, drain_bound, find_systemic, mark_systemic
from nodegate.core import schemas
from nodegate.core.drainlimit import DEFAULT, DrainLimit
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.settings import build_settings
from nodegate.core.values import Status, Verdict
from nodegate.inventory import load_inventory
from nodegate.profiles import Profile, ProfileLibrary
from nodegate.reports.terminal import summary_lines

from tests.unit.test_actions_slurm import XID

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("limit", "fleet", "bound", "rule"),
    [
        (DEFAULT, 4, 8, "10% or 8 nodes, whichever is larger"),
        (DEFAULT, 32, 8, "10% or 8 nodes, whichever is larger"),
        (DEFAULT, 89, 8, "10% or 8 nodes, whichever is larger"),
        (DEFAULT, 1024, 102, "10% or 8 nodes, whichever is larger"),
        (DrainLimit.parse("2"), 1024, 2, "2 nodes"),
        (DrainLimit.parse("1"), 3, 1, "1 node"),
        (DrainLimit.parse("0"), 3, 0, "0 nodes"),
        (DrainLimit.parse("25%"), 10, 2, "25%"),  # rounded down: never more than the share
        (DrainLimit.parse("12.5%"), 16, 2, "12.5%"),
        (DrainLimit.of_data({"percent": 50}), 5, 2, "50%"),
        (DrainLimit.of_data({"nodes": 3, "percent": 50}), 5, 3,
         "50% or 3 nodes, whichever is larger"),
        (DrainLimit.of_data("5%"), 100, 5, "5%"),
        (DrainLimit.of_data(4), 100, 4, "4 nodes"),
    ],
)  # fmt: skip
def test_the_bound_for_a_fleet(limit: DrainLimit, fleet: int, bound: int, rule: str) -> None:
    assert (limit.of(fleet), limit.describe()) == (bound, rule)


def build(cli: dict[str, Any], ini: dict[str, Any] | None = None) -> Any:
    return build_settings(cli, ini or {}, known_transports={"ssh"}, rootpath=Path("."))


@pytest.mark.parametrize(
    ("cli", "ini", "message"),
    [
        ({"nodegate_max_drain": "many"}, {}, "--max-drain: got 'many', expected a whole number "
         "of nodes >= 0 (8) or a share of the run's nodes (10%)"),
        ({"nodegate_max_drain": "-1"}, {}, "--max-drain: got '-1', expected a whole number "
         "of nodes >= 0 (8) or a share of the run's nodes (10%)"),
        ({}, {"nodegate_max_drain": "0%"}, "--max-drain (from ini nodegate_max_drain): got '0%', "
         "expected a whole number of nodes >= 0 (8) or a share of the run's nodes (10%)"),
        ({"nodegate_max_drain": "150%"}, {}, "--max-drain: got '150%', expected a whole number "
         "of nodes >= 0 (8) or a share of the run's nodes (10%)"),
    ],
)  # fmt: skip
def test_a_bad_max_drain_is_a_usage_error(cli: dict, ini: dict, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        build(cli, ini)
    assert str(exc.value) == message


def test_max_drain_from_the_command_line_or_its_ini_twin() -> None:
    assert build({}).max_drain is None
    assert build({"nodegate_max_drain": "3"}).max_drain == DrainLimit(nodes=3)
    assert build({}, {"nodegate_max_drain": "20%"}).max_drain == DrainLimit(percent=20.0)
    assert build({"nodegate_max_drain": "3"}, {"nodegate_max_drain": "20%"}).max_drain == (
        DrainLimit(nodes=3)
    )


def prof(name: str, guard: dict[str, Any] | None) -> Profile:
    return Profile(name, f"{name}.yaml", {"admission": {"guard": guard}} if guard else {})


def test_where_the_bound_comes_from() -> None:
    shipped = ProfileLibrary([ROOT / "inventories" / "profiles"]).get("generic-hgx-h100")
    assert shipped.data["admission"]["guard"] == {
        "max_drain": {"nodes": 8, "percent": 10},
        "systemic": {"error_share": 0.5, "min_nodes": 4},
    }
    assert {"admission.guard.max_drain", "admission.guard.systemic"} <= set(shipped.data["sources"])
    on = {"n1": shipped, "n2": shipped}
    assert drain_bound(None, None, on, 200) == {
        "max_drain": 20, "rule": "10% or 8 nodes, whichever is larger",
        "from": "profile generic-hgx-h100 admission.guard.max_drain", "nodes": 200,
    }  # fmt: skip
    assert drain_bound(None, DrainLimit(nodes=5), on, 200)["from"] == (
        "inventory settings.max_drain"
    )
    assert drain_bound(DrainLimit(nodes=1), DrainLimit(nodes=5), on, 200) == {
        "max_drain": 1, "rule": "1 node", "from": "--max-drain", "nodes": 200,
    }  # fmt: skip
    strict = prof("strict", {"max_drain": 2})
    assert drain_bound(None, None, {"n1": shipped, "n2": strict}, 200)["from"] == (
        "profile strict admission.guard.max_drain"
    )
    assert drain_bound(None, None, {"n1": prof("bare", None)}, 40) == {
        "max_drain": 8, "rule": "10% or 8 nodes, whichever is larger", "from": "default",
        "nodes": 40,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "bound"),
    [("3", DrainLimit(nodes=3)), ("'5%'", DrainLimit(percent=5.0)),
     ("{nodes: 2, percent: 1}", DrainLimit(2, 1.0))],
)  # fmt: skip
def test_the_inventory_sets_a_bound(tmp_path: Path, setting: str, bound: DrainLimit) -> None:
    p = tmp_path / "inv.yaml"
    p.write_text(f"version: 1\nsettings: {{max_drain: {setting}}}\nnodes:\n  gpu[1-2]: {{}}\n")
    assert load_inventory(str(p)).settings.max_drain == bound


SPELLINGS = (
    'a whole number >= 0, "P%" of the run\'s nodes, or {nodes: N, percent: P} (whichever is '
    "larger): the most nodes one run's --act takes out of service, else none (--max-drain)"
)


@pytest.mark.parametrize(
    ("setting", "message"),
    [("'0%'", "settings.max_drain: got '0%', expected a whole number of nodes >= 0 (8) or a "
      "share of the run's nodes (10%)"),
     ("-1", f"settings.max_drain: got -1, expected {SPELLINGS}"),
     ("'ten'", f"settings.max_drain: got 'ten', expected {SPELLINGS}"),
     ("{nodes: 1, pct: 3}", f"settings.max_drain: got {{'nodes': 1, 'pct': 3}}, expected "
      f"{SPELLINGS}")],
)  # fmt: skip
def test_a_bad_inventory_bound_is_a_usage_error(tmp_path: Path, setting: str, message: str) -> None:
    p = tmp_path / "inv.yaml"
    p.write_text(f"version: 1\nsettings: {{max_drain: {setting}}}\nnodes:\n  gpu[1-2]: {{}}\n")
    with pytest.raises(ConfigError) as exc:
        load_inventory(str(p))
    assert str(exc.value) == f"{p}: {message}"


# --- systemic errors ---------------------------------------------------------------------

NODES = [f"gpu{i}" for i in range(1, 7)]
SHIPPED = {"error_share": 0.5, "min_nodes": 4}
META = {"run_id": "r", "started_at": "2026-12-01T00:00:00+00:00", "inventory": "i",
        "finished_at": "2026-12-01T00:00:01+00:00", "transport": "ssh",
        "stages": ["s"]}  # fmt: skip


def judge(erring: list[str], rule: dict[str, Any] | None = SHIPPED, failing: tuple = ()) -> dict:
    """Six nodes; gpu.dcgm ERROR on `erring`, gpu.xid FAIL on `failing`; the later nccl check
    skipped on every node that did not pass."""
    res = RunResult()
    p = prof("p", {"systemic": rule} if rule else None)
    for n in NODES:
        bad = n in erring
        res.add(Verdict("gpu.dcgm", n, Status.ERROR if bad else Status.PASS, "node",
                        message="dcgmi: command not found (rc 127)" if bad else ""))  # fmt: skip
        xid = Status.FAIL if n in failing else Status.PASS
        res.add(Verdict("gpu.xid", n, xid, "GPU2", message="Xid 79 x1" if n in failing else ""))
        skip = bad or n in failing
        res.add(
            Verdict(
                "nccl.single_node.busbw",
                n,
                Status.SKIP if skip else Status.PASS,
                message="not run: gpu.dcgm error in an earlier stage" if skip else "",
            )
        )
    sel = [(c, n) for n in NODES for c in ("gpu.dcgm", "gpu.xid", "nccl.single_node.busbw")]
    d = decide(sel, res, dict.fromkeys(NODES, "p"), {})
    profiles = dict.fromkeys(NODES, p)
    found = find_systemic(d, res, profiles, "reach.ssh")
    mark_systemic(d, found)
    return admission_doc(d, NODES, META, [c for c, _ in sel], systemic=found)


def test_an_error_on_most_nodes_is_systemic_its_nodes_not_qualified() -> None:
    doc = judge(["gpu1", "gpu2", "gpu3", "gpu4"], failing=("gpu2",))
    assert doc["systemic"] == [{
        "check": "gpu.dcgm", "profile": "p", "nodes": ["gpu1", "gpu2", "gpu3", "gpu4"],
        "errors": 4, "judged": 6, "error_share": 0.5, "min_nodes": 4,
        "message": "dcgmi: command not found (rc 127)",
    }]  # fmt: skip
    states = {n: d["state"] for n, d in doc["nodes"].items()}
    # gpu2's Xid is its own: rejected for it; the others are not qualified (not drained)
    assert states == {"gpu1": "not_qualified", "gpu2": "rejected", "gpu3": "not_qualified",
                      "gpu4": "not_qualified", "gpu5": "admitted", "gpu6": "admitted"}  # fmt: skip
    assert [(r["check"], r["status"]) for r in doc["nodes"]["gpu1"]["reasons"]] == [
        ("gpu.dcgm", "systemic"), ("nccl.single_node.busbw", "skip"),
    ]  # fmt: skip
    assert doc["remediation"] == {"retest": ["gpu2"]}  # unclassified here: no profile table
    assert doc["complete"] is True
    lines = summary_lines(doc, "a.json")
    assert "NOT QUALIFIED 3: gpu[1,3-4]: systemic errors (below)" in lines
    assert (
        "SYSTEMIC gpu.dcgm ERROR on 4 of 6 nodes (more than 50%): probable controller/tool "
        "problem, not the nodes' (not held against gpu[1-4], not drained for it): dcgmi: command "
        "not found (rc 127)"
    ) in lines
    schemas.validate("admission", doc)


@pytest.mark.parametrize(
    ("erring", "rule"),
    [
        (["gpu1", "gpu2", "gpu3"], SHIPPED),  # exactly half: not more than half
        (["gpu1", "gpu2", "gpu3", "gpu4"], {"error_share": 0.5, "min_nodes": 5}),  # too few
        (["gpu1", "gpu2", "gpu3", "gpu4"], {"error_share": 0.7, "min_nodes": 1}),  # 4/6 < 70 %
        (NODES, None),  # a profile without the rule: never systemic
    ],
)
def test_below_the_share_or_the_count_errors_reject_as_ever(
    erring: list[str], rule: dict[str, Any] | None
) -> None:
    doc = judge(erring, rule)
    assert doc["systemic"] == []
    assert {n for n, d in doc["nodes"].items() if d["state"] == "rejected"} == set(erring)


def test_an_unreachable_nodes_errors_repeat_its_fail_and_are_not_systemic() -> None:
    res = RunResult()
    for n in NODES:
        down = n != "gpu1"
        res.add(Verdict("reach.ssh", n, Status.FAIL if down else Status.PASS, "ssh",
                        message="unreachable: connection refused" if down else ""))  # fmt: skip
        res.add(
            Verdict(
                "reach.kernel.version",
                n,
                Status.ERROR if down else Status.PASS,
                "kernel",
                message="unreachable: connection refused" if down else "",
            )
        )
    sel = [(c, n) for n in NODES for c in ("reach.ssh", "reach.kernel.version")]
    d = decide(sel, res, dict.fromkeys(NODES, "p"), {})
    rules = dict.fromkeys(NODES, prof("p", {"systemic": SHIPPED}))
    assert find_systemic(d, res, rules, "reach.ssh") == []


def test_fails_are_never_systemic_by_count() -> None:
    doc = judge([], failing=tuple(NODES))
    assert doc["systemic"] == []
    assert doc["summary"]["rejected"] == 6


# --- the refusal ---------------------------------------------------------------------------


def take_out_doc(n: int, guard: dict[str, Any] | None) -> dict[str, Any]:
    kernel = {"check": "reach.kernel.version", "status": "fail", "component": "kernel",
              "message": "kernel 5.4", "remediation_class": "fix_config"}  # fmt: skip
    nodes = {f"gpu{i}": {"state": "rejected", "reasons": [kernel if i == 1 else XID],
                         "labels": {}} for i in range(1, n + 1)}  # fmt: skip
    return {"run_id": "r1", "actionable": True, "nodes": nodes,
            **({"guard": guard} if guard else {})}  # fmt: skip


def recs(doc: dict[str, Any]) -> list[ActionRecord]:
    return [ActionRecord(n, n, "rejected", "drain", "rejected") for n in doc["nodes"]]


def test_past_max_drain_the_take_out_is_refused_naming_counts_and_top_check() -> None:
    guard = {"max_drain": 2, "rule": "2 nodes", "from": "--max-drain", "nodes": 4}
    doc = take_out_doc(4, guard)
    assert refusal("slurm", "drain", doc, recs(doc)[:2]) is None  # at the bound: allowed
    assert refusal("slurm", "drain", doc, recs(doc)) == {
        "take_out": 4, "max_drain": 2, "rule": "2 nodes", "from": "--max-drain", "nodes": 4,
        "top_check": "gpu.xid", "top_check_nodes": 3,
        "message": "slurm: REFUSED to drain 4 nodes, more than max_drain 2 of 4 nodes (2 nodes; "
        "from --max-drain); top check gpu.xid on 3 of them; nothing drained (a fleet-wide cause? "
        "else --max-drain)",
    }  # fmt: skip
    # a decision without a guard (a site's document): the shipped default bounds it
    doc = take_out_doc(9, None)
    assert refusal("slurm", "drain", doc, recs(doc))["max_drain"] == 8  # type: ignore[index]


class FakeScontrol:
    """scontrol at its boundary: what `show node` reads, and every update asked for."""

    def __init__(self, names: list[str]) -> None:
        from nodegate.actions.slurm import SlurmNode

        self.now = {n: SlurmNode(n, "IDLE", None) for n in names}
        self.updates: list[tuple[str, ...]] = []

    def nodes(self) -> dict[str, Any]:
        return dict(self.now)

    def update(self, name: str, *settings: str) -> str | None:
        from nodegate.actions.slurm import SlurmNode

        self.updates.append((name, *settings))
        if "State=RESUME" in settings:
            self.now[name] = SlurmNode(name, "IDLE", None)
        return None


def test_the_slurm_action_refuses_drains_but_still_resumes(tmp_path: Path) -> None:
    from nodegate.actions.slurm import SlurmNode

    guard = {"max_drain": 2, "rule": "2 nodes", "from": "--max-drain", "nodes": 5}
    doc = take_out_doc(4, guard)
    doc["nodes"]["gpu5"] = {"state": "admitted", "reasons": [], "labels": {}}
    fake = FakeScontrol(list(doc["nodes"]))
    fake.now["gpu5"] = SlurmNode("gpu5", "IDLE+DRAIN", "nodegate r0: gpu.xid GPU2 (rma)")
    failures: list[str] = []
    act = SlurmAction(True, failures, fake)  # type: ignore[arg-type]
    act.pytest_nodegate_admission(doc, tmp_path)
    assert fake.updates == [("gpu5", "State=RESUME")]  # no drain issued at all
    out = json.loads((tmp_path / "actions.json").read_text())
    schemas.validate("actions", out)
    slurm = out["targets"]["slurm"]
    assert slurm["refused"]["message"] == failures[0]
    assert [(a["node"], a["action"], a["result"], a["why"]) for a in slurm["actions"]] == [
        *[(f"gpu{i}", "drain", "skipped", "refused: 4 nodes to take out, max_drain 2")
          for i in range(1, 5)],
        ("gpu5", "resume", "applied", "admitted; drained by nodegate"),
    ]  # fmt: skip
    assert failures[0].startswith("slurm: REFUSED to drain 4 nodes, more than max_drain 2")
    assert act.lines[-1] == failures[0]


def test_a_run_with_only_systemic_errors_exits_1_not_6() -> None:
    from nodegate.session.finish import EXIT_NOT_QUALIFIED, EXIT_REJECTED, _exit_for

    doc = judge(["gpu1", "gpu2", "gpu3", "gpu4"])
    assert doc["summary"] == {"nodes": 6, "admitted": 2, "rejected": 0, "not_qualified": 4}
    assert _exit_for(doc) == EXIT_REJECTED
    assert _exit_for({**doc, "systemic": []}) == EXIT_NOT_QUALIFIED


@pytest.mark.parametrize(
    "name", ["generic-hgx-h100", "hgx-h100-roce", "nd-a100-v4", "nd-h100-v5", "nd-h200-v5"]
)
def test_every_shipped_profile_bounds_its_actions_with_cited_values(name: str) -> None:
    p = ProfileLibrary([ROOT / "inventories" / "profiles"]).get(name)
    assert (SystemicRule.of(p), DrainLimit.of_data(p.data["admission"]["guard"]["max_drain"])) == (
        SystemicRule(0.5, 4), DEFAULT
    )  # fmt: skip
    for key in ("admission.guard.max_drain", "admission.guard.systemic"):
        assert p.data["sources"][key].startswith("Site policy"), key

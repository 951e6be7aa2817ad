"""A profile without a stage's section, or with a null one: the exact verdicts of every stage.

Missing is never a pass (fail closed); `roce: null` is a SKU without RoCE rails (every roce
check PASS with that note); an active stage names why a node cannot take part.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.checks import Check, CheckTable
from nodegate.core.values import Status, Verdict
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import Stage, StageContext, StageOptions
from nodegate.inventory import Node
from nodegate.inventory.nodes import FrozenMap, SSHSettings
from nodegate.profiles import Profile, ProfileLibrary
from nodegate.stages.registry import STAGES, stage

from tests.integration.conftest import REPO

LIB = ProfileLibrary([REPO / "inventories" / "profiles"])
PASSIVE = [s.name for s in STAGES if not s.active]
ACTIVE = [s.name for s in STAGES if s.active]


class NoTransport:
    """A transport no node of these tests may reach."""

    name = "none"
    evidence = None
    address = None

    def __getattr__(self, attr: str) -> Any:
        raise AssertionError(f"transport.{attr} used: a node without a section runs nothing")


def node(name: str) -> Node:
    return Node(name, ("all",), FrozenMap({}), None, SSHSettings())


class Started:
    """Records the progress display's stage starts."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int]] = []

    def stage_started(self, stage: str, nodes: int, **kw: Any) -> None:
        self.started.append((stage, nodes))


def run(
    st: Stage, profiles: dict[str, Profile], tmp_path: Path, progress: Any = None
) -> list[Verdict]:
    nodes = [node(n) for n in profiles]
    transport: Any = NoTransport()
    ctx = StageContext(nodes, profiles, transport, tmp_path, StageOptions(progress=progress))
    return asyncio.run(st.run(ctx))


def every(st: Stage, n: str, status: Status, component: str, message: str, **kw: Any) -> list:
    return [Verdict(c.id, n, status, component, message=message, **kw) for c in st.checks]


def without(name: str, section: str, null: bool = False) -> Profile:
    """Shipped `name` with `section` removed (or null)."""
    data = dict(LIB.get(name).data)
    data.pop(section)
    if null:
        data[section] = None
    return Profile(f"{name}-{section}", f"{name}-{section}.yaml", data)


@pytest.mark.parametrize("name", PASSIVE)
@pytest.mark.parametrize("null", [False, True], ids=["missing", "null"])
def test_a_passive_stage_without_its_section_is_every_check_error(
    name: str, null: bool, tmp_path: Path
) -> None:
    st = stage(name)
    prof = without("hgx-h100-roce", name, null)
    got = run(st, {"n1": prof, "n2": prof}, tmp_path)
    if null and st.not_applicable is not None:  # roce: "RoCE rails"; fabric: its access
        what = st.not_applicable
        note = f"profile {prof.name} has no {what} ({name}: null)"
        want = every(st, "n1", Status.PASS, what, note, expected="not applicable")
        want += every(st, "n2", Status.PASS, what, note, expected="not applicable")
    else:
        why = f"profile {prof.name} ({prof.source}) has no {name!r} section"
        want = every(st, "n1", Status.ERROR, "profile", why)
        want += every(st, "n2", Status.ERROR, "profile", why)
    assert got == want


def test_roce_null_nodes_first_then_the_missing_ones(tmp_path: Path) -> None:
    st = stage("roce")
    gone, null = without("hgx-h100-roce", "roce"), LIB.get("generic-hgx-h100")
    shown = Started()
    got = run(st, {"n1": gone, "n2": null, "n3": gone}, tmp_path, shown)
    assert shown.started == [("roce", 2)]  # the display counts the nodes the stage applies to
    note = "profile generic-hgx-h100 has no RoCE rails (roce: null)"
    why = f"profile {gone.name} ({gone.source}) has no 'roce' section"
    assert got == (
        every(st, "n2", Status.PASS, "RoCE rails", note, expected="not applicable")
        + every(st, "n1", Status.ERROR, "profile", why)
        + every(st, "n3", Status.ERROR, "profile", why)
    )


@pytest.mark.parametrize("name", ACTIVE)
@pytest.mark.parametrize("null", [False, True], ids=["missing", "null"])
def test_an_active_stage_without_its_section_names_why(
    name: str, null: bool, tmp_path: Path
) -> None:
    st = stage(name)
    prof = without("generic-hgx-h100", name, null)
    got = run(st, {"n1": prof, "n2": prof}, tmp_path)
    if null and st.not_applicable is not None:  # traffic: null, a SKU without load criteria
        note = f"profile {prof.name} has no {st.not_applicable} ({name}: null)"
        kw = {"expected": "not applicable"}
        assert got == [
            *every(st, "n1", Status.PASS, st.not_applicable, note, **kw),
            *every(st, "n2", Status.PASS, st.not_applicable, note, **kw),
        ]
        return
    why = f"profile {prof.name}: no {name!r} section"
    assert got == [
        *every(st, "n1", Status.ERROR, name, why),
        *every(st, "n2", Status.ERROR, name, why),
    ]


def test_ib_pairs_needs_rails_and_a_partner(tmp_path: Path) -> None:
    st = stage("ib_pairs")
    no_rails = without("generic-hgx-h100", "hca")
    alone = LIB.get("generic-hgx-h100")
    got = run(st, {"n1": alone, "n2": no_rails, "n3": no_rails}, tmp_path)
    why = f"profile {no_rails.name}: no 'hca.rails' (the rails ib_pairs tests)"
    assert got == (
        every(st, "n2", Status.ERROR, "ib_pairs", why)
        + every(st, "n3", Status.ERROR, "ib_pairs", why)
        + every(st, "n1", Status.ERROR, "ib_pairs", "no partner node of profile generic-hgx-h100 "
                "to test with")
    )  # fmt: skip


@pytest.mark.parametrize("name", [s.name for s in STAGES])
def test_every_stage_announces_its_nodes_once(name: str, tmp_path: Path) -> None:
    shown = Started()
    prof = without("generic-hgx-h100", name)
    run(stage(name), {"n1": prof, "n2": prof}, tmp_path, shown)
    assert shown.started == [(name, 2)]


def test_roce_on_roce_less_nodes_only_announces_nothing(tmp_path: Path) -> None:
    shown = Started()
    null = LIB.get("generic-hgx-h100")
    run(stage("roce"), {"n1": null}, tmp_path, shown)
    assert shown.started == []


class Grouping(ActiveStage[str]):
    """An active stage whose campaigns are verdicts naming the nodes each profile got."""

    name = "grouping"
    checks = CheckTable("grouping", [Check("grouping.x", "x", None, "node", "test_x", "pipeline")])

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []

    def campaign_for(
        self, name: str, profile: Profile, nodes: list[Node], ctx: StageContext
    ) -> list[Verdict]:
        self.calls.append((name, profile.name, [n.name for n in nodes]))
        return self.unjudged(nodes[0].name, name)


def test_the_default_plan_makes_one_campaign_per_profile_in_inventory_order() -> None:
    a, b = (Profile(p, f"{p}.yaml", {"grouping": {}}) for p in ("a", "b"))
    bare = Profile("bare", "bare.yaml", {"grouping": None})
    st = Grouping()
    profiles = {"n1": b, "n2": a, "n3": bare, "n4": b, "n5": a}
    ctx = StageContext([node(n) for n in profiles], profiles, NoTransport(), Path("."))  # type: ignore[arg-type]
    campaigns, verdicts = st.plan(ctx)
    assert campaigns == [] and st.calls == [("b", "b", ["n1", "n4"]), ("a", "a", ["n2", "n5"])]
    assert [(v.node, v.component, v.message) for v in verdicts] == [
        ("n3", "grouping", "profile bare: no 'grouping' section"),
        ("n1", "grouping", "b"),
        ("n2", "grouping", "a"),
    ]

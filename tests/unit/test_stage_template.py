"""Every stage package follows the one template of docs/stages.md: the same modules, the same
names, and what every stage shares (run, plan, a missing or null section, every check ERROR)
left to the base classes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

import nodegate.stages
import pytest
from nodegate.core.checks import CheckTable
from nodegate.core.values import NodeOutcome, Reach
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import PassiveStage, Stage
from nodegate.profiles import ProfileLibrary
from nodegate.stages.registry import STAGES

from tests.integration.conftest import REPO

STAGES_DIR = Path(nodegate.stages.__file__).parent
LIB = ProfileLibrary([REPO / "inventories" / "profiles"])
# docs/stages.md: the modules of a passive and of an active stage package.
PASSIVE_MODULES = ("__init__", "stage", "checks", "profile", "facts")
ACTIVE_MODULES = ("__init__", "stage", "checks", "profile", "campaign")
BY_NAME = pytest.mark.parametrize("st", STAGES, ids=[s.name for s in STAGES])


def part(st: Stage, module: str) -> ModuleType:
    return importlib.import_module(f"nodegate.stages.{st.name}.{module}")


def modules(st: Stage) -> list[ModuleType]:
    """Every module of the stage's package, the package itself first."""
    pkg = importlib.import_module(f"nodegate.stages.{st.name}")
    found = pkgutil.iter_modules(pkg.__path__, f"{pkg.__name__}.")
    return [pkg, *(importlib.import_module(m.name) for m in found)]


def with_section(st: Stage) -> Any:
    """A shipped profile that has the stage's section (a mapping)."""
    for name in LIB.available():
        prof = LIB.get(name)
        if st.has_section(prof):
            return prof
    raise AssertionError(f"no shipped profile has a {st.name!r} section")


def test_every_registered_stage_is_passive_or_active() -> None:
    for st in STAGES:
        assert isinstance(st, ActiveStage if st.active else PassiveStage), st.name
    assert {s.active for s in STAGES} == {False, True}


@BY_NAME
def test_package_layout(st: Stage) -> None:
    want = ACTIVE_MODULES if st.active else PASSIVE_MODULES
    missing = [m for m in want if not (STAGES_DIR / st.name / f"{m}.py").is_file()]
    assert not missing, f"stages/{st.name} lacks {missing}"


@BY_NAME
def test_stage_check_table_and_profile_names(st: Stage) -> None:
    pkg, stage_mod, checks_mod = modules(st)[0], part(st, "stage"), part(st, "checks")
    assert "STAGE" in pkg.__all__ and pkg.STAGE is st and stage_mod.STAGE is st
    assert type(st).__module__ == stage_mod.__name__
    assert isinstance(checks_mod.CHECKS, CheckTable) and st.checks is checks_mod.CHECKS
    assert checks_mod.CHECKS.stage == st.name
    prof_mod = part(st, "profile")
    assert st.name == prof_mod.SECTION  # a stage's profile section is named after it
    accessor = getattr(prof_mod, f"{st.name}_profile")
    assert inspect.isfunction(accessor) and accessor.__module__ == prof_mod.__name__
    prof = with_section(st)
    typed = accessor(prof)
    assert accessor(prof) is typed  # built once per profile
    if isinstance(st, PassiveStage):
        assert st.profile_of(prof) is typed


@BY_NAME
def test_passive_facts_come_from_build_facts(st: Stage, monkeypatch: pytest.MonkeyPatch) -> None:
    if not isinstance(st, PassiveStage):
        pytest.skip("an active stage judges its campaigns' evidence, not facts")
    facts_mod = part(st, "facts")
    assert inspect.isfunction(facts_mod.build_facts)
    assert facts_mod.build_facts.__module__ == facts_mod.__name__
    seen: list[Any] = []
    monkeypatch.setattr(part(st, "stage"), "build_facts", lambda *a, **kw: seen.append(a) or a)
    out = NodeOutcome("n1", Reach.OK, {})
    prof = st.profile_of(with_section(st))
    st.facts(out, prof)
    assert seen and seen[0][0] is out


def test_run_is_final_in_both_bases() -> None:
    assert getattr(PassiveStage.run, "__final__", False)
    assert getattr(ActiveStage.run, "__final__", False)


@BY_NAME
def test_no_stage_class_defines_run_and_active_ones_only_their_campaigns(st: Stage) -> None:
    classes = [
        c
        for m in modules(st)
        for _, c in inspect.getmembers(m, inspect.isclass)
        if issubclass(c, Stage) and c.__module__ == m.__name__
    ]
    assert type(st) in classes
    for c in classes:
        assert "run" not in vars(c), f"{c.__qualname__} overrides run"
        if st.active:
            assert "plan" not in vars(c), f"{c.__qualname__}: the base plans (campaign_for)"
    if st.active:
        assert "campaign_for" in vars(type(st))


def hand_built(source: str) -> list[int]:
    """Lines that build a verdict for every check by hand: a loop or comprehension over a
    check table (`CHECKS`, `x.checks`) whose body makes a `Verdict`."""

    def over_checks(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id == "CHECKS") or (
            isinstance(node, ast.Attribute) and node.attr == "checks"
        )

    def makes_verdict(nodes: list[ast.AST]) -> bool:
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Verdict"
            for top in nodes
            for n in ast.walk(top)
        )

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            iters, body = [g.iter for g in node.generators], node
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            iters, body = [node.iter], ast.Module(body=node.body, type_ignores=[])
        else:
            continue
        if any(over_checks(i) for i in iters) and makes_verdict([body]):
            lines.append(node.lineno)
    return lines


def test_the_hand_built_scan_sees_both_forms() -> None:
    comp = 'x = [Verdict(c.id, n, Status.ERROR, "s", message=m) for c in CHECKS]\n'
    loop = "for c in self.checks:\n    out.append(Verdict(c.id, n, Status.PASS))\n"
    fine = "x = CHECKS.all_error(n, 's', m)\nids = [c.id for c in CHECKS]\n"
    assert hand_built(comp) == [1] and hand_built(loop) == [1] and hand_built(fine) == []


@BY_NAME
def test_no_stage_module_builds_every_check_by_hand(st: Stage) -> None:
    """Every check ERROR is `CheckTable.all_error` (or `ActiveStage.unjudged`); a null
    section's PASSes are the base class's (`Stage.not_applicable`)."""
    found = [
        f"stages/{st.name}/{path.name}:{line}"
        for path in sorted((STAGES_DIR / st.name).glob("*.py"))
        for line in hand_built(path.read_text(encoding="utf-8"))
    ]
    assert not found, found


@BY_NAME
def test_the_stage_module_never_reads_raw_profile_data(st: Stage) -> None:
    """A missing or null section is the base class's; a stage reads its typed section."""
    tree = ast.parse((STAGES_DIR / st.name / "stage.py").read_text(encoding="utf-8"))
    raw = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "data"]
    assert not raw, f"stages/{st.name}/stage.py reads profile.data at lines {raw}"

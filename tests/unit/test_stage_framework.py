"""The shapes every stage shares: thresholds as data, the fleet majority, check tables, the
suites derived from them, and profiles that extend others."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from nodegate.core.checks import AnyCheck, Check, CheckTable
from nodegate.core.errors import ConfigError
from nodegate.core.majority import Majority
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status, Verdict
from nodegate.profiles import ProfileLibrary, load_profile_file
from nodegate.session.suite import registered_tests, suite_mismatches
from nodegate.stages.registry import STAGES

from tests.integration.conftest import REPO


# -- thresholds --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("doc", "ok", "bad", "shown"),
    [
        ({"min": 360, "unit": "Gb/s"}, 360, 359.9, ">= 360 Gb/s"),
        ({"max": 0, "unit": "errors"}, 0, 1, "<= 0 errors"),
        ({"equal": 16, "unit": "lanes"}, 16, 8, "16 lanes"),
        ({"equal": "NDR"}, "NDR", "HDR", "NDR"),
        ({"one_of": ["PIX", "PXB"]}, "PXB", "SYS", "one of PIX, PXB"),
        ({"min": 26.562}, 26.562, 25.0, ">= 26.562"),
    ],
)
def test_threshold_direction_is_data(doc, ok, bad, shown) -> None:
    t = Threshold.from_profile(doc, "x.y")
    assert (t.holds(ok), t.holds(bad), t.holds(None), t.describe()) == (True, False, False, shown)


@pytest.mark.parametrize(
    ("doc", "msg"),
    [
        (5, "x.y: a threshold is a mapping like {min: 5, unit: GT/s}"),
        ({"min": 1, "max": 2}, "x.y: a threshold has exactly one of min, max, equal, one_of"),
        ({"unit": "GT/s"}, "x.y: a threshold has exactly one of min, max, equal, one_of"),
        ({"min": "5"}, "x.y.min: a number (got '5')"),
        ({"one_of": []}, "x.y.one_of: a non-empty list"),
    ],
)
def test_threshold_rejects_bad_shapes(doc, msg) -> None:
    with pytest.raises(ConfigError) as exc:
        Threshold.from_profile(doc, "x.y")
    assert str(exc.value).startswith(msg)


# -- fleet majority ----------------------------------------------------------------------
def test_majority_one_tie_rule_and_order() -> None:
    m = Majority.of(["b", "a", "a", None, "c", "a"])
    assert (m.top, m.top_count, m.total, m.tie) == ("a", 3, 5, False)
    assert m.histogram() == "a (3), b (1), c (1)"
    assert m.agrees("a") and not m.agrees("b") and not m.agrees(None)
    tie = Majority.of(["y", "x", "x", "y"])
    assert (tie.top, tie.tie, tie.histogram(fmt="{value} x{n}")) == (None, True, "x x2, y x2")
    assert not tie.agrees("x")
    assert Majority.of([None]).top is None


# -- check tables ------------------------------------------------------------------------
def _ok(check: AnyCheck, facts: int, prof: object) -> list[Verdict]:
    return [Verdict(check.id, "n1", Status.PASS)] if facts else []


def test_check_table_fails_closed_and_rejects_duplicates() -> None:
    t: CheckTable[int, object] = CheckTable(
        "toy",
        [
            Check("toy.a", "a", _ok, "node", "test_a"),
            Check("toy.b", "b", None, "node", "test_b", "pipeline"),
        ],
    )
    assert t.judge_node("n1", 1, None) == [Verdict("toy.a", "n1", Status.PASS)]
    (silent,) = t.judge_node("n1", 0, None)
    assert (silent.check, silent.status, silent.message) == (
        "toy.a",
        Status.ERROR,
        "check produced no verdict",
    )
    with pytest.raises(ValueError, match="toy.a registered twice"):
        CheckTable(
            "toy",
            [Check("toy.a", "a", _ok, "n", "test_a"), Check("toy.a", "a", _ok, "n", "test_c")],
        )
    with pytest.raises(ValueError, match="fn is None exactly for scope pipeline"):
        CheckTable("toy", [Check("toy.a", "a", None, "n", "test_a")])


# -- suites derived from the tables ------------------------------------------------------
def _suite_tests() -> list[tuple[str, str]]:
    """(stage, test) defined by each suites/test_<stage>.py, read by importing it as pytest does."""
    import importlib.util

    out = []
    for path in sorted((REPO / "suites").glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"suite_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        st = path.stem[len("test_") :]
        out += [(st, name) for name in vars(mod) if name.startswith("test_")]
    return out


def test_suites_and_check_tables_agree_both_ways() -> None:
    assert suite_mismatches(registered_tests(), _suite_tests()) == []
    assert {s.name for s in STAGES} == {st for st, _ in _suite_tests()}


def test_a_check_without_item_or_an_item_without_check_is_reported() -> None:
    reg = [("reach", "reach.ssh", "test_ssh_reachable"), ("reach", "reach.new", "test_new")]
    suite = [("reach", "test_ssh_reachable"), ("reach", "test_orphan")]
    assert suite_mismatches(reg, suite) == [
        "check reach.new (reach) has no suite item test_new in suites/test_reach.py",
        "suites/test_reach.py::test_orphan has no registered check in stage reach",
    ]


def test_suite_files_only_derive() -> None:
    """No hand-written test function in suites/: a stub would be a second registration."""
    for path in (REPO / "suites").glob("test_*.py"):
        tree = ast.parse(path.read_text())
        assert not [n for n in tree.body if isinstance(n, ast.FunctionDef)], path.name


# -- profiles that extend others ---------------------------------------------------------
def _write(d: Path, name: str, doc: dict) -> None:
    (d / f"{name}.yaml").write_text(yaml.safe_dump(doc))


def test_h200_is_h100_plus_its_differences() -> None:
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    h100, h200 = lib.get("nd-h100-v5"), lib.get("nd-h200-v5")
    assert h200.extends == (
        "_nvidia-xid",
        "_admission",
        "_fleet-compare",
        "_gpu-load",
        "nd-h100-v5",
    )
    assert h200.data["pcie_gpu"]["gpu"] == {
        "count": {"equal": 8, "unit": "GPUs"},
        "pci_device_ids": ["10de:2335"],
    }
    assert h200.data["pcie_gpu"]["xid"] == h100.data["pcie_gpu"]["xid"]
    assert h200.data["hca"] == h100.data["hca"]
    assert h200.data["sources"]["hca.rails"] == h100.data["sources"]["hca.rails"]
    assert "_nvidia-xid" not in lib.available()
    for name in lib.available():
        assert len(lib.get(name).data["pcie_gpu"]["xid"]["codes"]) == 22, name


def test_extends_errors_name_the_file(tmp_path: Path) -> None:
    base = yaml.safe_load((REPO / "inventories" / "profiles" / "nd-h100-v5.yaml").read_text())
    _write(tmp_path, "a", {**base, "name": "a", "extends": "b"})
    _write(tmp_path, "b", {**base, "name": "b", "extends": "a"})
    _write(tmp_path, "c", {"name": "c", "description": "x", "extends": "nope"})
    _write(tmp_path, "d", {"name": "d", "description": "x", "extends": ["nd-h100-v5"],
                           "pcie_gpu": {"gpu": {"count": {"equal": "eight"}}}})  # fmt: skip
    lib = ProfileLibrary([tmp_path])
    with pytest.raises(ConfigError, match=r"extends 'a' forms a cycle \(a -> b\)"):
        lib.get("a")
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        lib.get("c")
    with pytest.raises(ConfigError, match=r"d.yaml \(extends _nvidia-xid, _admission, "
                       r"_fleet-compare, _gpu-load, nd-h100-v5\):\n  "
                       r"pcie_gpu.gpu.count.equal: 'eight' is not of type 'integer'"):  # fmt: skip
        lib.get("d")
    with pytest.raises(ConfigError, match="is a profile fragment"):
        lib.get("_nvidia-xid")


def test_user_profile_dir_extends_a_shipped_profile(tmp_path: Path) -> None:
    _write(tmp_path, "site-h100", {"name": "site-h100", "description": "ours",
                                   "extends": "nd-h100-v5", "reach": {"kernel": {"required": True,
                                   "allowed": ["6.8.0-*"]}}})  # fmt: skip
    prof = load_profile_file(tmp_path / "site-h100.yaml")
    assert prof.data["reach"]["kernel"] == {"required": True, "allowed": ["6.8.0-*"]}
    assert prof.data["reach"]["ofed"] == {"required": True, "min": "23.04"}


def test_an_overlay_replaces_a_threshold_whole(tmp_path: Path) -> None:
    """`{min, max}` over `{equal}` is the range alone; merging the keys would be invalid."""
    base = yaml.safe_load((REPO / "inventories" / "profiles" / "generic-hgx-h100.yaml").read_text())
    want = base["hca"]["roles"]["frontend"]["count"]
    assert "equal" in want or "min" in want
    over = {"min": 0, "max": 2, "unit": "HCAs"} if "equal" in want else {"equal": 1, "unit": "HCAs"}
    _write(tmp_path, "site", {"name": "site", "description": "x", "extends": "generic-hgx-h100",
                              "hca": {"roles": {"frontend": {"count": over}}}})  # fmt: skip
    prof = load_profile_file(tmp_path / "site.yaml")
    assert prof.data["hca"]["roles"]["frontend"]["count"] == over

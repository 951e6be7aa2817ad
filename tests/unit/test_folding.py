"""One folding module: nodesets, a node's causes, folds by (check, status), groups by rack."""

from __future__ import annotations

from typing import Any

from nodegate.reports import allure, folding, terminal
from nodegate.reports.html import view


def reason(check: str, status: str = "fail", message: str = "bad", **kw: Any) -> dict[str, Any]:
    base = {"component": "", "observed": None, "expected": None}
    return {"check": check, "status": status, "message": message, **base, **kw}


def test_nodesets_fold_and_clip() -> None:
    assert folding.nodeset(["gpu1", "gpu2", "gpu4"]) == "gpu[1-2,4]"
    assert folding.nodeset(iter(["n1"])) == "n1"
    assert folding.clip_nodeset(["n1", "n3", "n5"], "a.json", 4) == "n1 +2 more (a.json)"


def test_causes_not_their_echoes() -> None:
    fail, err = reason("a.x"), reason("a.y", "error")
    echo = reason("a.z", "skip", "not judged: the session failed")
    assert folding.causes([echo, err, fail]) == [fail]
    assert folding.causes([echo, err]) == [err]
    assert folding.causes([echo]) == [echo]


def test_folds_largest_first_with_distinct_reasons() -> None:
    doc = {
        "nodes": {
            "n1": {"admitted": False, "reasons": [reason("b.x"), reason("a.x")]},
            "n2": {"admitted": False, "reasons": [reason("b.x", message="worse")]},
            "n3": {"state": "not_qualified", "admitted": False, "reasons": [reason("c.x")]},
            "n4": {"admitted": True, "reasons": []},
        }
    }
    found = folding.folds(doc)
    assert [(f.check, f.nodes) for f in found] == [("b.x", ["n1", "n2"]), ("a.x", ["n1"])]
    assert [ns for _, ns in found[0].reasons.values()] == [["n1"], ["n2"]]
    assert found[0].header() == "b.x FAIL on 2 nodes: n[1-2]"


def test_groups_by_rack_then_leaf() -> None:
    assert folding.group_of({"rack": "r1", "leaf": "l2"}) == "rack r1 · leaf l2"
    assert folding.group_of({"leaf": "l2"}) == "leaf l2"
    assert folding.group_of({}) == "fleet"


def test_the_terminal_html_and_allure_fold_with_it() -> None:
    assert terminal.folds is view.folds is folding.folds
    assert terminal.nodeset is view.nodeset is folding.nodeset
    assert view.group_of is allure.group_of is folding.group_of

"""The terminal serves the decision: the admission summary folded by check and nodeset, on one
screen at 1,024 nodes, printed after pytest's closing line; per-item failure reports off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from nodegate.reports.terminal import Paths, decision_lines
from nodegate.stages.registry import checks_by_id

REPO = Path(__file__).resolve().parents[2]
PATHS = Paths("reports/r1/admission.json", "reports/r1/report.html")
WHERE = "reports/r1/report.html, reports/r1/admission.json"


def reason(check: str, message: str, status: str = "fail", **kw: Any) -> dict[str, Any]:
    """A reason whose message shows its observed and expected values unless told otherwise."""
    return {
        "check": check,
        "status": status,
        "component": kw.get("component", ""),
        "observed": kw.get("observed", message),
        "expected": kw.get("expected", message),
        "unit": None,
        "message": message,
        "remediation": None,
        "evidence": [],
        **{k: v for k, v in kw.items() if k not in ("component", "observed", "expected")},
    }


def doc(nodes: dict[str, list[dict[str, Any]]], **top: Any) -> dict[str, Any]:
    rejected = sum(1 for rs in nodes.values() if rs)
    return {
        "run_id": "r1",
        "stages": ["reach"],
        "summary": {"nodes": len(nodes), "admitted": len(nodes) - rejected, "rejected": rejected},
        "nodes": {n: {"admitted": not rs, "reasons": rs} for n, rs in nodes.items()},
        **top,
    }


def test_one_reason_per_check_reads_as_one_line_per_reason():
    d = doc(
        {
            "gpu1": [],
            "gpu2": [reason("reach.ssh", "unreachable: refused", observed="x", expected="ok")],
            "gpu3": [reason("reach.kernel.uniform", "kernel 5.15 differs", component="kernel")],
        }
    )
    assert decision_lines(d, PATHS, 30) == [
        "nodegate run r1: 3 nodes, 1 admitted, 2 rejected (stages: reach)",
        "ADMITTED 1: gpu1",
        "REJECTED 2: gpu[2-3]",
        "gpu3: reach.kernel.uniform FAIL [kernel]: kernel 5.15 differs",
        "gpu2: reach.ssh FAIL: unreachable: refused (observed x, expected ok)",
        "admission: reports/r1/admission.json",
        "report: reports/r1/report.html",
    ]


def fleet(n: int, faults: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return doc({f"gpu{i:04d}": faults.get(i, []) for i in range(1, n + 1)})


def test_1024_nodes_with_50_faults_fit_one_screen():
    faults: dict[int, list[dict[str, Any]]] = {}
    for k in range(32):  # unreachable: each message names its own address
        faults[1 + 32 * k] = [reason("reach.ssh", f"unreachable: 10.0.{k}.1:22 refused")]
    for k in range(10):
        faults[5 + 64 * k] = [reason("pcie.gpu.width", "PCIe x8", component=f"GPU{k % 8}")]
    for k in range(8):
        faults[11 + 100 * k] = [reason("gpu.xid", "Xid 79", component="GPU2")]
    lines = decision_lines(fleet(1024, faults), PATHS, 30)
    assert len(lines) <= 40  # one screen, the header and the nodesets included
    assert lines[0] == "nodegate run r1: 1024 nodes, 974 admitted, 50 rejected (stages: reach)"
    # 50 scattered faults fold poorly: the admitted nodeset is cut to 3 lines of 80 columns
    assert lines[1].startswith("ADMITTED 974: gpu[0002-0004,0006-0010,0012-0032,")
    assert lines[1].endswith(" more (reports/r1/admission.json)") and len(lines[1]) <= 300
    assert lines[2].startswith("REJECTED 50: gpu[0001,0005,0011,0033,")
    folded = lines[3:-2]
    assert folded[0] == (
        "reach.ssh FAIL on 32 nodes: gpu[0001,0033,0065,0097,0129,0161,0193,0225] +24 more"
    )
    assert folded[1] == "  gpu0001: reach.ssh FAIL: unreachable: 10.0.0.1:22 refused"
    assert folded[17:19] == [
        "  gpu0513: reach.ssh FAIL: unreachable: 10.0.16.1:22 refused",
        f"  ... 15 more nodes with other messages: {WHERE}",
    ]
    assert folded[19:22] == [  # the remaining lines go round the folds: this one is whole
        "pcie.gpu.width FAIL on 10 nodes: " + _first8(5, 64, 10),
        "  gpu[0005,0517]: pcie.gpu.width FAIL [GPU0]: PCIe x8",
        "  gpu[0069,0581]: pcie.gpu.width FAIL [GPU1]: PCIe x8",
    ]
    assert folded[28:] == [  # one reason: a line at a header's place, not under pcie's
        "gpu[0011,0111,0211,0311,0411,0511,0611,0711]: gpu.xid FAIL [GPU2]: Xid 79"
    ]
    assert len(folded) == 29
    assert lines[-2:] == ["admission: reports/r1/admission.json", "report: reports/r1/report.html"]


def _first8(start: int, step: int, n: int) -> str:
    from ClusterShell.NodeSet import NodeSet

    nodes = [f"gpu{start + step * k:04d}" for k in range(n)]
    return f"{NodeSet.fromlist(nodes[:8])} +{n - 8} more"


def test_budget_zero_shows_every_reason_and_a_small_budget_says_what_it_left_out():
    faults = {i: [reason(f"c.check{i:02d}", f"m{i}")] for i in range(1, 41)}
    d = fleet(40, faults)
    every = decision_lines(d, PATHS, 0)
    assert [ln for ln in every if ln.startswith("gpu")] == [
        f"gpu{i:04d}: c.check{i:02d} FAIL: m{i}" for i in range(1, 41)
    ]
    short = decision_lines(d, PATHS, 10)
    reasons = short[2:-2]
    assert reasons == [f"gpu{i:04d}: c.check{i:02d} FAIL: m{i}" for i in range(1, 10)] + [
        f"... 31 more checks fail on 31 nodes: {WHERE}"
    ]


def test_admission_keys_of_other_pieces_are_shown_when_present():
    d = doc(
        {
            "gpu1": [reason("gpu.xid", "Xid 79", remediation_class="rma")],
            "gpu2": [reason("reach.kernel.version", "out of scope", status="out_of_scope")],
            "gpu3": [],
        },
        remediation={"rma": ["gpu1"]},
        complete=False,
    )
    d["summary"] = {"nodes": 3, "admitted": 1, "rejected": 1, "not_qualified": 1}
    d["nodes"]["gpu2"]["state"] = "not_qualified"
    waiver = {"index": 1, "reason": "RMA OPS-7", "owner": "ops@x", "expires": "2026-12-31"}
    d["nodes"]["gpu3"]["waived"] = [reason("gpu.remap", "pending", waiver=waiver)]
    d["out_of_scope"] = ["reach.kernel.version"]
    assert decision_lines(d, Paths("a.json"), 30) == [
        "nodegate run r1: 3 nodes, 1 admitted, 1 rejected, 1 not qualified (stages: reach)",
        "ADMITTED 1: gpu3",
        "REJECTED 1: gpu1",
        "  by remediation: rma gpu1",
        "gpu1: gpu.xid FAIL: Xid 79 (rma)",
        "NOT QUALIFIED 1: gpu2: 1 required check did not run in this run: reach.kernel.version",
        "WAIVED gpu3: gpu.remap FAIL: pending - waiver 1: RMA OPS-7 (owner ops@x, until "
        "2026-12-31)",
        "INCOMPLETE run (not every required check ran): reports/latest and actions do not "
        "follow it (--allow-incomplete to let them)",
        "admission: a.json",
    ]


def test_node_text_is_escaped():
    d = doc({"gpu1": [reason("reach.os.release", "Rocky\x1b]0;owned\x07 9")]})
    assert decision_lines(d, Paths("a.json"), 30)[2] == (
        "gpu1: reach.os.release FAIL: Rocky\\x1b]0;owned\\x07 9"
    )


@pytest.fixture
def replay_run(tmp_path: Path):
    """`pytest suites -m reach` over an empty replay bundle: every node rejected, fast."""
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\ndefaults: {profile: generic-hgx-h100}\nnodes: {'n[1-3]': {}}\n")
    bundle = tmp_path / "empty"
    bundle.mkdir()

    def run(*args: str) -> tuple[int, str]:
        p = subprocess.run(
            [sys.executable, "-m", "pytest", str(REPO / "suites"), f"--inventory={inv}"]
            + ["--transport=replay", f"--replay={bundle}", "-m", "reach", "-p", "no:cacheprovider"]
            + [f"--reports-dir={tmp_path / 'reports'}", f"--rootdir={REPO}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        return p.returncode, p.stdout + p.stderr

    return run


def test_summary_comes_last_and_item_reports_are_off_by_default(replay_run, tmp_path):
    rc, out = replay_run("--run-id=a")
    assert rc == 1, out
    lines = out.rstrip("\n").splitlines()
    section = lines.index("=" * 30 + " nodegate admission " + "=" * 30)
    deselected = len(checks_by_id()) - 8  # every check but reach's 8, for 3 nodes
    # pytest's closing line, then ours
    assert f" 24 failed, {3 * deselected} deselected" in lines[section - 1]
    assert lines[section + 1 :] == [
        "nodegate run a: 3 nodes, 0 admitted, 3 rejected (level standard; stages: reach)",
        "REJECTED 3: n[1-3]",
        "  by remediation: fix_config n[1-3]",
        "reach.ssh FAIL on 3 nodes: n[1-3]",
        *(
            f"  n{i}: reach.ssh FAIL [ssh]: error: no capture of stage 'reach' for n{i} in "
            f"{tmp_path / 'empty'} (expected ok) (fix_config)"
            for i in (1, 2, 3)
        ),
        "REPLAY run (judged from a captured bundle): reports/latest does not follow it",
        # A -m reach run: a diagnostic run (admission policy, #13).
        "INCOMPLETE run (not every required check ran): reports/latest and actions do not "
        "follow it (--allow-incomplete to let them)",
        "admission: reports/a/admission.json",
        "report: reports/a/report.html",
    ]
    assert "FAILURES" not in out and "FAILED " not in out
    doc = json.loads((tmp_path / "reports" / "a" / "admission.json").read_text())
    assert doc["summary"] == {"nodes": 3, "admitted": 0, "rejected": 3, "not_qualified": 0}


def test_item_reports_on_request(replay_run):
    rc, out = replay_run("--run-id=b", "--item-reports")
    assert rc == 1, out
    assert "= FAILURES =" in out.replace("=" * 10, "=")
    failed = [ln for ln in out.splitlines() if ln.startswith("FAILED ")]
    assert len(failed) == 24 and "test_reach.py::test_ssh_reachable[n1]" in failed[0]
    assert out.rstrip().splitlines()[-1] == "report: reports/b/report.html"


def test_bad_summary_lines_is_a_usage_error(replay_run):
    rc, out = replay_run("--run-id=c", "--summary-lines=many")
    assert rc == 4
    assert "ERROR: nodegate: --summary-lines: got 'many', expected a whole number >= 0" in out


def test_each_reason_is_under_its_own_checks_header():
    """#21: `gpu017: reach.kernel.uniform FAIL` was printed indented under
    `reach.kernel.version ERROR on 3 nodes`, as if it were one of its reasons."""
    timeout = [reason("reach.kernel.version", f"`uname -r` timed out ({i})", status="error")
               for i in (1, 2, 3)]  # fmt: skip
    d = doc(
        {
            "gpu001": [timeout[0]],
            "gpu002": [timeout[1]],
            "gpu003": [timeout[2]],
            "gpu017": [reason("reach.kernel.uniform", "kernel 5.15.0-91 differs")],
        }
    )
    assert decision_lines(d, PATHS, 30)[2:-2] == [
        "reach.kernel.version ERROR on 3 nodes: gpu[001-003]",
        "  gpu001: reach.kernel.version ERROR: `uname -r` timed out (1)",
        "  gpu002: reach.kernel.version ERROR: `uname -r` timed out (2)",
        "  gpu003: reach.kernel.version ERROR: `uname -r` timed out (3)",
        "gpu017: reach.kernel.uniform FAIL: kernel 5.15.0-91 differs",
    ]


def test_a_count_and_its_noun_agree():
    """#21: "1 tests", "1 nodes"."""
    from nodegate.core.words import plural

    assert [plural(n, "test") for n in (0, 1, 2)] == ["0 tests", "1 test", "2 tests"]
    assert plural(1, "node address", "node addresses") == "1 node address"
    d = doc({"gpu1": [reason("gpu.xid", "Xid 79")]})
    assert decision_lines(d, PATHS, 30)[0] == (
        "nodegate run r1: 1 node, 0 admitted, 1 rejected (stages: reach)"
    )


def test_a_replay_run_says_reports_latest_does_not_follow_it():
    d = doc({"gpu1": []}, transport="replay")
    assert decision_lines(d, Paths("a.json"), 30) == [
        "nodegate run r1: 1 node, 1 admitted, 0 rejected (stages: reach)",
        "ADMITTED 1: gpu1",
        "REPLAY run (judged from a captured bundle): reports/latest does not follow it",
        "admission: a.json",
    ]

"""What a node prints reaches the terminal, the pytest/JUnit failure text and HTML escaped
(`nodegate.core.safetext`), and the summary line of every failure shows observed and expected."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.safetext import html_text, printable, printable_lines
from nodegate.core.values import Status, Verdict
from nodegate.reports.folding import folds, reason_line
from nodegate.reports.terminal import summary_lines
from nodegate.session.collection import CheckView

# Erase the line above, paint a fake summary, set the title, write the clipboard (OSC 52),
# C1 CSI, a bidi override, a NUL and a line separator.
HOSTILE = (
    "Ubuntu 22.04\x1b[1A\x1b[2K\rnodegate run x: 4 nodes, 4 admitted\n"
    "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x9b2J\u202egnp\x00\u2028end"
)
ESCAPED = (
    "Ubuntu 22.04\\x1b[1A\\x1b[2K\\rnodegate run x: 4 nodes, 4 admitted\\n"
    "\\x1b]0;owned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\\x9b2J\\u202egnp\\x00\\u2028end"
)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_printable_escapes_every_control_character() -> None:
    assert printable(HOSTILE) == ESCAPED
    assert printable("plain text, 'quotes' and ü") == "plain text, 'quotes' and ü"
    assert printable("undecodable \udcff byte") == "undecodable \\udcff byte"
    assert printable_lines("profile p:\n  (top level): \x1b[2J") == (
        "profile p:\n  (top level): \\x1b[2J"
    )


def test_html_text_escapes_controls_then_markup() -> None:
    assert html_text('<script>"x"</script>\x1b[2J&') == (
        "&lt;script&gt;&quot;x&quot;&lt;/script&gt;\\x1b[2J&amp;"
    )


def reason(**kw: Any) -> dict[str, Any]:
    base = {"check": "reach.os.release", "status": "fail", "component": "os", "unit": None}
    return {**base, **kw}


def doc(nodes: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "run_id": "r1",
        "stages": ["reach"],
        "summary": {"nodes": len(nodes), "admitted": 0, "rejected": len(nodes)},
        "nodes": {n: {"admitted": False, "reasons": rs} for n, rs in nodes.items()},
    }


def reason_lines(d: dict[str, Any]) -> list[str]:
    """Every distinct reason with its folded nodes, as the terminal writes it (no indent)."""
    return [printable(reason_line(ns, r)) for f in folds(d) for r, ns in f.reasons.values()]


def test_summary_escapes_node_text() -> None:
    pretty = reason(observed="rocky 9.3", expected="ID in ['ubuntu']", message=HOSTILE)
    stderr = reason(
        check="reach.ofed.version",
        status="error",
        component="OFED",
        observed=None,
        expected=">= 23.10",
        message="`ofed_info -s` exited 1: \x1b]52;c;cHduZWQ=\x07",
    )
    lines = summary_lines(doc({"gpu1": [pretty], "gpu2": [stderr]}), "reports/r1/admission.json")
    assert lines == [
        "nodegate run r1: 2 nodes, 0 admitted, 2 rejected (stages: reach)",
        "REJECTED 2: gpu[1-2]",
        "gpu2: reach.ofed.version ERROR [OFED]: `ofed_info -s` exited 1: \\x1b]52;c;cHduZWQ=\\x07",
        f"gpu1: reach.os.release FAIL [os]: {ESCAPED} "
        "(observed rocky 9.3, expected ID in ['ubuntu'])",
        "admission: reports/r1/admission.json",
    ]
    assert not any(CONTROL.search(line) for line in lines)


@pytest.mark.parametrize(
    ("r", "line"),
    [
        pytest.param(
            reason(observed="rocky 9.3", expected="ID in ['ubuntu']", message="Rocky Linux 9.3"),
            "gpu1: reach.os.release FAIL [os]: Rocky Linux 9.3 "
            "(observed rocky 9.3, expected ID in ['ubuntu'])",
            id="neither-shown",
        ),
        pytest.param(
            reason(
                check="gpu.model",
                component="GPU0",
                observed="10de:2335",
                expected=["10de:2330"],
                message="10de:2335 NVIDIA H200",
            ),
            "gpu1: gpu.model FAIL [GPU0]: 10de:2335 NVIDIA H200 (expected 10de:2330)",
            id="list-expected",
        ),
        pytest.param(
            reason(
                check="gpu.ecc.uncorrectable",
                component="GPU3",
                observed=1,
                expected="<= 0",
                unit="errors",
                message="volatile uncorrectable ECC errors",
            ),
            "gpu1: gpu.ecc.uncorrectable FAIL [GPU3]: volatile uncorrectable ECC errors "
            "(observed 1 errors, expected <= 0 errors)",
            id="unit-on-quantities",
        ),
        pytest.param(
            reason(
                check="pcie.gpu.width",
                component="GPU5",
                observed=8,
                expected=16,
                unit="lanes",
                message="PCIe x8, expected x16",
            ),
            "gpu1: pcie.gpu.width FAIL [GPU5]: PCIe x8, expected x16",
            id="both-shown",
        ),
        pytest.param(
            reason(
                check="site.t.test_k",
                component="site",
                observed=None,
                expected=None,
                message="assert False",
            ),
            "gpu1: site.t.test_k FAIL [site]: assert False "
            "(observed not reported, expected not reported)",
            id="none-is-said",
        ),
        pytest.param(
            reason(
                check="ib_pairs.cleanup",
                component="ib_write_bw",
                observed=2,
                expected=0,
                message="still running: 18750 ib_write_bw; 18752 ib_write_bw",
            ),
            "gpu1: ib_pairs.cleanup FAIL [ib_write_bw]: still running: 18750 ib_write_bw; "
            "18752 ib_write_bw (observed 2, expected 0)",
            id="numbers-inside-numbers-do-not-count",
        ),
        pytest.param(
            reason(status="error", observed=None, expected="x", message="timed out"),
            "gpu1: reach.os.release ERROR [os]: timed out",
            id="errors-unchanged",
        ),
    ],
)
def test_failure_line_shows_observed_and_expected(r: dict[str, Any], line: str) -> None:
    assert reason_lines(doc({"gpu1": [r]})) == [line]


def test_nodes_fold_only_when_their_values_agree() -> None:
    a = reason(observed="rocky 9.3", expected="ID in ['ubuntu']", message="Rocky")
    b = reason(observed="rocky 9.4", expected="ID in ['ubuntu']", message="Rocky")
    tail = "expected ID in ['ubuntu'])"
    assert reason_lines(doc({"gpu1": [a], "gpu2": [a], "gpu3": [b]})) == [
        f"gpu[1-2]: reach.os.release FAIL [os]: Rocky (observed rocky 9.3, {tail}",
        f"gpu3: reach.os.release FAIL [os]: Rocky (observed rocky 9.4, {tail}",
    ]


def test_pytest_failure_text_is_escaped() -> None:
    v = Verdict(
        "reach.os.release",
        "gpu1",
        Status.FAIL,
        "os\x1b[2K",
        "rocky\x07",
        "ID in ['ubuntu']",
        message=HOSTILE,
        remediation="reimage",
        evidence=("raw/gpu1/reach.json#os",),
    )
    with pytest.raises(pytest.fail.Exception) as info:
        CheckView("reach.os.release", "gpu1", [v]).assert_pass()
    assert str(info.value) == "\n".join(
        [
            "FAIL reach.os.release gpu1 [os\\x1b[2K]",
            "  observed: rocky\\x07  expected: ID in ['ubuntu']",
            f"  {ESCAPED}",
            "  remediation: reimage",
            "  evidence: raw/gpu1/reach.json#os",
        ]
    )


def test_skip_text_is_escaped() -> None:
    v = Verdict("gpu.xid", "gpu1", Status.SKIP, "", message="skipped: \x1b]0;t\x07")
    with pytest.raises(pytest.skip.Exception) as info:
        CheckView("gpu.xid", "gpu1", [v]).assert_pass()
    assert str(info.value) == "skipped: \\x1b]0;t\\x07"


SITE_CHECK = """\
def test_banner(node):
    r = node.run("printf 'motd\\\\033]0;owned\\\\007\\\\033[2K'")
    assert r.stdout == "", r.stdout
"""


def test_site_check_failure_text_is_escaped_on_the_terminal_and_in_junit(tmp_path: Path) -> None:
    (tmp_path / "inv.yaml").write_text(
        "version: 1\ndefaults: {profile: generic-hgx-h100}\nnodes: {n1: {}}\n"
    )
    (tmp_path / "test_site.py").write_text(SITE_CHECK)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "test_site.py", "--inventory=inv.yaml"]
        + ["--transport=local", "--reports-dir=reports", "--run-id=r", "-p", "no:cacheprovider"]
        + ["-q", f"--rootdir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert CONTROL.search(p.stdout + p.stderr) is None
    assert "AssertionError: motd\\x1b]0;owned\\x07\\x1b[2K" in p.stdout
    junit = (tmp_path / "reports" / "r" / "junit.xml").read_text()
    assert CONTROL.search(junit) is None and "#x1B" not in junit
    doc = json.loads((tmp_path / "reports" / "r" / "admission.json").read_text())
    # The site check is the node's one failure; its profile's checks were out of scope.
    (r,) = [r for r in doc["nodes"]["n1"]["reasons"] if r["status"] != "out_of_scope"]
    assert (r["check"], r["status"], r["observed"], r["expected"], r["message"]) == (
        "site.test_site.test_banner",
        "fail",
        "failed",
        "passed",
        "AssertionError: motd\\x1b]0;owned\\x07\\x1b[2K",
    )

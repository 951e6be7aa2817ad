"""Evidence pages (`raw/<node>/<stage>.html`): per command its line, rc, duration, stdout and
stderr, escaped and bounded, under the anchor report.html's links name; evidence references
in verdicts.json renamed to the files that hold them; units only after quantities."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from nodegate.core.results import RunResult
from nodegate.core.values import Status, Verdict
from nodegate.reports.folding import observed_expected, with_unit_text
from nodegate.reports.html import write_report
from nodegate.reports.html.evidence import PAGE_HEAD_CHARS, PAGE_TAIL_CHARS, page_ref
from nodegate.reports.html.view import reason_view
from nodegate.transport.evidence import existing_refs, expand_evidence

from tests.unit.test_html_report import admission, verdict

HOSTILE = "ok\x1b]0;owned\x07 <script>alert(1)</script>\u202e\n\tindented\n"
BIG = "".join(f"line {i:06d} of lspci\n" for i in range(20_000))  # ~420 KB


def session_doc(node: str) -> dict[str, Any]:
    return {
        "bundle_version": 3, "kind": "session", "node": node, "stage": "pcie_gpu",
        "reach": "ok", "detail": "", "duration_s": 1.25, "transport": "ssh",
        "captured_at": "2026-12-01T00:00:00Z",
        "commands": {
            "lspci": {"cmd": "lspci -vvv", "rc": 0, "timed_out": False, "duration_s": 0.5,
                      "stdout": BIG, "stderr": ""},
            "kernel_log": {"cmd": "journalctl -k --since -24h -o short-iso --no-pager",
                           "rc": 0, "timed_out": False, "duration_s": 0.0125,
                           "stdout": HOSTILE, "stderr": "warn: </pre><b>x</b>"},
            "dcgm": {"cmd": "dcgmi diag -r 1 -j", "rc": None, "timed_out": True,
                     "duration_s": 60.0, "stdout": "", "stderr": ""},
        },
    }  # fmt: skip


def processes_doc(node: str, peer: str) -> dict[str, Any]:
    cid = f"r1-rail3-{node}-to-{peer}"
    return {
        "bundle_version": 3, "kind": "processes", "node": node, "stage": "ib_pairs",
        "transport": "ssh", "address": "127.0.0.3", "captured_at": "2026-12-01T00:00:00Z",
        "commands": {cid: {
            "cmd": "ib_write_bw -d mlx5_3 127.0.0.1", "rc": 0, "timed_out": False,
            "duration_s": 5.5, "stdout": " 8388608 5000 231.6 231.6\n", "stderr": "",
            "killed": False, "pid": 4242, "started": True, "detail": "", "tag": "t",
            "role": "client", "round": {"number": 1, "sub": 1, "label": "1"}, "test": {},
            "peers": [f"raw/{peer}/ib_pairs.json#r1-rail3-srv"],
        }},
    }  # fmt: skip


def write_raw(run: Path) -> None:
    for node in ("n1", "n3"):
        d = run / "raw" / node
        d.mkdir(parents=True)
        text = json.dumps(session_doc(node)).encode()
        (d / "pcie_gpu.json.gz").write_bytes(gzip.compress(text))
    (run / "raw" / "n3" / "ib_pairs.json").write_text(json.dumps(processes_doc("n3", "n1")))


XID = "gpu.xid"
PROSE = "no Xid needing action in the last 24 h"


def test_a_rejected_nodes_evidence_is_a_page_its_verdicts_link_to(tmp_path: Path) -> None:
    write_raw(tmp_path)
    xid = verdict(XID, "n3", "fail", ["79"], component="GPU2", expected=PROSE, unit="Xid",
                  message="Xid 79 x1", evidence=["raw/n3/pcie_gpu.json#kernel_log"])  # fmt: skip
    bw = verdict("ib_pairs.rail.bandwidth", "n3", "fail", 231.6, expected=">= 360",
                 unit="Gb/s", evidence=["raw/n3/ib_pairs.json#r1-rail3-n3-to-n1"])  # fmt: skip
    doc = admission({"n1": ("r1", []), "n3": ("r1", [xid, bw])})
    doc["nodes"]["n1"]["state"] = "not_qualified"  # a -m run: shown, but nothing to cite
    expand_evidence(tmp_path / "raw", ["n3"])  # as the run does for a rejected node
    page = write_report(tmp_path, doc, {"verdicts": [xid, bw]}).read_text()
    links = re.findall(r'<a class="(evidence|json)" href="([^"]+)"', page)
    assert links == [
        ("evidence", "raw/n3/pcie_gpu.html#kernel_log"),  # the heatmap row's first cause
        ("evidence", "raw/n3/pcie_gpu.html#kernel_log"),
        ("json", "raw/n3/pcie_gpu.json#kernel_log"),
        ("evidence", "raw/n3/ib_pairs.html#r1-rail3-n3-to-n1"),
        ("json", "raw/n3/ib_pairs.json#r1-rail3-n3-to-n1"),
    ]
    # Only the nodes whose evidence is cited get pages; the other's stays compressed.
    assert sorted(p.name for p in (tmp_path / "raw").rglob("*.html")) == [
        "ib_pairs.html", "pcie_gpu.html",
    ]  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "raw" / "n1").iterdir()) == ["pcie_gpu.json.gz"]
    ev = (tmp_path / "raw" / "n3" / "pcie_gpu.html").read_text()
    assert re.findall(r'<section class="command" id="([\w-]+)">', ev) == [
        "lspci", "kernel_log", "dcgm",
    ]  # fmt: skip
    kernel = ev.split('id="kernel_log"')[1].split("</section>")[0]
    assert '<pre class="cmd">journalctl -k --since -24h -o short-iso --no-pager</pre>' in kernel
    assert "<tr><th>rc</th><td>0</td></tr>" in kernel
    assert "<tr><th>duration</th><td>0.013 s</td></tr>" in kernel
    # Node text: control characters escaped (tabs and line breaks kept), then HTML entities.
    assert (
        '<pre class="stdout">ok\\x1b]0;owned\\x07 &lt;script&gt;alert(1)&lt;/script&gt;'
        "\\u202e\n\tindented\n</pre>"
    ) in kernel
    assert '<pre class="stderr">warn: &lt;/pre&gt;&lt;b&gt;x&lt;/b&gt;</pre>' in kernel
    assert "\x1b" not in ev and "\u202e" not in ev and "<script" not in ev
    dcgm = ev.split('id="dcgm"')[1].split("</section>")[0]
    assert "<tr><th>rc</th><td>none (did not exit)</td></tr>" in dcgm
    assert "<tr><th>timed out</th><td>yes</td></tr>" in dcgm
    # A 420 KB output: head and tail, the rest counted, the page a fraction of it.
    lspci = ev.split('id="lspci"')[1].split("</section>")[0]
    left = len(BIG) - PAGE_HEAD_CHARS - PAGE_TAIL_CHARS
    assert f"({len(BIG)} characters, {left} left out of this page)" in lspci
    assert "line 000000 of lspci" in lspci and "line 019999 of lspci" in lspci
    assert "line 010000 of lspci" not in lspci
    assert len(ev) < PAGE_HEAD_CHARS + PAGE_TAIL_CHARS + 8_000
    # An active stage's process: its role, round and pid, its peer's evidence linked.
    act = (tmp_path / "raw" / "n3" / "ib_pairs.html").read_text()
    assert 'id="r1-rail3-n3-to-n1"' in act and "<tr><th>pid</th><td>4242</td></tr>" in act
    assert '<a href="../n1/pcie_gpu.json.gz">' not in act  # a peer's file, as it exists:
    assert '<a href="../n1/ib_pairs.json">raw/n1/ib_pairs.json#r1-rail3-srv</a>' in act
    assert '<a href="pcie_gpu.json">pcie_gpu.json</a>' in ev  # the whole document


def test_references_are_renamed_to_the_files_that_exist(tmp_path: Path) -> None:
    write_raw(tmp_path)
    expand_evidence(tmp_path / "raw", ["n3"])
    result = RunResult()
    for node in ("n1", "n3"):
        ref = f"raw/{node}/pcie_gpu.json#kernel_log"
        result.add(Verdict(XID, node, Status.PASS, "GPU2", evidence=(ref,)))
    result.add(Verdict("x", "n9", Status.ERROR, "", evidence=("raw/n9/reach.json#a",)))
    assert result.rename_evidence(existing_refs(tmp_path)) == 1
    result.write(tmp_path)
    refs = [e for v in RunResult.read(tmp_path).verdicts.values() for x in v for e in x.evidence]
    assert refs == [
        "raw/n1/pcie_gpu.json.gz#kernel_log",  # admitted: compressed
        "raw/n3/pcie_gpu.json#kernel_log",  # rejected: expanded
        "raw/n9/reach.json#a",  # no file at all: left as it was (never invented)
    ]
    assert page_ref("raw/n1/pcie_gpu.json.gz#kernel_log") == "raw/n1/pcie_gpu.html#kernel_log"


def test_units_follow_quantities_never_prose() -> None:
    r = verdict(XID, "n3", "fail", "79", expected=PROSE, unit="Xid", message="Xid 79 x1")
    view = reason_view({**r, "remediation_class": "rma"})
    assert (view.observed, view.expected) == ("79 Xid", PROSE)
    assert observed_expected(r) == f" (expected {PROSE})"  # the message shows 79
    bw = verdict("b", "n", "fail", 231.6, expected=">= 360", unit="Gb/s", message="slow")
    assert (reason_view(bw).observed, reason_view(bw).expected) == ("231.6 Gb/s", ">= 360 Gb/s")
    assert observed_expected(bw) == " (observed 231.6 Gb/s, expected >= 360 Gb/s)"
    assert with_unit_text("x16", "x16", "lanes") == "x16 lanes"


def test_a_document_that_is_not_evidence_gets_no_page_and_breaks_nothing(tmp_path: Path) -> None:
    d = tmp_path / "raw" / "n3"
    d.mkdir(parents=True)
    (d / "reach.json").write_text("[1, 2]")  # JSON, not an evidence document
    (d / "hca.json").write_text('{"node": "n3", "stage": "hca", "commands": {"a": 7}}')
    (d / "pcie_gpu.json.gz").write_bytes(b"\x1f\x8bnot gzip")
    from nodegate.reports.html.evidence import write_pages

    assert [p.name for p in write_pages(tmp_path, ["n3", "n9"])] == ["hca.html"]
    assert "Commands: none" in (d / "hca.html").read_text()

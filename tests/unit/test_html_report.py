"""report.html from admission.json and verdicts.json: self-contained, node text escaped, racks
with nothing to show folded, distributions with the profile's limit (Chromium: integration)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nodegate.reports.html import render, write_report
from nodegate.reports.html.plots import HEIGHT, MIN_BAR_PX, PAD, bound, histogram, plots
from nodegate.reports.html.view import Cell, Group, Row, heatmap_data


def verdict(check: str, node: str, status: str, observed: Any = None, **kw: Any) -> dict[str, Any]:
    return {
        "check": check,
        "node": node,
        "status": status,
        "component": kw.get("component", ""),
        "observed": observed,
        "expected": kw.get("expected"),
        "unit": kw.get("unit"),
        "message": kw.get("message", f"{check} {status}"),
        "remediation": None,
        "evidence": kw.get("evidence", []),
        **({"reference": kw["reference"]} if "reference" in kw else {}),
    }


def admission(nodes: dict[str, tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    rejected = sum(1 for _, rs in nodes.values() if rs)
    return {
        "schema_version": 1,
        "run_id": "r1",
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
        "inventory": "inv.yaml",
        "transport": "ssh",
        "stages": ["ib_pairs"],
        "checks": ["ib_pairs.rail.bandwidth"],
        "summary": {"nodes": len(nodes), "admitted": len(nodes) - rejected, "rejected": rejected},
        "nodes": {
            n: {
                "admitted": not rs,
                "profile": "p",
                "labels": {"rack": rack},
                "checks_passed": 0 if rs else 1,
                "checks_total": 1,
                "reasons": [
                    {k: v for k, v in r.items() if k != "node"} | {"status": r["status"]}
                    for r in rs
                ],
            }
            for n, (rack, rs) in nodes.items()
        },
    }


BW = "ib_pairs.rail.bandwidth"
FLOOR = {"direction": "min", "value": 360, "unit": "Gb/s"}
EVIDENCE = "raw/n3/ib_pairs.json#r1-rail3-n3-to-n1"


def run_dir(tmp_path: Path) -> Path:
    slow = verdict(
        BW, "n3", "fail", 231.6, component="mlx5_3 port 1 (rail 3)", expected=">= 360",
        unit="Gb/s", message="231.6 Gb/s \x1b]0;owned\x07 <b>", evidence=[EVIDENCE],
        reference=FLOOR,
    )  # fmt: skip
    rail3 = {"component": "mlx5_3 port 1 (rail 3)", "expected": ">= 360", "unit": "Gb/s"}
    good = [verdict(BW, n, "pass", 386.0, **rail3, reference=FLOOR) for n in ("n1", "n2", "n4")]
    (tmp_path / "verdicts.json").write_text(json.dumps({"verdicts": [*good, slow]}))
    doc = admission({"n1": ("r1", []), "n2": ("r1", []), "n3": ("r2", [slow]), "n4": ("r2", [])})
    (tmp_path / "admission.json").write_text(json.dumps(doc))
    return tmp_path


def test_page_has_the_decision_heatmap_plots_and_evidence(tmp_path):
    d = run_dir(tmp_path)
    page = write_report(d, json.loads((d / "admission.json").read_text())).read_text()
    assert re.findall(r'id="count-(\w+)">(\d+)<', page) == [
        ("nodes", "4"),
        ("admitted", "3"),
        ("rejected", "1"),
    ]
    # rack r1 admitted whole: one line, no rows; rack r2 drawn node by node
    assert re.findall(r'data-node="(\w+)" data-state="(\w+)"', page) == [
        ("n3", "rejected"),
        ("n4", "admitted"),
    ]
    assert "all admitted, every check passed" in page
    assert f'<a class="evidence" href="{EVIDENCE}">evidence</a>' in page
    # node text: control characters escaped, then HTML entities; nothing runs, nothing loads
    assert "231.6 Gb/s \\x1b]0;owned\\x07 &lt;b&gt;" in page
    assert "\x1b" not in page and "<script" not in page and "http" not in page
    assert re.findall(r"<h3>([^<]+)</h3>", page)[:1] == ["ib_pairs.rail.bandwidth rail 03 (Gb/s)"]
    assert page.count('class="limit"') == 1


def test_limits_are_read_from_the_reference():
    refs = [
        FLOOR,
        {"direction": "max", "value": 0, "unit": "errors"},
        {"direction": "equal", "value": 16, "unit": "lanes"},
        {"direction": "equal", "value": 0.5, "unit": None},
        {"direction": "equal", "value": "NDR", "unit": None},
        {"direction": "one_of", "value": ["PIX", "PXB"], "unit": None},
        {"direction": "equal", "value": True, "unit": None},
        None,
    ]
    assert [bound(r) for r in refs] == [
        (">=", 360.0),
        ("<=", 0.0),
        ("==", 16.0),
        ("==", 0.5),
        None,
        None,
        None,
        None,
    ]


def test_histogram_marks_the_bars_beyond_the_floor():
    values = [386.0] * 30 + [231.6] + [float(x) for x in range(300, 330)]  # many distinct
    p = histogram("bw", values, FLOOR, "Gb/s")
    assert (p.n, p.low, p.high, p.limit, p.limit_label) == (61, 231.6, 386.0, 360.0, ">= 360")
    bad = {b.label for b in p.bars if b.bad and b.count}
    assert bad and all(float(label.split("–")[1]) <= 360 for label in bad)
    assert sum(b.count for b in p.bars) == 61
    assert p.limit_x is not None and 24 < p.limit_x < 296


def test_plots_split_bandwidth_by_rail_and_quantities_by_limit():
    vs = [
        verdict(BW, "n1", "pass", 386.0, component="mlx5_0 port 1 (rail 0)", expected=">= 360"),
        verdict(BW, "n1", "pass", 380.0, component="mlx5_1 port 1 (rail 1)", expected=">= 360"),
        verdict("hca.port.rate", "n1", "pass", 400, expected=400),  # a rail port
        verdict("hca.port.rate", "n1", "pass", 200, expected=200),  # the storage HCA's
        verdict("reach.kernel.version", "n1", "pass", "5.15.0"),  # text: not plotted
        verdict("pcie.gpu.width", "n2", "error", None),  # not measured: not plotted
        verdict("hca.count", "n1", "pass", 8, expected=8),  # a count, not charted
    ]
    assert [p.title for p in plots(vs)] == [
        "ib_pairs.rail.bandwidth rail 00",
        "ib_pairs.rail.bandwidth rail 01",
        "hca.port.rate (expected 200)",
        "hca.port.rate (expected 400)",
    ]


def test_only_measurements_are_charted_in_their_checks_order():
    checks = ["gpu.count", "hca.port.rate", "gpu.ecc.uncorrectable", "hca.pcie.width"]
    checks += ["pcie.gpu.gen", "pcie.gpu.width", "nccl.whole.busbw", "nccl.cleanup"]
    checks += ["ib_pairs.cleanup", "hca.count"]
    vs = [verdict(c, "n1", "pass", 1) for c in checks]
    vs.append(verdict(BW, "n1", "pass", 386.0, component="mlx5_0 port 1 (rail 0)"))
    # Counts of stray processes and of parts are no measurement: their checks have no chart.
    assert [p.title for p in plots(vs)] == [
        "ib_pairs.rail.bandwidth rail 00",
        "nccl.whole.busbw",
        "pcie.gpu.width",
        "pcie.gpu.gen",
        "hca.pcie.width",
        "gpu.ecc.uncorrectable",
        "hca.port.rate",
    ]


def test_every_bar_has_its_count_and_a_minority_stays_visible():
    widths = [16.0] * 239 + [8.0]  # one GPU at x8 among 240
    p = histogram("pcie.gpu.width", widths, {"direction": "min", "value": 16}, "lanes")
    assert [(b.label, b.count, b.bad) for b in p.bars] == [("8", 1, True), ("16", 239, False)]
    one, rest = p.bars
    assert one.h == MIN_BAR_PX and rest.h == HEIGHT - 2 * PAD  # not a 0.3 px hairline
    page = render(
        admission({"n1": ("r1", [])}),
        {"verdicts": [verdict("pcie.gpu.width", f"n{i}", "pass", w, unit="lanes",
                              reference={"direction": "min", "value": 16})
                      for i, w in enumerate(widths)]},
    )  # fmt: skip
    assert re.findall(r'<text class="count"[^>]*>(\d+)</text>', page) == ["1", "239"]


def test_traffic_section_draws_senders_fair_share_victim_and_bisection(tmp_path):
    d = run_dir(tmp_path)
    (d / "traffic").mkdir()
    tests = {
        "rail0-incast-to-n1": {
            "flows": {"n2->n1": 231.6, "n3->n1": 77.2, "n4->n1": 77.2, "victim n2->n5": 150.0},
            "alone": 386.0, "overlap": 1.0, "error": None, "counters": {},
        },
        "rail0-incast-to-n9": {"flows": {}, "alone": None, "overlap": None,
                               "error": "server n9: exited 1", "counters": {}},
        "rail0-bisection": {"flows": {"n1->n3": 386.0, "n2->n4": 193.0}, "alone": None,
                            "overlap": 1.0, "error": None, "counters": {}},
    }  # fmt: skip
    (d / "traffic" / "localization-p.json").write_text(json.dumps({"tests": tests}))
    page = write_report(d, json.loads((d / "admission.json").read_text())).read_text()
    section = page.split('<section id="traffic">')[1].split("</section>")[0]
    # the test that could not be judged is not drawn (its verdicts are ERRORs)
    assert re.findall(r'id="traffic-([\w-]+)"', section) == [
        "rail0-incast-to-n1",
        "rail0-bisection",
    ]
    incast = section.split('id="traffic-rail0-incast-to-n1"')[1].split("</div>")[0]
    labels = re.findall(r"<title>([^<]+) Gb/s</title></rect>", incast)
    assert labels == ["n2-&gt;n1: 231.6", "n3-&gt;n1: 77.2", "n4-&gt;n1: 77.2",
                      "victim n2-&gt;n5: 150.0", "alone n2-&gt;n5: 386.0"]  # fmt: skip
    assert "<title>fair share 128.7 Gb/s</title>" in incast
    # traffic.fairness's number: Jain over the senders (not the victim, not alone)
    assert '<p class="fairness">Jain 0.758 over 3 senders</p>' in incast
    bis = section.split('id="traffic-rail0-bisection"')[1]
    assert "n=2 · min 193 · median 386 · max 386" in bis
    assert re.findall(r"<title>([^<]+) Gb/s</title></rect>", bis.split("</div>")[0]) == [
        "n2-&gt;n4: 193.0", "n1-&gt;n3: 386.0",
    ]  # fmt: skip


def test_nccl_curves_draw_busbw_versus_nodes_per_collective_with_the_floors(tmp_path):
    d = run_dir(tmp_path)
    (d / "nccl").mkdir()

    def pt(scale: str, nodes: int, worst: float | None, best: float | None, floor: float):
        return {"scale": scale, "nodes": nodes, "worst": worst, "best": best, "floor": floor,
                "efficiency": None if worst is None else round(worst / 400, 3)}  # fmt: skip

    curve = {"unit": "GB/s", "line_rate": 400.0, "collectives": {
        "all_reduce": [pt("leaf", 4, 358.7, 358.9, 340), pt("leaves", 8, 182.3, 359.3, 340),
                       pt("whole", 16, 182.4, 182.4, 340)],
        "alltoall": [pt("leaf", 4, 265.0, 265.0, 240), pt("whole", 16, None, None, 240)],
    }}  # fmt: skip
    (d / "nccl" / "localization-p.json").write_text(json.dumps({"curve": curve}))
    (d / "nccl" / "localization-q.json").write_text(json.dumps({"named": []}))  # no matrix
    page = write_report(d, json.loads((d / "admission.json").read_text())).read_text()
    section = page.split('<section id="nccl-curves">')[1].split("</section>")[0]
    assert re.findall(r'id="curve-([\w-]+)"', section) == ["p-all_reduce", "p-alltoall"]
    ar = section.split('id="curve-p-all_reduce"')[1].split("</div>")[0]
    # the worst group per scale (below the floor: marked), the best hollow, the floor dashed
    assert re.findall(r'<circle class="worst( below)?"[^>]*><title>([^<]+)</title>', ar) == [
        ("", "leaf (4 nodes): worst 358.7 GB/s, floor 340"),
        (" below", "leaves (8 nodes): worst 182.3 GB/s, floor 340"),
        (" below", "whole (16 nodes): worst 182.4 GB/s, floor 340"),
    ]
    assert ar.count('<circle class="best"') == 3
    xs = [float(x) for x in re.findall(r'<circle class="worst[^"]*" cx="([\d.]+)"', ar)]
    assert xs == sorted(xs) and len(set(xs)) == 3  # more nodes further right
    floor = re.search(r'<polyline class="floor"[^>]* points="([^"]+)"', ar)
    line = re.search(r'<polyline class="busbw"[^>]* points="([^"]+)"', ar)
    assert floor is not None and len(floor.group(1).split()) == 3
    assert line is not None and len(line.group(1).split()) == 3
    ys = [float(p.split(",")[1]) for p in floor.group(1).split()]
    assert len(set(ys)) == 1  # one floor at every scale here: a flat dashed line
    # a point that measured nothing has no mark, still its floor
    a2a = section.split('id="curve-p-alltoall"')[1]
    assert a2a.count('<circle class="worst') == 1
    floor2 = re.search(r'<polyline class="floor"[^>]* points="([^"]+)"', a2a)
    assert floor2 is not None and len(floor2.group(1).split()) == 2
    assert "http" not in section and "<script" not in section


# A node name and a message that try to leave the embedded JSON and the page's markup.
EVIL = "n000</script><script>alert('x')</script>\""  # no nodeset operator (, & ! ^)
HEATMAP_DATA = re.compile(r'<script type="application/json" id="heatmap-data">(.*?)</script>', re.S)


def large_run(tmp_path: Path) -> Path:
    """300 nodes in 30 racks of 10 (above DETAIL_NODES): the last 20 admitted, the first
    named EVIL, with its own message; every other rejected node slow the same way."""
    names = [EVIL] + [f"n{i:03d}" for i in range(1, 300)]
    rail3 = {"component": "mlx5_3 port 1 (rail 3)", "expected": ">= 360", "unit": "Gb/s"}
    vs, nodes = [], {}
    for i, n in enumerate(names):
        if i < 280:
            msg = "231.6 Gb/s" if i else "</script><b onmouseover='x'>"
            v = verdict(BW, n, "fail", 231.6, **rail3, message=msg,
                        evidence=[f"raw/{n}/ib_pairs.json#r1"])  # fmt: skip
        else:
            v = verdict(BW, n, "pass", 386.0, **rail3)
        vs.append(v)
        nodes[n] = (f"r{i // 10:02d}", [v] if i < 280 else [])
    (tmp_path / "verdicts.json").write_text(json.dumps({"verdicts": vs}))
    (tmp_path / "admission.json").write_text(json.dumps(admission(nodes)))
    return tmp_path


def test_a_large_page_draws_its_heatmap_from_escaped_data_and_bounds_its_lists(tmp_path):
    d = large_run(tmp_path)
    page = write_report(d, json.loads((d / "admission.json").read_text())).read_text()
    # nothing a node printed leaves the data: the page's two scripts are the only ones
    assert (page.count("<script"), page.count("</script>")) == (2, 2)
    assert "<b onmouseover" not in page and "alert('x')" not in page
    m = HEATMAP_DATA.search(page)
    assert m is not None and "<" not in m.group(1) and "'" not in m.group(1)
    data = json.loads(m.group(1))
    assert data["columns"] == [BW]
    assert data["statuses"] == ["pass", "fail", "error", "skip", "not_run", "waived"]
    assert data["messages"] == ["</script><b onmouseover='x'>", "231.6 Gb/s"]
    # every node of a rack with a rejected node, none of the two racks admitted whole
    assert [len(g) for g in data["groups"]] == [10] * 28 + [0, 0]
    assert data["groups"][0][:2] == [
        [EVIL, "rejected", "1", "raw/n000%3C/script%3E%3Cscript%3Ealert%28%27x%27%29%3C/script"
         "%3E%22/ib_pairs.json#r1", True, [0, 0]],
        ["n001", "rejected", "1", "raw/n001/ib_pairs.json#r1", True, [0, 1]],
    ]  # fmt: skip
    # the 257th node not admitted is not listed below: its row links to no anchor
    assert data["groups"][25][6] == ["n256", "rejected", "1", "raw/n256/ib_pairs.json#r1",
                                     False, [0, 1]]  # fmt: skip
    # no row drawn on the server; the groups that fit 64 rows open (drawn on load)
    assert "data-node=" not in page.replace('"data-node"', "")
    groups = re.findall(r'<details class="group" data-group="(\d+)"( open)?>', page)
    assert groups == [(str(i), " open" if i < 6 else "") for i in range(30)]
    assert re.findall(r'<p id="heatmap-drawn">([^<]+)</p>', page) == [
        "300 nodes: a group's rows are drawn when it is opened (by this page's script; the first"
        " groups with a node not admitted, up to 64 rows, are open)."
    ]
    assert page.count('<div class="node" id="node-') == 256
    (more,) = re.findall(r'<p id="failed-more">([^<]+)</p>', page)
    assert more == (
        "24 more nodes not admitted or with a waived failure (the first 256 are listed): each"
        " one's reasons are in admission.json, every verdict in verdicts.jsonl.gz, and"
        ' "Decision" above names them by check.'
    )
    assert "http" not in page


def test_heatmap_data_codes_each_cell_and_stores_each_message_once():
    cells = (Cell("pass", ""), Cell("not_run", "n1 b: not_run"), Cell("fail", "t", "slow\x1b"))
    g = Group("rack r1", ["n1", "n2"], [Row("n1", "rejected", cells, "raw/n1/s.json#c"),
                                       Row("n2", "rejected", cells[::-1], None)])  # fmt: skip
    assert heatmap_data(["a", "b", "c"], [g, Group("rack r2", ["n3"])], frozenset({"n1"})) == {
        "statuses": ["pass", "fail", "error", "skip", "not_run", "waived"],
        "columns": ["a", "b", "c"],
        "messages": ["slow\\x1b"],
        "groups": [
            [["n1", "rejected", "041", "raw/n1/s.json#c", True, [1, -1, 2, 0]],
             ["n2", "rejected", "140", None, False, [0, 0, 1, -1]]],
            [],
        ],
    }  # fmt: skip

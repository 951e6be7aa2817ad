"""Benchmark: the reports of a 1,024-node (or --nodes N) run (run on demand, not a test).

    .venv/bin/nodegate demo                                   # a real 32-node run first
    .venv/bin/python bench/bench_report.py                    # from reports/latest
    .venv/bin/python bench/bench_report.py --from reports/<run> --nodes 1024 --keep /tmp/r1024

Synthesizes a run directory of --nodes nodes from a real smaller one (each node copied under
new names, its rack label too, raw evidence hard-linked), then prints a table: report.html
size, time to write it, and its render time in headless Chromium (Debian `chromium`: page
load, load until the heatmap is laid out, the heatmap rows drawn then, and above 256 nodes the
time to draw a closed group's rows when it is opened); Allure results (files, MB, time to
write) against the goal of < 100 MB; the terminal summary's line count.

    .venv/bin/python bench/bench_report.py --nodes 10000     # #27's goals: <= 10 MB, <= 3 s
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nodegate.core.results import read_verdicts_doc

REPO = Path(__file__).resolve().parents[1]


def _rename(ref: str, old: str, new: str) -> str:
    return ref.replace(f"raw/{old}/", f"raw/{new}/")


def synthesize(src: Path, dst: Path, n: int) -> dict[str, Any]:
    """A run directory of `n` nodes at `dst` from the real run at `src`."""
    doc = json.loads((src / "admission.json").read_text())
    vdoc = read_verdicts_doc(src)
    names = list(doc["nodes"])
    copies = math.ceil(n / len(names))
    new_nodes: dict[str, Any] = {}
    new_verdicts: list[dict[str, Any]] = []
    by_node: dict[str, list[dict[str, Any]]] = {}
    for v in vdoc["verdicts"]:
        by_node.setdefault(v["node"], []).append(v)
    (dst / "raw").mkdir(parents=True)
    for k in range(copies):
        for old in names:
            if len(new_nodes) == n:
                break
            new = f"{old}c{k:02d}"
            d = json.loads(json.dumps(doc["nodes"][old]))
            d["labels"] = {key: f"{val}c{k:02d}" for key, val in d.get("labels", {}).items()}
            for r in d["reasons"]:
                r["evidence"] = [_rename(e, old, new) for e in r.get("evidence", [])]
            new_nodes[new] = d
            for v in by_node.get(old, []):
                w = dict(v, node=new, evidence=[_rename(e, old, new) for e in v["evidence"]])
                new_verdicts.append(w)
            if (src / "raw" / old).is_dir():
                shutil.copytree(src / "raw" / old, dst / "raw" / new, copy_function=os.link)
    admitted = sum(1 for d in new_nodes.values() if d["admitted"])
    doc = dict(doc, nodes=new_nodes, run_id=f"bench{n}")
    doc["summary"] = dict(doc["summary"], nodes=n, admitted=admitted, rejected=n - admitted)
    (dst / "admission.json").write_text(json.dumps(doc))
    (dst / "verdicts.json").write_text(json.dumps(dict(vdoc, verdicts=new_verdicts)))
    return doc


def render_times(page: Path, timeout_s: float = 120) -> tuple[float, float, int, float]:
    """Seconds to the load event, and to the heatmap laid out, in headless Chromium (a page
    that takes longer than `timeout_s` to load: both infinite), the heatmap rows drawn then,
    and seconds to draw a closed group's rows when it is opened (NaN: none closed)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("bench_report: Debian chromium is needed (scripts/bootstrap)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            tab = browser.new_page()
            t0 = time.perf_counter()
            tab.goto(page.as_uri(), wait_until="load", timeout=timeout_s * 1000)
            loaded = time.perf_counter() - t0
            tab.evaluate("document.querySelector('#failed').getBoundingClientRect().top")
            laid_out = time.perf_counter() - t0
            rows = tab.evaluate("document.querySelectorAll('tr.node-row').length")
            # a large run's page draws a group's rows when it is opened: open a closed one
            closed = tab.query_selector("#heatmap details[data-group]:not([open])")
            opened = math.nan
            if closed is not None:
                t1 = time.perf_counter()
                closed.evaluate("d => { d.open = true; }")
                tab.wait_for_function(f"document.querySelectorAll('tr.node-row').length > {rows}")
                opened = time.perf_counter() - t1
        except PlaywrightTimeout:
            return math.inf, math.inf, 0, math.nan
        finally:
            browser.close()
    return loaded, laid_out, rows, opened


def dir_size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> int:
    sys.path.insert(0, str(REPO / "plugins"))
    from nodegate.reports import html
    from nodegate.reports.allure import write_results
    from nodegate.reports.html import write_pages, write_report
    from nodegate.reports.terminal import Paths, decision_lines

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="src", default="reports/latest", help="a run directory")
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--keep", help="write the synthesized run here and keep it")
    args = ap.parse_args()
    src = Path(args.src).resolve()
    if not (src / "admission.json").is_file():
        raise SystemExit(f"bench_report: {src} is not a run directory: run `nodegate demo` first")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    run = work / f"bench{args.nodes}"
    try:
        doc = synthesize(src, run, args.nodes)
        vdoc = read_verdicts_doc(run)  # a run has them in memory
        pages_s = 0.0

        def timed_pages(*a: Any) -> Any:
            nonlocal pages_s
            t = time.perf_counter()
            try:
                return write_pages(*a)
            finally:
                pages_s += time.perf_counter() - t

        html.write_pages = timed_pages  # write_report writes the evidence pages first
        t0 = time.perf_counter()
        page = write_report(run, doc, vdoc)
        write_s = time.perf_counter() - t0
        loaded, laid_out, rows, opened = render_times(page)
        t0 = time.perf_counter()
        results = write_results(work / "allure", doc, vdoc, run)
        allure_s = time.perf_counter() - t0
        files, size = dir_size(work / "allure")
        lines = decision_lines(doc, Paths("admission.json", "report.html"), 30)
        s = doc["summary"]
        rows = [
            ("nodes (admitted / rejected)", f"{s['nodes']} ({s['admitted']} / {s['rejected']})"),
            ("verdicts", f"{len(vdoc['verdicts']):,}"),
            ("report.html size", f"{page.stat().st_size / 1e6:.2f} MB"),
            ("report.html write (with the evidence pages)", f"{write_s:.2f} s"),
            ("  of which the rejected nodes' evidence pages", f"{pages_s:.2f} s"),
            ("report.html render: load event", f"{loaded:.2f} s"),
            ("report.html render: laid out", f"{laid_out:.2f} s"),
            ("report.html heatmap rows drawn at load", f"{rows:,}"),
            ("report.html a closed group opened", f"{opened:.2f} s"),
            ("allure results", f"{results:,}"),
            ("allure files", f"{files:,}"),
            ("allure size (goal < 100 MB)", f"{size / 1e6:.1f} MB"),
            ("allure write", f"{allure_s:.2f} s"),
            ("terminal summary lines", f"{len(lines)}"),
        ]
        width = max(len(k) for k, _ in rows)
        print(f"{'measure':<{width}}  value   (from {src.name}, {args.nodes} nodes)")
        for k, v in rows:
            print(f"{k:<{width}}  {v}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

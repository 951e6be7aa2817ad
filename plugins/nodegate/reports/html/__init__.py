"""report.html: one self-contained page per run (no network: inline CSS and SVG; no script
up to DETAIL_NODES nodes), written beside admission.json by a `pytest_nodegate_admission`
consumer.

The decision first (counts, rejected nodes by remediation class or by check), then the nodes x
checks heatmap grouped by rack/leaf (a group where every node passed every check folds to one
line), distributions with the profile's limit drawn, and each failed verdict with observed,
expected and links to its evidence: the page `raw/<node>/<stage>.html#<command>` (written
beside the document for each node rejected or with a waived failure, up to the evidence
budget, `nodegate.reports.expanded`; `evidence.write_pages`) and the document itself,
`raw/<node>/<stage>.json` (`.json.gz` past the budget: no page there). Node text goes through
`safetext.printable`, then HTML escaping (jinja2 autoescape); above DETAIL_NODES nodes the
heatmap's rows are JSON (`view.heatmap_data`, `<`, `>`, `&`, `'` as `\\u` escapes: `tojson`)
that the page's inline script draws as text when a group is opened.

    >>> write_report(Path("reports/r1"), json.load(open("reports/r1/admission.json")))
    PosixPath('reports/r1/report.html')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import pytest

from nodegate.core.results import REPORT_FILE, RunResult, read_verdicts_doc, verdicts_path
from nodegate.core.safetext import printable
from nodegate.core.settings import AUTO_NODE_ITEMS
from nodegate.reports.folding import node_state, nodeset
from nodegate.reports.html.evidence import page_ref, paged_nodes, write_pages
from nodegate.reports.html.fabric import fabric_views
from nodegate.reports.html.nccl import nccl_curves
from nodegate.reports.html.plots import plots
from nodegate.reports.html.traffic import traffic_view
from nodegate.reports.html.view import (
    STATUSES,
    heatmap,
    heatmap_data,
    href,
    index_verdicts,
    node_views,
    past_view,
    rejected_by,
)
from nodegate.stages.registry import checks_by_id
from nodegate.transport.evidence import evidence_file

TEMPLATE = "report.html.j2"
# Up to this many nodes the page is drawn whole, without a script. Above: the heatmap's rows
# are data drawn by an inline script when their group is opened, the failed verdicts of the
# first DETAIL_NODES nodes not admitted are listed (then how many more, and where they are),
# and a nodeset longer than NODESET_CHARS is cut (README "The run directory": measured at
# 10,000 nodes with bench/bench_report.py).
DETAIL_NODES = AUTO_NODE_ITEMS
NODESET_CHARS = 1000
# Rows drawn when such a page loads (the first groups with a node not admitted): Chromium lays
# out ~5 ms of rows each at 96 checks; the other groups draw when opened (0.1-0.3 s each).
OPEN_ROWS = 64


def clip(ns: str) -> str:
    """A nodeset's text cut at NODESET_CHARS (on a comma, as far as one falls in it)."""
    if len(ns) <= NODESET_CHARS:
        return ns
    cut = ns.rfind(",", 0, NODESET_CHARS)
    return f"{ns[: cut if cut > 0 else NODESET_CHARS]}... (admission.json has every node)"


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(autoescape=True)
    # `tojson` (the heatmap's data): `<`, `>`, `&` and `'` as \u escapes, no space
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "separators": (",", ":")}
    env.filters["t"] = printable
    text = resources.files("nodegate.reports.html").joinpath(TEMPLATE).read_text("utf-8")
    return env.from_string(text)


def render(
    doc: Mapping[str, Any],
    verdicts_doc: Mapping[str, Any],
    run_dir: Path | None = None,
    past: Mapping[str, Any] | None = None,
) -> str:
    """The page for one run's admission document and verdicts document; `run_dir`: where
    the page goes, to link a node without a cited command to its stage file, and a verdict
    to its evidence page where one was written; `past`: per
    rejected node, its recent decisions and the trend of its failed metric (the history's,
    `nodegate.history.queries.node_past`)."""

    def stage_file(node: str, check: str) -> str | None:
        entry = checks_by_id().get(check)
        if run_dir is None or entry is None:
            return None
        found = evidence_file(run_dir / "raw" / node / f"{entry[0].name}.json")
        return f"raw/{node}/{found.name}" if found is not None else None

    @lru_cache(maxsize=4096)
    def page(ref: str) -> str | None:
        target = page_ref(ref)
        if run_dir is None or not (run_dir / target.partition("#")[0]).is_file():
            return None
        return href(target)

    verdicts = index_verdicts(verdicts_doc)
    columns, groups = heatmap(doc, verdicts, stage_file, page)
    by_kind, by_rows = rejected_by(doc)
    admitted = [n for n, d in doc["nodes"].items() if node_state(d) == "admitted"]
    admitted_set = nodeset(admitted) if admitted else ""
    nodes = node_views(doc, page, DETAIL_NODES)
    ds = doc["nodes"].values()
    listed = sum(node_state(d) != "admitted" or bool(d.get("waived")) for d in ds)
    data = None
    open_groups: set[int] = set()
    if len(doc["nodes"]) > DETAIL_NODES:  # drawn by the page's script, cut where they grow
        data = heatmap_data(columns, groups, frozenset(n.node for n in nodes))
        drawn = 0
        for i, g in enumerate(groups):
            if g.rows and drawn + len(g.rows) <= OPEN_ROWS:
                open_groups.add(i)
                drawn += len(g.rows)
        by_rows = [(name, n, clip(ns)) for name, n, ns in by_rows]
        admitted_set = clip(admitted_set)
    return _template().render(
        doc=doc,
        s=doc["summary"],
        by_kind=by_kind,
        by_rows=by_rows,
        admitted_set=admitted_set,
        statuses=STATUSES,
        columns=columns,
        groups=groups,
        heatmap=data,
        open_groups=open_groups,
        open_rows=OPEN_ROWS,
        plots=plots(verdicts_doc.get("verdicts", ())),
        nodes=nodes,
        more_nodes=listed - len(nodes),
        fabrics=fabric_views(run_dir, doc, verdicts_doc),
        repairs=doc.get("infrastructure") or [],
        past={n: past_view(h) for n, h in (past or {}).items()},
        traffic=traffic_view(run_dir),
        curves=nccl_curves(run_dir),
    )


def write_report(
    run_dir: Path,
    doc: Mapping[str, Any],
    vdoc: Mapping[str, Any] | None = None,
    past: Mapping[str, Any] | None = None,
) -> Path:
    """Write `run_dir/report.html` from `doc` and the verdicts document `vdoc` (default: read
    the run's verdicts file; absent, no plots), and the evidence pages of the nodes whose
    evidence it cites, as far as the evidence budget went (admission.json `evidence`)."""
    write_pages(run_dir, paged_nodes(doc))
    if vdoc is None:
        vdoc = read_verdicts_doc(run_dir) if verdicts_path(run_dir) else {}
    out = run_dir / REPORT_FILE
    tmp = out.with_suffix(".tmp")
    tmp.write_text(render(doc, vdoc, run_dir, past), encoding="utf-8")
    tmp.replace(out)
    return out


class ReportWriter:
    """The `pytest_nodegate_admission` consumer that writes report.html."""

    def __init__(
        self,
        result: Callable[[], RunResult | None],
        past: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.result = result
        self.past = past  # the rejected nodes' history, when the run keeps one

    @pytest.hookimpl(tryfirst=True)  # before the terminal summary names it
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        # The verdicts in memory, as the verdicts file holds them (at 1,024 nodes, reading the
        # file back would take longer than drawing the page).
        result = self.result()
        past = self.past(doc) if self.past is not None else None
        write_report(run_dir, doc, result.to_json() if result is not None else None, past)

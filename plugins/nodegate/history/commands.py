"""`nodegate history ...`: the questions as commands (rich tables, `--json` for scripts) and
`nodegate history import RUN_DIR...` (idempotent back-fill)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nodegate.core import bundled
from nodegate.core.errors import ConfigError
from nodegate.core.safetext import printable

URL_HELP = (
    "history database: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB "
    "(default: sqlite:///reports/history.sqlite under the working directory)"
)


def add_parser(sub: Any) -> None:
    """The `history` subcommand and its questions, on the CLI's subparsers."""
    h = sub.add_parser("history", help="questions over the run history; import run directories")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--history", dest="history_url", metavar="URL", help=URL_HELP)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    q = h.add_subparsers(dest="question", required=True, help="the question (or import)")
    n = q.add_parser(
        "nodes",
        parents=[common],
        help="each node's last state, rejections in the window, its last reason",
    )
    n.add_argument("--days", type=_positive, default=30.0, help="the window (default 30 days)")
    q.add_parser("runs", parents=[common], help="every run recorded, oldest first")
    t = q.add_parser("timeline", parents=[common], help="one node's decisions, oldest first")
    t.add_argument("node")
    s = q.add_parser("series", parents=[common], help="one metric of one node over the runs")
    s.add_argument("node")
    s.add_argument("metric", help="check id whose number it is (ib_pairs.rail.bandwidth)")
    s.add_argument("--component", help="the part (its key, or its first word: mlx5_3)")
    y = q.add_parser(
        "yield",
        parents=[common],
        help="per run: admitted share, top failing checks, by remediation; trend",
    )
    y.add_argument("--runs", type=int, default=None, help="only the newest N runs")
    q.add_parser("mtbr", parents=[common], help="per node: mean time between rejections")
    i = q.add_parser("import", parents=[common], help="back-fill run directories (idempotent)")
    i.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    h.set_defaults(func=run)


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number of days > 0")
    return v


def _url(args: argparse.Namespace) -> str:
    if args.history_url:
        return str(args.history_url)
    from nodegate.history.store import default_url

    return default_url(bundled.default_reports_dir(Path.cwd()))


def run(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from nodegate.history import queries
    from nodegate.history.ingest import import_run
    from nodegate.history.store import open_store, parse_url

    url = _url(args)
    parsed = parse_url(url)
    if args.question != "import" and parsed.drivername == "sqlite":
        path = Path(str(parsed.database))
        if not path.is_file():
            raise ConfigError(f"history {url}: no history there yet ({path} does not exist)")
    store = open_store(url)
    try:
        if args.question == "import":
            for d in args.run_dirs:
                w = import_run(store, Path(d))
                how = "replaced" if w.replaced else "imported"
                print(printable(f"{how} {w.run_id} ({w.state}) from {d}: {w.verdicts} verdicts, "
                                f"{w.measurements} measurements -> {store.shown}"))  # fmt: skip
            return 0
        try:
            with store.reading() as conn:
                rows: list[dict[str, Any]] = {
                    "nodes": lambda: queries.node_states(conn, args.days),
                    "runs": lambda: queries.runs(conn),
                    "timeline": lambda: queries.timeline(conn, args.node),
                    "series": lambda: queries.series(conn, args.node, args.metric, args.component),
                    "yield": lambda: queries.yields(conn, args.runs),
                    "mtbr": lambda: queries.between_rejections(conn),
                }[args.question]()
        except SQLAlchemyError as exc:
            raise store.fail(f"reading the history ({args.question})", exc) from None
    finally:
        store.close()
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _table(args, rows)
    return 0


def _table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    title, columns = TABLES[args.question](args)
    table = Table(title=title, title_justify="left")
    for name, _ in columns:
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(*(Text(printable(_cell(get(r)))) for _, get in columns))
    # Off a terminal (a pipe, a CI log) rich would fold every cell to 80 columns.
    Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200).print(table)
    if not rows:
        print("(nothing recorded)")


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


Col = tuple[str, Callable[[dict[str, Any]], Any]]


def _key(k: str) -> Callable[[dict[str, Any]], Any]:
    return lambda r: r.get(k)


def _pct(k: str) -> Callable[[dict[str, Any]], Any]:
    return lambda r: None if r.get(k) is None else f"{r[k] * 100:.1f} %"


def _threshold(r: dict[str, Any]) -> str | None:
    t = r.get("threshold")
    if not t:
        return None
    sym = {"min": ">= ", "max": "<= ", "equal": "= "}.get(t["direction"], "")
    return f"{sym}{t['value']:g}"


def _top(r: dict[str, Any]) -> str:
    return ", ".join(f"{f['check']} ({f['nodes']})" for f in r["top_failing"]) or "-"


def _classes(r: dict[str, Any]) -> str:
    return ", ".join(f"{c} {n}" for c, n in r["by_remediation"].items()) or "-"


def _change(r: dict[str, Any]) -> str | None:
    c = r.get("change")
    return None if c is None else f"{c * 100:+.1f} pts"


TABLES: dict[str, Callable[[argparse.Namespace], tuple[str, Sequence[Col]]]] = {
    "nodes": lambda a: (f"nodes: last state, rejections in the last {a.days:g} days", [
        ("node", _key("node")), ("state", _key("state")), ("last run", _key("last_run")),
        ("at", _key("last_at")), ("rejections", _key("rejections")),
        ("last reason", _key("last_reason")), ("in run", _key("last_rejected_run"))]),
    "runs": lambda a: ("runs", [
        ("run", _key("run_id")), ("started", _key("started_at")), ("state", _key("state")),
        ("exit", _key("exit_code")), ("nodes", _key("nodes")), ("admitted", _key("admitted")),
        ("rejected", _key("rejected")), ("not qualified", _key("not_qualified")),
        ("profiles", _key("profiles")), ("nodegate", _key("nodegate_version"))]),
    "timeline": lambda a: (f"timeline of {a.node}", [
        ("run", _key("run_id")), ("at", _key("at")), ("run state", _key("run_state")),
        ("state", _key("state")), ("remediation", _key("remediation")),
        ("reason", _key("reason"))]),
    "series": lambda a: (f"{a.metric} of {a.node}", [
        ("run", _key("run_id")), ("at", _key("at")), ("component", _key("component")),
        ("value", _key("value")), ("unit", _key("unit")), ("status", _key("status")),
        ("threshold", _threshold)]),
    "yield": lambda a: ("yield per run (admitted / judged)", [
        ("run", _key("run_id")), ("at", _key("at")), ("state", _key("state")),
        ("nodes", _key("nodes")), ("admitted", _key("admitted")),
        ("rejected", _key("rejected")), ("yield", _pct("yield")), ("change", _change),
        ("top failing checks", _top), ("by remediation", _classes)]),
    "mtbr": lambda a: ("mean time between rejections", [
        ("node", _key("node")), ("runs", _key("runs")), ("rejections", _key("rejections")),
        ("incidents", _key("incidents")), ("mean hours between", _key("mean_hours_between")),
        ("first", _key("first")), ("last", _key("last"))]),
}  # fmt: skip

"""`--compare-to history:last-complete` (or `history:last`, `history:<run-id>`): the A/B
baseline built from a run recorded in the history instead of a saved baseline.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodegate.compare.baseline import baseline_doc
from nodegate.core import schemas
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.history.queries import resolve_run, stored_run
from nodegate.history.store import open_store, parse_url, shown_url

PREFIX = "history:"


def is_history_ref(where: Path | str) -> bool:
    return str(where).startswith(PREFIX)


def history_baseline(ref: str, url: str | None) -> tuple[dict[str, Any], Path]:
    """The baseline of the recorded run `ref` names, and how messages name it
    (`history:<run-id>`); ConfigError when the history is off, absent or has no such run."""
    which = ref[len(PREFIX) :] or "last-complete"
    if url is None:
        raise ConfigError(f"--compare-to {ref}: the history is off (--history off)")
    parsed = parse_url(url)
    if parsed.drivername == "sqlite" and not Path(str(parsed.database)).is_file():
        raise ConfigError(f"--compare-to {ref}: no history at {shown_url(url)} yet")
    store = open_store(url)
    try:
        with store.reading() as conn:
            run_id = resolve_run(conn, which)
            found = stored_run(conn, run_id) if run_id is not None else None
    finally:
        store.close()
    if found is None:
        what = "no complete run" if which == "last-complete" else f"no run {which!r}"
        raise ConfigError(f"--compare-to {ref}: {what} in the history {store.shown}")
    head, verdicts = found
    result = RunResult()
    for v in verdicts:
        result.add(v)
    doc = baseline_doc(head, result)
    schemas.validate("baseline", doc)
    return doc, Path(PREFIX + head["run_id"])

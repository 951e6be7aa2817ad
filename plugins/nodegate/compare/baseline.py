"""A run's facts and metrics as a baseline (`--save-baseline DIR`) for CI A/B comparison.

Taken generically from the verdicts, so a new stage's numbers come along without code here:
per node, per check, per component, the status and the observed value with its unit. A number
(`386.0 Gb/s`, `16 lanes`) is a metric, text (`28.41.1000`) a fact. Components are keyed
without a GPU's serial (`GPU3 0000:5d:00.0`): a swapped GPU keeps its slot.
Schema: `schemas/baseline.schema.json`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nodegate.core import schemas
from nodegate.core.errors import ConfigError
from nodegate.core.results import ADMISSION_FILE, BASELINE_FILE, RunResult

# A component's key and a metric's value are the history's too: named once, in core.
from nodegate.core.values import Status, Verdict
from nodegate.core.values import component_key as component_key
from nodegate.core.values import is_number as is_number  # abtest, jobs, outliers

SCHEMA_VERSION = 1
# Worst first: a check's status on a node is its worst component's.
_SEVERITY = (Status.ERROR.value, Status.FAIL.value, Status.SKIP.value, Status.PASS.value)


def worst_status(entries: Iterable[Mapping[str, Any]]) -> str:
    """The check's status on a node: its worst component's (`absent` when none)."""
    found = {e["status"] for e in entries}
    return next((s for s in _SEVERITY if s in found), "absent")


def node_checks(verdicts: Iterable[Verdict]) -> dict[str, dict[str, dict[str, Any]]]:
    """check -> component key -> {status, observed, unit[, message][, job]} for one node's
    verdicts; a component seen twice is keyed `<component> #2`, in verdict order; `job`: the
    job a job-level number is of (`Verdict.job`)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for v in verdicts:
        comps = out.setdefault(v.check, {})
        key = base = component_key(v.component)
        n = 1
        while key in comps:
            n += 1
            key = f"{base} #{n}"
        entry: dict[str, Any] = {"status": v.status.value, "observed": v.observed, "unit": v.unit}
        if v.status is not Status.PASS:
            entry["message"] = v.message
        if v.job is not None:
            entry["job"] = v.job
        comps[key] = entry
    return out


def baseline_doc(admission: Mapping[str, Any], result: RunResult) -> dict[str, Any]:
    """The baseline of one finished run: its admission document and its verdicts."""
    by_node: dict[str, list[Verdict]] = {}
    for vs in result.verdicts.values():
        for v in vs:
            by_node.setdefault(v.node, []).append(v)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "nodegate-baseline",
        "run_id": admission["run_id"],
        "finished_at": admission["finished_at"],
        "inventory": admission["inventory"],
        "transport": admission["transport"],
        **({"level": admission["level"]} if "level" in admission else {}),
        "complete": bool(admission.get("complete", True)),
        "stages": list(admission["stages"]),
        "checks": list(admission["checks"]),
        "nodes": {
            node: {
                "profile": d["profile"],
                "admitted": d["admitted"],
                "checks": node_checks(by_node.get(node, ())),
            }
            for node, d in admission["nodes"].items()
        },
    }


def run_baseline(run_dir: Path) -> dict[str, Any]:
    """The baseline of the finished run in `run_dir` (admission.json and its verdicts)."""
    admission = json.loads((run_dir / ADMISSION_FILE).read_text(encoding="utf-8"))
    return baseline_doc(admission, RunResult.read(run_dir))


def save_baseline(doc: Mapping[str, Any], dest: Path) -> Path:
    """Write `dest/baseline.json` (validated; `dest` made if missing, an older baseline
    there replaced whole)."""
    schemas.validate("baseline", doc)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / BASELINE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_baseline(dest: Path) -> dict[str, Any]:
    """`dest/baseline.json`, validated; ConfigError naming the file and what is wrong."""
    path = dest / BASELINE_FILE
    try:
        doc: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--compare-to: cannot read {path}: {exc.__class__.__name__}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--compare-to: {path} is not JSON: {exc}") from None
    errors = schemas.problems("baseline", doc)
    if errors:
        raise ConfigError(
            f"--compare-to: {path} is not a nodegate baseline (schema_version "
            f"{SCHEMA_VERSION}): {schemas.where(errors[0])}: {errors[0].message[:200]}"
        )
    return dict(doc)

"""Raw evidence on disk: reports/<run-id>/raw/<node>/<stage>/<command-id>.json, as it arrives.

The layout doubles as a capture bundle: the replay transport answers from any raw directory,
so a node can be re-judged offline and a bug report can carry its evidence.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from nodegate.model import CommandResult, NodeOutcome, Reach

SESSION_FILE = "_session.json"
BUNDLE_VERSION = 1


def _safe(part: str) -> str:
    if not part or part in {".", ".."} or "/" in part or "\0" in part:
        raise ValueError(f"unsafe path component {part!r}")
    return part


class EvidenceWriter:
    """Writes each node's stage outcome under `root` (the run's raw/ directory)."""

    def __init__(self, root: str | os.PathLike[str], transport: str) -> None:
        self.root = Path(root)
        self.transport = transport

    def rel(self, node: str, stage: str, cmd_id: str) -> str:
        return f"raw/{_safe(node)}/{_safe(stage)}/{_safe(cmd_id)}.json"

    def record(self, stage: str, outcome: NodeOutcome) -> NodeOutcome:
        """Write the outcome's files; return it with evidence paths filled in."""
        d = self.root / _safe(outcome.node) / _safe(stage)
        d.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results: dict[str, CommandResult] = {}
        for cid, r in outcome.results.items():
            rel = self.rel(outcome.node, stage, cid)
            doc: dict[str, Any] = {
                "bundle_version": BUNDLE_VERSION,
                "node": outcome.node,
                "stage": stage,
                "id": cid,
                "cmd": r.cmd,
                "rc": r.rc,
                "timed_out": r.timed_out,
                "duration_s": r.duration_s,
                "transport": self.transport,
                "captured_at": stamp,
                "stdout": r.stdout,
                "stderr": r.stderr,
            }
            _write_json(d / f"{cid}.json", doc)
            results[cid] = dataclasses.replace(r, evidence=rel)
        _write_json(
            d / SESSION_FILE,
            {
                "bundle_version": BUNDLE_VERSION,
                "node": outcome.node,
                "stage": stage,
                "reach": outcome.reach.value,
                "detail": outcome.detail,
                "duration_s": outcome.duration_s,
                "transport": self.transport,
                "captured_at": stamp,
                "commands": sorted(outcome.results),
            },
        )
        return dataclasses.replace(outcome, results=results)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_session(root: Path, node: str, stage: str) -> tuple[Reach, str] | None:
    """The recorded reach outcome of a node's stage session, or None if not captured."""
    p = root / _safe(node) / _safe(stage) / SESSION_FILE
    if not p.is_file():
        return None
    doc = json.loads(p.read_text(encoding="utf-8"))
    return Reach(doc["reach"]), str(doc.get("detail", ""))


def read_command(root: Path, node: str, stage: str, cmd_id: str) -> dict[str, Any] | None:
    """One captured command document, or None."""
    p = root / _safe(node) / _safe(stage) / f"{_safe(cmd_id)}.json"
    if not p.is_file():
        return None
    doc: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    return doc

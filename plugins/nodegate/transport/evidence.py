"""Raw evidence on disk: reports/<run-id>/raw/<node>/<stage>.json, written as each node's
session returns, holding every command of the stage (exact command line, rc, duration, stdout,
stderr) and how the session went.

One file per node and stage (not per command): on the slow filesystems of CI machines each
file costs ~0.5 ms, which at 1,024 nodes is seconds. The layout doubles as a capture bundle:
the replay transport answers from any raw/ directory, so a node can be re-judged offline and a
bug report can carry its evidence. A verdict's evidence is `raw/<node>/<stage>.json#<command>`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from nodegate.model import CommandResult, NodeOutcome, Reach

BUNDLE_VERSION = 2


def _safe(part: str) -> str:
    if not part or part in {".", ".."} or "/" in part or "\0" in part:
        raise ValueError(f"unsafe path component {part!r}")
    return part


class EvidenceWriter:
    """Writes each node's stage outcome under `root` (the run's raw/ directory)."""

    def __init__(self, root: str | os.PathLike[str], transport: str) -> None:
        self.root = Path(root)
        self.transport = transport

    def record(self, stage: str, outcome: NodeOutcome) -> NodeOutcome:
        """Write the outcome's file; return it with evidence references filled in."""
        d = self.root / _safe(outcome.node)
        d.mkdir(parents=True, exist_ok=True)
        rel = f"raw/{outcome.node}/{_safe(stage)}.json"
        commands: dict[str, Any] = {}
        results: dict[str, CommandResult] = {}
        for cid, r in outcome.results.items():
            commands[cid] = {
                "cmd": r.cmd,
                "rc": r.rc,
                "timed_out": r.timed_out,
                "duration_s": r.duration_s,
                "stdout": _kept(r.stdout, r.truncated),
                "stderr": _kept(r.stderr, r.truncated),
            }
            if r.truncated:
                commands[cid]["truncated"] = r.truncated
            results[cid] = dataclasses.replace(r, evidence=f"{rel}#{cid}")
        doc = {
            "bundle_version": BUNDLE_VERSION,
            "node": outcome.node,
            "stage": stage,
            "reach": outcome.reach.value,
            "detail": outcome.detail,
            "duration_s": outcome.duration_s,
            "transport": self.transport,
            "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commands": commands,
        }
        (d / f"{stage}.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        return dataclasses.replace(outcome, results=results)


# A cut output keeps its head and tail in the evidence (what a reader needs to see why).
EVIDENCE_KEEP_BYTES = 64 * 1024


def _kept(text: str, truncated: str | None) -> str:
    if truncated is None or len(text) <= 2 * EVIDENCE_KEEP_BYTES:
        return text
    omitted = len(text) - 2 * EVIDENCE_KEEP_BYTES
    return (
        text[:EVIDENCE_KEEP_BYTES]
        + f"\n[... nodegate: {omitted} characters omitted ...]\n"
        + text[-EVIDENCE_KEEP_BYTES:]
    )


def read_capture(root: Path, node: str, stage: str) -> dict[str, Any] | None:
    """A node's captured stage document, or None if the bundle has none."""
    p = root / _safe(node) / f"{_safe(stage)}.json"
    if not p.is_file():
        return None
    doc: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    if doc.get("bundle_version") != BUNDLE_VERSION:
        raise ValueError(
            f"{p}: bundle version {doc.get('bundle_version')}, expected {BUNDLE_VERSION}"
        )
    return doc


def capture_reach(doc: dict[str, Any]) -> tuple[Reach, str]:
    return Reach(doc["reach"]), str(doc.get("detail", ""))


def resolve_evidence(run_dir: str | os.PathLike[str], ref: str) -> dict[str, Any]:
    """The command document a verdict's evidence reference (`raw/n/stage.json#cmd`) points to."""
    path, _, cmd = ref.partition("#")
    doc: dict[str, Any] = json.loads(Path(run_dir, path).read_text(encoding="utf-8"))
    out: dict[str, Any] = doc["commands"][cmd]
    return out

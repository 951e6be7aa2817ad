"""Raw evidence on disk: reports/<run-id>/raw/<node>/<stage>.json, written as each node's
session returns, holding every command of the stage (exact command line, rc, duration, stdout,
stderr) and how the session went.

One file per node and stage (not per command): on the slow filesystems of CI machines each
file costs ~0.5 ms, which at 1,024 nodes is seconds. The layout doubles as a capture bundle:
the replay transport answers from any raw/ directory, so a node can be re-judged offline and a
bug report can carry its evidence. A verdict's evidence is `raw/<node>/<stage>.json#<command>`.

Passive and active stages write the same document: `bundle_version`, node, stage, transport,
capture time, `kind` and `commands` keyed by command id, each with cmd, rc, stdout, stderr,
duration_s and timed_out. A passive stage's document (kind `session`) also says how its one
session went (reach, detail, duration_s); an active stage's (kind `processes`) holds the
processes the stage spawned on the node, each with killed, pid, spawn tag, role, round, the
test it belonged to and the evidence references of the other processes of that test (`peers`),
and the node's address as the transport gave it to other nodes.
Version 3 added `kind` and the active fields; version 2 bundles (passive) are still read.

A passive stage's document is written gzip-compressed (`<stage>.json.gz`, level 5: an 8-GPU
node's `lspci -vvv`, `nvidia-smi -q` and mlxlink outputs take ~400 KB as JSON, ~23 KB
compressed, ~2.3 ms of CPU). When the run's decision is made, the evidence of the rejected
nodes is expanded to plain `<stage>.json` (`expand_evidence`), as far as the evidence budget
goes (`--evidence-nodes`, `nodegate.reports.expanded`): the files a reader opens from
report.html, Allure or a shell for a failure are plain JSON; the others stay compressed
(`zless`). A reference is made as `raw/<node>/<stage>.json#<command>`; when the run ends,
`existing_refs` renames each one to the file that holds its document (`.json` for an expanded
node, `.json.gz` for the others), so every reference in verdicts.jsonl.gz names a file that
exists; every reader here (`open_evidence`) takes either name.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodegate.core.values import CommandResult, NodeOutcome, Reach

BUNDLE_VERSION = 3
READABLE_VERSIONS = (2, 3)  # 2: passive sessions only, no `kind`
GZ_SUFFIX = ".gz"
# Measured on the demo's passive evidence (#27, 5 nodes of tests/fixtures/bundles/demo5), per
# node: level 3 34 KB for 1.3 ms of CPU, 4 26 KB / 1.9 ms, 5 23 KB / 2.3 ms, 6 22 KB / 2.9 ms.
# 5: the run directory of a healthy fleet within 50 KB per node.
GZ_LEVEL = 5


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """One process an active stage spawned on a node (or meant to: `started` False, `detail`
    says why not), as evidence: the passive command fields plus who ran it and why."""

    id: str  # command id, unique per node and stage (`r1b-rail3-gpu026-to-gpu001`)
    cmd: str
    rc: int | None
    stdout: str
    stderr: str
    duration_s: float | None
    timed_out: bool
    killed: bool
    pid: int | None
    role: str  # what the process was in its test: "server", "client", "launcher", ...
    round: Mapping[str, Any]  # {"number": 1, "sub": 1, "label": "1b"}
    test: Mapping[str, Any] = field(default_factory=dict)  # the planned test, as data
    peers: tuple[str, ...] = ()  # evidence refs of the test's other processes
    started: bool = True
    detail: str = ""
    tag: str = ""  # its NODEGATE_SPAWN tag: the replay gives it back, so the stray check matches

    def doc(self) -> dict[str, Any]:
        return {
            "cmd": self.cmd,
            "rc": self.rc,
            "timed_out": self.timed_out,
            "duration_s": self.duration_s,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "killed": self.killed,
            "pid": self.pid,
            "started": self.started,
            "detail": self.detail,
            "tag": self.tag,
            "role": self.role,
            "round": dict(self.round),
            "test": dict(self.test),
            "peers": list(self.peers),
        }


def _safe(part: str) -> str:
    if not part or part in {".", ".."} or "/" in part or "\0" in part:
        raise ValueError(f"unsafe path component {part!r}")
    return part


class EvidenceWriter:
    """Writes each node's stage outcome under `root` (the run's raw/ directory)."""

    def __init__(self, root: str | os.PathLike[str], transport: str) -> None:
        self.root = Path(root)
        self.transport = transport
        # Called (stage, node, session ok) after each node's file is written, from the
        # thread that wrote it: the run's progress display counts nodes done this way.
        self.listeners: list[Callable[[str, str, bool], None]] = []

    @staticmethod
    def ref(node: str, stage: str, command: str) -> str:
        """A verdict's evidence reference: `raw/<node>/<stage>.json#<command>`."""
        return f"raw/{_safe(node)}/{_safe(stage)}.json#{command}"

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
            "kind": "session",
            "node": outcome.node,
            "stage": stage,
            "reach": outcome.reach.value,
            "detail": outcome.detail,
            "duration_s": outcome.duration_s,
            "transport": self.transport,
            "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commands": commands,
        }
        text = json.dumps(doc, separators=(",", ":")) + "\n"
        tmp = d / f".{stage}.json.gz.tmp"
        tmp.write_bytes(gzip.compress(text.encode("utf-8"), GZ_LEVEL, mtime=0))
        tmp.replace(d / f"{stage}.json{GZ_SUFFIX}")
        for listener in self.listeners:
            listener(stage, outcome.node, outcome.reach is Reach.OK)
        return dataclasses.replace(outcome, results=results)

    def record_processes(
        self, stage: str, node: str, records: Sequence[ProcessRecord], address: str | None = None
    ) -> None:
        """Write (rewrite) the processes an active stage spawned on `node` so far; `address`:
        where the transport said other nodes reach `node` (what a replay answers)."""
        d = self.root / _safe(node)
        d.mkdir(parents=True, exist_ok=True)
        doc = {
            "bundle_version": BUNDLE_VERSION,
            "kind": "processes",
            "node": node,
            "stage": stage,
            "transport": self.transport,
            **({"address": address} if address is not None else {}),
            "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commands": {r.id: r.doc() for r in records},
        }
        (d / f"{_safe(stage)}.json").write_text(json.dumps(doc, indent=1) + "\n", "utf-8")


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


def evidence_file(path: Path) -> Path | None:
    """The file holding the document `path` (`.../<stage>.json`) names: itself, or its
    compressed twin; None when neither exists."""
    if path.is_file():
        return path
    gz = path.with_name(path.name + GZ_SUFFIX)
    return gz if gz.is_file() else None


def open_evidence(path: Path) -> dict[str, Any]:
    """The JSON document at `path` (`.../<stage>.json`), plain or compressed.

    Raises FileNotFoundError when neither file exists, ValueError when it is not JSON."""
    real = evidence_file(path)
    if real is None:
        raise FileNotFoundError(f"{path}: no such evidence (nor {path.name}{GZ_SUFFIX})")
    raw = real.read_bytes()
    if real.name.endswith(GZ_SUFFIX):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ValueError(f"{real}: not gzip data: {exc}") from None
    doc: dict[str, Any] = json.loads(raw.decode("utf-8"))
    return doc


def expand_evidence(raw_root: Path, nodes: Iterable[str]) -> int:
    """Rewrite the compressed documents of `nodes` as plain JSON (rejected: the evidence
    people open); returns how many files were expanded. A file that cannot be read is left
    as it is (its reader will say why)."""
    done = 0
    for node in nodes:
        d = raw_root / _safe(node)
        for gz in sorted(d.glob(f"*.json{GZ_SUFFIX}")) if d.is_dir() else ():
            plain = gz.with_name(gz.name.removesuffix(GZ_SUFFIX))
            try:
                data = gzip.decompress(gz.read_bytes())
            except (OSError, EOFError):
                continue
            tmp = plain.with_name(f".{plain.name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(plain)
            gz.unlink()
            done += 1
    return done


def existing_refs(run_dir: Path) -> Callable[[str], str]:
    """A renaming of evidence references to the file that holds each document now:
    `raw/n/s.json#c` -> `raw/n/s.json.gz#c` when only the compressed file exists; any other
    reference (the file exists, or neither does) unchanged. Each file is looked up once."""
    found: dict[str, str] = {}

    def rename(ref: str) -> str:
        path, sep, cmd = ref.partition("#")
        if path not in found:
            real = evidence_file(run_dir / path) if path.endswith(".json") else None
            gz = real is not None and real.name.endswith(GZ_SUFFIX)
            found[path] = path + GZ_SUFFIX if gz else path
        return found[path] + sep + cmd

    return rename


def read_capture(root: Path, node: str, stage: str) -> dict[str, Any] | None:
    """A node's captured stage document, or None if the bundle has none."""
    p = root / _safe(node) / f"{_safe(stage)}.json"
    if evidence_file(p) is None:
        return None
    doc = open_evidence(p)
    if doc.get("bundle_version") not in READABLE_VERSIONS:
        raise ValueError(
            f"{p}: bundle version {doc.get('bundle_version')}, expected one of "
            + ", ".join(map(str, READABLE_VERSIONS))
        )
    if doc.get("kind", "session") != "session":
        raise ValueError(f"{p}: {doc.get('kind')} evidence of an active stage cannot be replayed")
    return doc


def capture_reach(doc: dict[str, Any]) -> tuple[Reach, str]:
    return Reach(doc["reach"]), str(doc.get("detail", ""))


def resolve_evidence(run_dir: str | os.PathLike[str], ref: str) -> dict[str, Any]:
    """The command document a verdict's evidence reference (`raw/n/stage.json#cmd`) points to."""
    path, _, cmd = ref.partition("#")
    doc = open_evidence(Path(run_dir, path))
    out: dict[str, Any] = doc["commands"][cmd]
    return out

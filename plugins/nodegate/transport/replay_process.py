"""Replaying an active stage: the processes a captured run spawned, answered from its bundle.

An active stage re-run on the same nodes and profile plans the same tests and spawns the same
commands, in the same order per node; each spawn is answered by the next recorded process with
that exact command on that node (its output, exit status, kill and timeout as captured, its
spawn tag, so the stray check's command matches the captured one too). A command the capture
does not hold (another plan, another profile) cannot be started: an ERROR, never a pass.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

from nodegate.transport.evidence import READABLE_VERSIONS
from nodegate.transport.process import ProcessResult, RemoteProcess, SpawnError


class CapturedProcesses:
    """The `kind: processes` documents of a bundle, read once per node when first asked."""

    def __init__(self, bundle: Path) -> None:
        self.bundle = bundle
        self._by_node: dict[str, dict[str, deque[dict[str, Any]]]] = {}
        self._address: dict[str, str] = {}

    def _load(self, node: str) -> dict[str, deque[dict[str, Any]]]:
        found = self._by_node.get(node)
        if found is not None:
            return found
        found = self._by_node[node] = {}
        d = self.bundle / node
        for p in sorted(d.glob("*.json")) if d.is_dir() else []:
            try:
                doc = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # a passive document's reader says what is wrong with it
            if doc.get("kind") != "processes" or doc.get("bundle_version") not in READABLE_VERSIONS:
                continue
            if isinstance(doc.get("address"), str):
                self._address[node] = doc["address"]
            for rec in doc.get("commands", {}).values():
                found.setdefault(str(rec.get("cmd")), deque()).append(rec)
        return found

    def address(self, node: str) -> str | None:
        """Where the captured run's transport said other nodes reach `node`."""
        self._load(node)
        return self._address.get(node)

    def take(self, node: str, cmd: str, timeout_s: float) -> ReplayProcess:
        """The next recorded process of `cmd` on `node`; raises SpawnError when there is none
        or the captured run could not start it either."""
        queue = self._load(node).get(cmd)
        if not queue:
            raise SpawnError(node, "error", f"not in the capture {self.bundle}: {cmd}")
        rec = queue.popleft()
        if not rec.get("started", True):
            why = rec.get("detail") or "no detail recorded"
            raise SpawnError(node, "error", f"not started in the captured run: {why}")
        return ReplayProcess(node, cmd, timeout_s, rec)


class ReplayProcess(RemoteProcess):
    """A recorded process: its output is read back, its end is the captured one."""

    def __init__(self, node: str, cmd: str, timeout_s: float, rec: dict[str, Any]) -> None:
        super().__init__(node, cmd, timeout_s)
        self.tag = str(rec.get("tag") or self.tag)  # older bundles: a fresh tag (no match)
        self.pid = rec.get("pid")
        self._rec = rec
        self._stdout = str(rec.get("stdout", "")).encode()
        self._stderr = str(rec.get("stderr", "")).encode()

    async def _read_out(self, n: int) -> bytes:
        chunk, self._stdout = self._stdout[:n], self._stdout[n:]
        return chunk

    async def _read_err(self, n: int) -> bytes:
        chunk, self._stderr = self._stderr[:n], self._stderr[n:]
        return chunk

    async def _returncode(self) -> int | None:
        rc = self._rec.get("rc")
        return rc if isinstance(rc, int) else None

    async def _run_kill(self, pid: int) -> None:
        pass  # nothing runs

    def _close(self) -> None:
        pass

    async def wait(self, deadline: float | None = None) -> ProcessResult:
        """How the captured process ended, as recorded (killed and timed out included)."""
        r = self._rec
        self.killed = bool(r.get("killed", False))
        self.result = ProcessResult(
            node=self.node,
            cmd=self.cmd,
            rc=await self._returncode(),
            stdout=str(r.get("stdout", "")),
            stderr=str(r.get("stderr", "")),
            timed_out=bool(r.get("timed_out", False)),
            killed=self.killed,
            duration_s=float(r.get("duration_s") or 0.0),
            pid=self.pid,
            tag=self.tag,
        )
        return self.result

"""An active stage's evidence: every side of every test, written through the one
EvidenceWriter into `raw/<node>/<stage>.json` (the passive stages' document, kind `processes`).

A side's command id is its test's id, `r<round>-<test key>` (`r2-rail3-gpu026-to-gpu010`), in
the file of the node it ran on; a node with two sides in one test gets `<id>.<role>` for each.
Each record lists its peers (the test's other sides), so a verdict's reference leads to both
ends of the measurement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from nodegate.framework.active.campaign import Execution, Side
from nodegate.framework.active.rounds import Outcome, RoundId
from nodegate.transport.evidence import EvidenceWriter, ProcessRecord

T = TypeVar("T")


def command_id(round_id: RoundId, key: str) -> str:
    """`r1b-rail3-gpu026-to-gpu001`: the round's label, then the campaign's test key."""
    return f"r{round_id.label}-{key}"


class ActiveEvidence(Generic[T]):
    """Process records per node, rewritten after each round; answers verdicts' references."""

    def __init__(
        self,
        writer: EvidenceWriter,
        stage: str,
        key: Callable[[T], str],
        address: Callable[[str], str] | None = None,
    ) -> None:
        self.writer = writer
        self.stage = stage
        self._key = key  # the campaign's key_of
        self._address = address  # the transport's address of a node (kept for replays)
        self._records: dict[str, list[ProcessRecord]] = {}
        self._refs: dict[str, list[tuple[str, str]]] = {}  # test id -> [(node, ref)]
        self._dirty: set[str] = set()

    def add(self, round_id: RoundId, test: T, test_doc: dict[str, Any], run: Execution) -> None:
        tid = command_id(round_id, self._key(test))
        per_node: dict[str, int] = {}
        for s in run.sides:
            per_node[s.node] = per_node.get(s.node, 0) + 1
        placed = [(s, tid if per_node[s.node] == 1 else f"{tid}.{s.role}") for s in run.sides]
        refs = [EvidenceWriter.ref(s.node, self.stage, cid) for s, cid in placed]
        self._refs[tid] = [(s.node, ref) for (s, _), ref in zip(placed, refs, strict=True)]
        for i, (side, cid) in enumerate(placed):
            peers = tuple(r for j, r in enumerate(refs) if j != i)
            self._records.setdefault(side.node, []).append(
                _record(cid, side, round_id, test_doc, peers)
            )
            self._dirty.add(side.node)

    async def flush(self) -> None:
        """Write the documents of the nodes that gained records (off the event loop)."""
        nodes = sorted(self._dirty)
        self._dirty.clear()
        if nodes:
            await asyncio.to_thread(self._write, nodes)

    def _write(self, nodes: Sequence[str]) -> None:
        for n in nodes:
            where = None if self._address is None else self._address(n)
            self.writer.record_processes(self.stage, n, self._records[n], where)

    def refs(self, outcome: Outcome[T], node: str) -> tuple[str, ...]:
        """The node's own side(s) of the outcome's test, or every side if it ran none."""
        sides = self._refs.get(command_id(outcome.round, self._key(outcome.test)), [])
        mine = tuple(r for n, r in sides if n == node)
        return mine or tuple(r for _, r in sides)


def _record(
    cid: str, side: Side, round_id: RoundId, test_doc: dict[str, Any], peers: tuple[str, ...]
) -> ProcessRecord:
    r = side.result
    return ProcessRecord(
        id=cid,
        cmd=side.cmd,
        rc=None if r is None else r.rc,
        stdout="" if r is None else r.stdout,
        stderr="" if r is None else r.stderr,
        duration_s=None if r is None else r.duration_s,
        timed_out=False if r is None else r.timed_out,
        killed=False if r is None else r.killed,
        pid=None if r is None else r.pid,
        tag="" if r is None else r.tag,
        role=side.role,
        round=round_id.doc(),
        test=test_doc,
        peers=peers,
        started=r is not None,
        detail=side.detail or side.lost_why or "",
    )

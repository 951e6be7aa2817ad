"""Reading what one nccl-tests job left (all_reduce_perf, or its collective's binary): sanity
(did it run to its footer, did every rank agree, is the data right) before performance (busbw
at the judged size, the sweep's average), and what NCCL chose on each node (NCCL_DEBUG lines).

A job that timed out, exited non-zero, printed an NCCL/CUDA failure or WARN, or stopped before
the `# Avg bus bandwidth` footer is a tool error (ERROR), never a low number. Wrong data
(`#wrong` > 0, an out-of-bounds count, an `error` column) fails the job whatever its bandwidth:
a FAIL, since the job ran and measured it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from nodegate.core.errors import ParseError
from nodegate.framework.active.campaign import Execution
from nodegate.parsers.nccl_debug import NcclHostTransport, parse_nccl_debug
from nodegate.parsers.nccl_tests import (
    NcclTestsFailure,
    NcclTestsResult,
    parse_nccl_perf,
    wrong_counts,
)
from nodegate.stages.ib_pairs.perftest import stderr_gist
from nodegate.stages.nccl.exits import rank_exit
from nodegate.transport.process import ProcessResult


@dataclass(frozen=True, slots=True)
class JobReading:
    """One job's numbers, or why there are none to trust."""

    busbw: float | None  # GB/s at the judged size (the lower of out-of-place and in-place)
    avg_busbw: float | None
    error: str | None = None  # a tool error: ERROR
    corrupt: str | None = None  # wrong data: FAIL whatever the bandwidth
    ranks: int | None = None
    # What NCCL chose on each node of the job (NCCL_DEBUG=INFO lines), by node name.
    transport: Mapping[str, NcclHostTransport] = field(default_factory=dict)


def read_job(
    run: Execution,
    message_bytes: int,
    ranks: int,
    timeout_s: float,
    nodes: Sequence[str] = (),
    hosts: Mapping[str, str] | None = None,
    collective: str = "all_reduce",
) -> JobReading:
    """Sanity of one job from its launcher's side (mpirun or srun); `nodes` (in rank order)
    and `hosts` (node of each address) name a rank that ended the job early; `collective`:
    the job's (another collective's table is a tool error)."""
    if run.error is not None or not run.sides or run.sides[0].result is None:
        return JobReading(
            None, None, run.error or (run.sides[0].detail if run.sides else "no launcher")
        )
    r = run.sides[0].result
    if r.overflow is not None:  # a flood: what it printed proves nothing
        return JobReading(None, None, f"launcher {r.overflow}")
    # Ended by the node's `timeout` at the deadline (rc 124, 137 after its KILL, or the
    # launcher's own exit status once TERM reached it), not by a failure before it.
    ended = r.rc != 0 and r.duration_s >= timeout_s - 0.5
    if r.timed_out or r.killed or ended:
        return JobReading(
            None, None, f"job did not finish within {timeout_s:g} s: every rank killed"
        )
    text = r.stdout + "\n" + r.stderr
    via_srun = run.sides[0].role == "srun"
    died = rank_exit(r.stderr, nodes, ranks, hosts, srun=via_srun) if r.rc != 0 else None
    try:
        parsed = parse_nccl_perf(text, collective)
    except ParseError as exc:
        if died is None and r.rc != 0:  # the launcher failed before any rank said anything
            said = launcher_message(r.stderr) or launcher_message(r.stdout) or "no message"
            launcher = "srun" if via_srun else "mpirun"
            return JobReading(None, None, f"{launcher} exited {r.rc}: {said}")
        return JobReading(None, None, died or f"{exc} ({launcher_gist(r)})")
    if isinstance(parsed, NcclTestsFailure):
        if parsed.kind == "wrong_values":
            return JobReading(None, None, None, f"wrong data: {parsed.message}")
        why = failure_text(parsed, text)
        return JobReading(None, None, f"{died}; {why}" if died else why)
    reading = _complete(parsed, r, message_bytes, ranks)
    return replace(reading, transport=transport_by_node(parsed, text, nodes, ranks))


def transport_by_node(
    parsed: NcclTestsResult, text: str, nodes: Sequence[str], ranks: int
) -> dict[str, NcclHostTransport]:
    """Each node's NCCL_DEBUG facts: the hostname NCCL prints mapped to the job's node by the
    rank table (ranks fill the nodes in order, `ppr:N:node` / `--ntasks-per-node`), else by
    name (the node, or its short name); hosts that map to no node are left out."""
    try:
        debug = parse_nccl_debug(text)
    except ParseError:  # no NCCL_DEBUG line at all
        return {}
    per = max(1, ranks // max(1, len(nodes)))
    by_host = {r.host: nodes[r.rank // per] for r in parsed.ranks if r.rank // per < len(nodes)}
    short = {n.split(".")[0]: n for n in nodes}
    out = {}
    for h in debug.per_host:
        node = by_host.get(h.host) or short.get(h.host.split(".")[0])
        if node is not None:
            out[node] = h
    return out


def _complete(
    parsed: NcclTestsResult, r: ProcessResult, message_bytes: int, ranks: int
) -> JobReading:
    row = next((x for x in parsed.rows if x.size_bytes == message_bytes), None)
    if row is None and parsed.collective != "all_reduce":
        # one rank's share, rounded down to 16 bytes: the row printed a little below the size
        near = [x for x in parsed.rows if message_bytes - 16 * ranks < x.size_bytes < message_bytes]
        row = near[-1] if near else None
    bw = None if row is None else min(row.out_of_place.busbw_gbytes_s, row.in_place.busbw_gbytes_s)
    avg = parsed.avg_busbw_gbytes_s
    wrong = wrong_counts(parsed.rows)
    if wrong:
        return JobReading(bw, avg, None, "wrong data: " + "; ".join(wrong), len(parsed.ranks))
    if parsed.independent_runs != 1:
        why = f"{parsed.independent_runs} independent runs (nccl-tests built without MPI?)"
        return JobReading(None, None, why)
    if len(parsed.ranks) != ranks:
        return JobReading(None, None, f"{len(parsed.ranks)} ranks reported, {ranks} launched")
    if r.rc != 0:
        return JobReading(bw, avg, f"launcher exited {r.rc} after the table ({launcher_gist(r)})")
    if row is None:
        return JobReading(None, avg, f"no row at {message_bytes} B in the sweep")
    return JobReading(bw, avg, None, None, len(parsed.ranks))


def failure_text(f: NcclTestsFailure, text: str) -> str:
    """The failure as the tool said it, with an IB completion error's peer and HCA if any."""
    msg = f"{f.kind}: {f.message[:300]}"
    try:
        debug = parse_nccl_debug(text)
    except ParseError:
        return msg
    for c in debug.ib_completion_errors[:1]:
        msg += f"; IB completion error status {c.status} on {c.host}"
        msg += f" ({c.hca or 'hca ?'}) with peer {c.peer}"
    return msg


# Lines that say nothing of why a launcher failed: Open MPI's box rules, srun's and ssh's notes.
_NOISE = re.compile(r"^[-=*#_~+ ]*$|^srun: (?!error:)|^Warning: Permanently added ")
_HEAD_CHARS = 8192  # a launcher's message is at the top; what follows can be MiBs
LAUNCHER_MESSAGE_MAX = 300


def launcher_message(text: str) -> str | None:
    r"""A launcher's own message: the first paragraph of `text` past rules and notes, its lines
    joined; a paragraph that ends with ':' takes the next one too (Open MPI's details).

    >>> launcher_message("-----\nA hostfile was provided that contains a node not\n"
    ...                  "present in the allocation:\n\n  node: 10.0.0.2\n\nIf you are ...\n")
    'A hostfile was provided that contains a node not present in the allocation: node: 10.0.0.2'
    """
    paragraphs: list[list[str]] = [[]]
    for line in text[:_HEAD_CHARS].splitlines():
        line = " ".join(line.split())
        if not line or _NOISE.match(line):
            if paragraphs[-1]:
                paragraphs.append([])
            continue
        paragraphs[-1].append(line)
    said = [p for p in paragraphs if p]
    if not said:
        return None
    out = " ".join(said[0])
    if out.endswith(":") and len(said) > 1:
        out += " " + " ".join(said[1])
    return out[:LAUNCHER_MESSAGE_MAX]


def launcher_gist(r: ProcessResult) -> str:
    return f"rc {r.rc}: {stderr_gist(r.stderr)}"

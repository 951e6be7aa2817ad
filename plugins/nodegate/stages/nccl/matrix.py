"""The collective matrix's judge (pure: no I/O): busbw per (collective, scale) as a curve.

Each matrix job is one group at one scale of one collective. A group is judged against its
(collective, scale) floor, and against the curve: its busbw may fall at most `max_drop_pct`
below the best group of the previous scale (fewer nodes, one tier less crossed). A group that
fails either is a finding of the tier it is the first to cross (`TIER`), not of its nodes:
every node in the matrix already passed alone and in the whole-set job (or was cleared by
localization), so the matrix marks them (admission.json's infrastructure section) instead of
rejecting them. A job that measured nothing is the node's ERROR (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodegate.stages.nccl.profile import Matrix

# The part of the fabric a scale is the first to cross.
TIER = {
    "two_node_ring": "the leaf switch between two of its nodes",
    "leaf": "the leaf switch under load from all its nodes",
    "leaves": "the leaf uplinks and spines between these leaves",
    "whole": "the spine tier under the whole set",
}


@dataclass(frozen=True, slots=True)
class GroupResult:
    """One matrix job's measurement: busbw (GB/s) or None (a tool error)."""

    collective: str
    scale: str
    nodes: tuple[str, ...]
    busbw: float | None


@dataclass(frozen=True, slots=True)
class Point:
    """One point of a collective's curve: the scale, nodes per group, the worst and best
    group's busbw, the floor, efficiency (worst / line rate)."""

    collective: str
    scale: str
    nodes: int
    worst: float | None
    best: float | None
    floor: float
    efficiency: float | None


@dataclass(frozen=True, slots=True)
class Finding:
    """A group below its floor or the curve: what, where, why."""

    group: GroupResult
    floor: float
    reason: str


def curve(matrix: Matrix, results: Sequence[GroupResult]) -> dict[str, list[Point]]:
    """Per collective, its points in scale order (scales with no measured group: worst None)."""
    out: dict[str, list[Point]] = {}
    for c in matrix.collectives:
        pts = []
        for sc in matrix.scales:
            mine = [r for r in results if r.collective == c and r.scale == sc.name]
            if not mine:
                continue
            got = [r.busbw for r in mine if r.busbw is not None]
            worst = min(got) if got else None
            floor = float(matrix.floors[(c, sc.name)].value)
            eff = None if worst is None else round(worst / matrix.line_rate, 3)
            size = max(len(r.nodes) for r in mine)
            pts.append(Point(c, sc.name, size, worst, max(got) if got else None, floor, eff))
        out[c] = pts
    return out


def findings(matrix: Matrix, results: Sequence[GroupResult]) -> list[Finding]:
    """Every measured group below its floor, or more than `max_drop_pct` below the previous
    scale's best group of the same collective."""
    points = curve(matrix, results)
    out = []
    for r in results:
        if r.busbw is None:
            continue
        floor = float(matrix.floors[(r.collective, r.scale)].value)
        pts = points[r.collective]
        i = next(k for k, p in enumerate(pts) if p.scale == r.scale)
        prev = next((p for p in reversed(pts[:i]) if p.best is not None), None)
        reasons = []
        if not matrix.floors[(r.collective, r.scale)].holds(r.busbw):
            reasons.append(f"{r.busbw:g} GB/s below the floor {floor:g}")
        if prev is not None and prev.best is not None and prev.best > 0:
            drop = (prev.best - r.busbw) / prev.best * 100
            if drop > matrix.max_drop_pct:
                reasons.append(
                    f"{drop:.0f} % below {prev.scale} ({prev.best:g} GB/s; at most "
                    f"{matrix.max_drop_pct:g} % allowed)"
                )
        if reasons:
            out.append(Finding(r, floor, "; ".join(reasons)))
    return out


def describe(f: Finding, leaves: Mapping[str, str], line_rate: float) -> str:
    """`alltoall at leaves (8 nodes over leaf-r01, leaf-r02): 140 GB/s (35 % of line rate):
    ...; the break is at the leaf uplinks and spines between these leaves`."""
    g = f.group
    over = sorted({leaves.get(n, "") for n in g.nodes} - {""})
    where = f" over {', '.join(over)}" if over else ""
    eff = f" ({(g.busbw or 0) / line_rate * 100:.0f} % of line rate)"
    return (
        f"{g.collective} at {g.scale} ({len(g.nodes)} nodes{where}): {g.busbw:g} GB/s{eff}: "
        f"{f.reason}; the break is at {TIER[g.scale]}"
    )

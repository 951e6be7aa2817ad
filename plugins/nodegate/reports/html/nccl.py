"""report.html's NCCL curves, from the stage's own files (`nccl/localization-*.json`, its
`curve`): per collective, busbw versus nodes per group, the worst and the best group at each
scale of the matrix, with the floor of each scale drawn. Read as data: a file that is missing
or not understood leaves the section out (the verdicts still say everything)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 420, 200, 44, 28, 10


def _x(nodes: int, most: int) -> float:
    """Nodes on a log scale (2 .. the largest group) across the plot."""
    span = math.log2(max(most, 4)) - 1
    return round(LEFT + (math.log2(max(nodes, 2)) - 1) / span * (WIDTH - LEFT - 12), 1)


def _y(bw: float, top: float) -> float:
    return round(HEIGHT - BOTTOM - bw / top * (HEIGHT - BOTTOM - TOP), 1)


def _plot(name: str, points: Sequence[Mapping[str, Any]], unit: str) -> dict[str, Any]:
    most = max(int(p["nodes"]) for p in points)
    vals = [float(p[k]) for p in points for k in ("worst", "best", "floor") if p.get(k) is not None]
    top = max(vals) * 1.1 if vals else 1.0
    marks = []
    for p in points:
        x = _x(int(p["nodes"]), most)
        below = p["worst"] is not None and float(p["worst"]) < float(p["floor"])
        marks.append({
            "scale": str(p["scale"]), "nodes": int(p["nodes"]), "x": x,
            "worst": p["worst"], "best": p["best"], "floor": p["floor"], "below": below,
            "y_worst": None if p["worst"] is None else _y(float(p["worst"]), top),
            "y_best": None if p["best"] is None else _y(float(p["best"]), top),
            "y_floor": _y(float(p["floor"]), top),
        })  # fmt: skip
    line = " ".join(f"{m['x']},{m['y_worst']}" for m in marks if m["y_worst"] is not None)
    floor = " ".join(f"{m['x']},{m['y_floor']}" for m in marks)
    return {"collective": name, "unit": unit, "marks": marks, "line": line, "floor": floor,
            "width": WIDTH, "height": HEIGHT, "base": HEIGHT - BOTTOM, "left": LEFT,
            "top_label": f"{top:.4g}"}  # fmt: skip


def nccl_curves(run_dir: Path | None) -> list[dict[str, Any]]:
    """One plot per (profile, collective) whose matrix ran; [] without curves."""
    if run_dir is None:
        return []
    out: list[dict[str, Any]] = []
    for path in sorted((run_dir / "nccl").glob("localization-*.json")):
        profile = path.stem.removeprefix("localization-")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            c = doc.get("curve")
            if not isinstance(c, Mapping):
                continue
            for name, points in c["collectives"].items():
                if points:
                    out.append({"profile": profile, **_plot(name, points, str(c["unit"]))})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out

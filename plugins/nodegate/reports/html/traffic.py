"""report.html's traffic section, from the stage's own files (`traffic/localization-*.json`):
each incast's per-sender bars with the fair share drawn and its Jain index (traffic.fairness),
the receiver port's XmitWait where read, its victim flow alone and during, and
each bisection's flow distribution. Read as data: a file that is missing or not understood
leaves the section out (the verdicts still say everything)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAX_INCASTS = 24  # drawn per run (the rest are in the localization file)
WIDTH, BAR_H, GAP = 420, 14, 4


def _bars(rows: list[tuple[str, float]], top: float, fair: float | None) -> dict[str, Any]:
    scale = (WIDTH - 160) / top if top > 0 else 0.0
    bars = [
        {"y": i * (BAR_H + GAP), "w": round(v * scale, 1), "label": name, "value": round(v, 1)}
        for i, (name, v) in enumerate(rows)
    ]
    return {
        "bars": bars,
        "height": len(rows) * (BAR_H + GAP) + 4,
        "fair_x": None if fair is None else round(150 + fair * scale, 1),
    }


def traffic_view(run_dir: Path | None) -> list[dict[str, Any]]:
    """One entry per drawn test, incasts with a failure first; [] without traffic files."""
    if run_dir is None:
        return []
    out: list[dict[str, Any]] = []
    for path in sorted((run_dir / "traffic").glob("localization-*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            tests: Mapping[str, Any] = doc["tests"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for key, t in sorted(tests.items()):
            flows = t.get("flows") or {}
            if not isinstance(flows, dict) or not flows or t.get("error"):
                continue
            rows = [(str(k), float(v)) for k, v in flows.items() if isinstance(v, int | float)]
            if "bisection" in key:
                vals = sorted(v for _, v in rows)
                out.append({"key": key, "kind": "bisection", "n": len(vals), "low": vals[0],
                            "median": vals[len(vals) // 2], "high": vals[-1],
                            **_bars(sorted(rows, key=lambda r: r[1]), vals[-1], None)})  # fmt: skip
                continue
            senders = [(k, v) for k, v in rows if not k.startswith("victim ")]
            victim = [(k, v) for k, v in rows if k.startswith("victim ")]
            fair = sum(v for _, v in senders) / len(senders) if senders else None
            sq = sum(v * v for _, v in senders)
            jain = (len(senders) * fair) ** 2 / (len(senders) * sq) if fair and sq else None
            shown = senders + victim
            alone = t.get("alone")
            if isinstance(alone, int | float) and victim:
                shown.append((victim[0][0].replace("victim ", "alone "), float(alone)))
            top = max(v for _, v in shown)
            xw = t.get("xmit_wait")
            out.append({"key": key, "kind": "incast", "fair": fair, "jain": jain,
                        "senders": len(senders),
                        "xmit_wait": xw if isinstance(xw, int) else None,
                        **_bars(shown, top, fair)})  # fmt: skip
    incasts = [o for o in out if o["kind"] == "incast"][:MAX_INCASTS]
    return incasts + [o for o in out if o["kind"] == "bisection"]

"""Distributions for report.html, as geometry the template draws as inline SVG: one histogram
per measured quantity (ib_write_bw per rail, NCCL busbw, PCIe, ECC, ...), with the profile's
floor or ceiling drawn where the verdicts carry one (`reference: {direction: min, value: 360}`).
Only a check that says how it is charted is drawn (`Check.chart`: a measurement, not a count of
stray processes), in its chart's order, split by rail where it says so. Each bar carries its
count; a bar with any count is at least MIN_BAR_PX tall, so that one x8 GPU among 240 shows."""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodegate.core.checks import Chart, Check
from nodegate.stages.registry import checks_by_id

WIDTH, HEIGHT, PAD = 320, 120, 24
MAX_BINS = 24
MAX_PLOTS = 24
MIN_BAR_PX = 4  # the height of the smallest non-empty bar: a minority stays visible
_OPS = {"min": ">=", "max": "<=", "equal": "=="}  # a reference's direction as the limit drawn
_RAIL = re.compile(r"\(rail (\d+)\)")
_NUMERIC_TEXT = re.compile(r"^x(\d+)$")  # "x16": a width written as text


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    count: int  # drawn above the bar
    label: str  # the bin's range
    bad: bool  # on the wrong side of the limit


@dataclass(frozen=True, slots=True)
class Plot:
    title: str
    unit: str
    n: int
    low: float
    median: float
    high: float
    bars: tuple[Bar, ...]
    limit: float | None
    limit_x: float | None
    limit_label: str
    ticks: tuple[tuple[float, str], ...]  # (x, label) on the value axis

    @property
    def width(self) -> int:
        return WIDTH

    @property
    def height(self) -> int:
        return HEIGHT


def number(value: Any) -> float | None:
    """A verdict's observed value as a number, or None (text, a list, a bool, absent)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    m = _NUMERIC_TEXT.match(str(value))
    return float(m[1]) if m else None


def bound(reference: Mapping[str, Any] | None) -> tuple[str, float] | None:
    """A verdict's reference as the limit drawn: `{direction: min, value: 360}` -> ('>=',
    360.0); None without a reference or when it is not a number (`one_of`, `equal: NDR`)."""
    if reference is None or reference.get("direction") not in _OPS:
        return None
    value = reference.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return _OPS[reference["direction"]], float(value)


def _charts() -> dict[str, Chart]:
    """Check id -> how the report charts it, for the checks that say."""
    return {
        cid: c.chart
        for cid, (_stage, c) in checks_by_id().items()
        if isinstance(c, Check) and c.chart is not None
    }


@dataclass(frozen=True, slots=True)
class Series:
    """One quantity's numbers: the check they come from, its reference and unit."""

    check: str
    values: list[float]
    reference: Mapping[str, Any] | None
    unit: str


def series(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, Series]:
    """Quantity name -> its series: one per charted check (and limit), split by rail where
    the check's chart says so."""
    charts = _charts()
    out: dict[str, Series] = {}
    measured = [
        (v, x)
        for v in verdicts
        if v["status"] in ("pass", "fail")
        and v["check"] in charts
        and (x := number(v["observed"])) is not None
    ]
    limits: dict[str, set[str]] = {}
    for v, _ in measured:
        limits.setdefault(v["check"], set()).add(str(v["expected"]))
    for v, x in measured:
        name = check = v["check"]
        chart = charts.get(check)
        rail = _RAIL.search(v.get("component") or "")
        if chart is not None and chart.by_rail and rail:
            name = f"{name} rail {int(rail[1]):02d}"
        if len(limits[check]) > 1:  # one quantity per limit (hca.count: 8 IB, 1 storage)
            name = f"{name} (expected {v['expected']})"
        unit = v.get("unit") or ""
        out.setdefault(name, Series(check, [], v.get("reference"), unit)).values.append(x)
    return out


def plots(verdicts: Sequence[Mapping[str, Any]]) -> list[Plot]:
    """The report's histograms in their charts' order (then by name), at most MAX_PLOTS."""
    found, charts = series(verdicts), _charts()

    def priority(name: str) -> tuple[int, str]:
        return charts[found[name].check].order, name

    names = sorted(found, key=priority)[:MAX_PLOTS]
    return [histogram(n, found[n].values, found[n].reference, found[n].unit) for n in names]


def _fmt(x: float) -> str:
    return f"{x:.0f}" if x == int(x) and abs(x) < 1e9 else f"{x:.3g}"


def histogram(
    title: str, values: list[float], reference: Mapping[str, Any] | None, unit: str
) -> Plot:
    """Bars over the value axis (one per distinct value when few), with the limit's line."""
    lim = bound(reference)
    limit = lim[1] if lim else None
    lo, hi = min(values), max(values)
    if limit is not None:
        lo, hi = min(lo, limit), max(hi, limit)
    distinct = sorted(set(values))
    if len(distinct) <= MAX_BINS:
        edges = [(v, v) for v in distinct]
    else:
        step = (hi - lo) / MAX_BINS
        edges = [(lo + i * step, lo + (i + 1) * step) for i in range(MAX_BINS)]
    counts = [0] * len(edges)
    for x in values:
        counts[_bin(x, edges)] += 1
    span = (hi - lo) or 1.0
    plot_w = WIDTH - 2 * PAD
    slot = plot_w / len(edges) if len(distinct) <= MAX_BINS else plot_w / MAX_BINS

    def xpos(x: float) -> float:
        if len(distinct) <= MAX_BINS:  # categorical: one slot per value, limit between them
            return PAD + slot * (sum(d < x for d in distinct) + (0.5 if x in distinct else 0))
        return PAD + (x - lo) / span * plot_w

    top = max(counts) or 1
    bars = []
    for i, ((a, b), c) in enumerate(zip(edges, counts, strict=True)):
        h = max((HEIGHT - 2 * PAD) * c / top, MIN_BAR_PX) if c else 0.0
        x = PAD + i * slot
        label = _fmt(a) if a == b else f"{_fmt(a)}–{_fmt(b)}"
        bars.append(Bar(round(x + 1, 1), round(HEIGHT - PAD - h, 1), round(slot - 2, 1),
                        round(h, 1), c, label, _bad((a + b) / 2, lim)))  # fmt: skip
    if len(distinct) <= MAX_BINS:  # a label under each bar, when there is room
        step = max(1, round(len(edges) / 8))
        ticks = tuple((b.x + b.w / 2, b.label) for b in bars[::step])
    else:
        ticks = ((PAD, _fmt(edges[0][0])), (WIDTH - PAD, _fmt(edges[-1][1])))
    return Plot(
        title,
        unit,
        len(values),
        min(values),
        statistics.median(values),
        max(values),
        tuple(bars),
        limit,
        round(xpos(limit), 1) if limit is not None else None,
        f"{lim[0]} {_fmt(lim[1])}" if lim else "",
        ticks,
    )


def _bin(x: float, edges: Sequence[tuple[float, float]]) -> int:
    for i, (a, b) in enumerate(edges):
        if a <= x <= b if a == b else a <= x < b:
            return i
    return len(edges) - 1


def _bad(x: float, lim: tuple[str, float] | None) -> bool:
    if lim is None:
        return False
    op, v = lim
    return {
        ">=": x < v,
        ">": x <= v,
        "<=": x > v,
        "<": x >= v,
        "==": x != v,
    }[op]

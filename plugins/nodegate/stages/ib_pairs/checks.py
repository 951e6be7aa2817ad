"""The checks of stage `ib_pairs` (judged by the active skeleton's phases) and the per-rail
verdict from what localization learnt."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nodegate.core.checks import Chart, Check, CheckTable
from nodegate.core.values import Status, Verdict
from nodegate.framework.active.judge import failure_status
from nodegate.stages.ib_pairs.plan import Localization, PairResult
from nodegate.stages.ib_pairs.profile import IbPairsProfile, Rail

RAIL_BANDWIDTH: Check[None, IbPairsProfile] = Check(
    "ib_pairs.rail.bandwidth",
    "the rail reaches the profile's floor with a good partner.",
    None,
    "HCA port",
    "test_rail_bandwidth",
    "pipeline",
    chart=Chart(0, by_rail=True),
)
CLEANUP: Check[None, IbPairsProfile] = Check(
    "ib_pairs.cleanup",
    "no ib_write_bw process is left on the node after the stage.",
    None,
    "process",
    "test_no_stray_perftest",
    "pipeline",
)

CHECKS: CheckTable[None, IbPairsProfile] = CheckTable("ib_pairs", [RAIL_BANDWIDTH, CLEANUP])

Refs = Callable[[PairResult, str], tuple[str, ...]]
SuspectPath = tuple[str, str, int]  # (leaf, leaf, rail)


def rail_verdict(
    node: str,
    rail: Rail,
    loc: Localization,
    prof: IbPairsProfile,
    paths: Sequence[SuspectPath],
    refs: Refs,
) -> Verdict:
    """`ib_pairs.rail.bandwidth` for one node's rail: passed, cleared, blamed, lost (the node
    could not run its side) or unconfirmed."""
    comp = f"{rail.device} port 1 (rail {rail.rail})"
    status = loc.status(node, rail.rail)
    rs = loc.of(node, rail.rail)
    seen = loc.history(node, rail.rail)
    ev = tuple(ref for r in seen for ref in refs(r, node))
    history = "; ".join(_describe(node, r) for r in seen)
    want, unit = prof.floor.expected(), prof.floor.unit
    if status in ("pass", "cleared"):
        bw = max((r.value for r in rs if r.passed and r.value), default=None)
        note = _cleared_note(node, rail, loc, paths) if status == "cleared" else ""
        return Verdict(
            RAIL_BANDWIDTH.id, node, Status.PASS, comp, bw, want, unit,
            f"{history}{note} [{prof.describe()}]", evidence=ev, reference=prof.floor,
        )  # fmt: skip
    if status == "untested":
        msg = f"not tested: {history}" if history else "not tested (no partner in any round)"
        return Verdict(
            RAIL_BANDWIDTH.id, node, Status.ERROR, comp, None, want, unit, msg, evidence=ev,
        )  # fmt: skip
    if status == "lost":
        # The node, not its rail: it could not run its side (unreachable, connection lost).
        return Verdict(
            RAIL_BANDWIDTH.id, node, Status.ERROR, comp, None, want, unit,
            f"{loc.down[node]}; {history}" if history else loc.down[node],
            "check the node's SSH access (stage reach), then qualify it again", ev,
        )  # fmt: skip
    worst = min((r.value for r in rs if r.value is not None), default=None)
    if status == "blamed":
        msg = f"fails with two good partners: {history} [{prof.describe()}]"
        hint = f"check {rail.device}: cable/transceiver, port counters, firmware; swap or reseat"
    else:
        msg = f"failed and not cleared (no good partner left within 3 rounds): {history}"
        hint = "retest with more healthy nodes on this rail"
    return Verdict(
        RAIL_BANDWIDTH.id, node, failure_status(rs), comp, worst, want, unit, msg, hint, ev,
        reference=prof.floor,
    )  # fmt: skip


def _cleared_note(node: str, rail: Rail, loc: Localization, paths: Sequence[SuspectPath]) -> str:
    mine = {(loc.leaf.get(node), rail.rail)}
    hit = [p for p in paths if (p[0], p[2]) in mine or (p[1], p[2]) in mine]
    later = [r for r in loc.of(node, rail.rail) if r.passed and r.round.number != 1]
    if any(r.test.subject == node for r in later):
        note = " (cleared with a good partner"
    else:  # met another node left without a good partner: the test passed for both
        note = " (cleared with a partner that had no good partner either"
    return note + (f"; path {hit[0][0]}<->{hit[0][1]} suspect)" if hit else ")")


def _describe(node: str, r: PairResult) -> str:
    partner = r.test.other(node)
    if r.lost_why(node) is not None:
        return f"round {r.round.label} with {partner}: not run"
    if r.lost:
        return f"round {r.round.label} with {partner}: not counted ({partner} was lost)"
    what = f"{r.value:g} Gb/s" if r.value is not None else "no result"
    if r.error:
        what += f" ({r.error})"
    return f"round {r.round.label} with {partner}: {what}"

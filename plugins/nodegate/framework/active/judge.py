"""Verdict rules every active stage shares: a tool error is ERROR, a low number is FAIL; the
cleanup check's verdicts from the stray check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodegate.core.thresholds import Threshold
from nodegate.core.values import NodeOutcome, Reach, Status, Verdict
from nodegate.framework.active.ledger import STRAY_CMD_ID, stray_lines
from nodegate.framework.active.rounds import Outcome

NONE_LEFT = Threshold("equal", 0)  # the cleanup check: processes left on the node


def failure_status(outcomes: Sequence[Outcome[Any]]) -> Status:
    """The status of a unit that did not pass: ERROR when its tests only failed sanity (the
    tool did not run or was not understood) and none measured a value; FAIL otherwise."""
    errors = [o.error for o in outcomes if o.error and not o.passed]
    measured = [o.value for o in outcomes if o.value is not None]
    return Status.ERROR if errors and not measured else Status.FAIL


def cleanup_verdicts(
    check: str, tool: str, nodes: Sequence[str], outcomes: Mapping[str, NodeOutcome]
) -> list[Verdict]:
    """One verdict per node: PASS when none of the processes the stage started is left."""
    out = []
    for n in nodes:
        o = outcomes[n]
        r = o.result(STRAY_CMD_ID)
        ev = (r.evidence,) if r is not None and r.evidence else ()
        if o.reach is not Reach.OK or r is None or not r.ok:
            why = o.detail
            if r is not None and not r.ok and o.reach is Reach.OK:
                first = (r.stderr.strip().splitlines() or ["no stderr"])[0][:200]
                why = "timed out" if r.timed_out else f"exited {r.rc}: {first}"
            out.append(
                Verdict(
                    check,
                    n,
                    Status.ERROR,
                    tool,
                    None,
                    "none",
                    message=f"could not check: {why}",
                    evidence=ev,
                )  # fmt: skip
            )
            continue
        left = stray_lines(r.stdout)
        if left:
            out.append(
                Verdict(
                    check,
                    n,
                    Status.FAIL,
                    tool,
                    len(left),
                    0,
                    message="still running: " + "; ".join(left),
                    remediation="kill the listed processes",
                    evidence=ev,
                    reference=NONE_LEFT,
                )  # fmt: skip
            )
        else:
            out.append(
                Verdict(
                    check,
                    n,
                    Status.PASS,
                    tool,
                    0,
                    0,
                    message=f"no {tool} left",
                    evidence=ev,
                    reference=NONE_LEFT,
                )  # fmt: skip
            )
    return out

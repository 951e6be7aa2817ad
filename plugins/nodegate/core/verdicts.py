"""One verdict builder for every stage: PASS/FAIL from a boolean or a threshold, ERROR when a
fact could not be read. The remediation rides only on failures.
"""

from __future__ import annotations

from typing import Any

from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status, Verdict


def judged(
    check: str,
    node: str,
    ok: bool,
    component: str,
    observed: Any,
    expected: Any,
    message: str = "",
    *,
    unit: str | None = None,
    remediation: str | None = None,
    evidence: tuple[str, ...] = (),
    remediation_class: str | None = None,
) -> Verdict:
    """PASS when `ok`, else FAIL with `remediation` (and `remediation_class`, when the check
    knows it better than the profile's per-check table: `nodegate.admission.remediation`)."""
    return Verdict(
        check,
        node,
        Status.PASS if ok else Status.FAIL,
        component,
        observed,
        expected,
        unit=unit,
        message=message,
        remediation=None if ok else remediation,
        evidence=evidence,
        remediation_class=None if ok else remediation_class,
    )


def against(
    check: str,
    node: str,
    component: str,
    observed: Any,
    threshold: Threshold,
    message: str = "",
    *,
    remediation: str | None = None,
    evidence: tuple[str, ...] = (),
) -> Verdict:
    """Judge `observed` against a profile threshold; expected and unit come from it."""
    return judged(
        check,
        node,
        threshold.holds(observed),
        component,
        observed,
        threshold.expected(),
        message,
        unit=threshold.unit,
        remediation=remediation,
        evidence=evidence,
    )


def error(
    check: str,
    node: str,
    component: str,
    message: str,
    *,
    expected: Any = None,
    unit: str | None = None,
    evidence: tuple[str, ...] = (),
) -> Verdict:
    """Could not judge (tool failed, output not understood): never a pass."""
    return Verdict(
        check, node, Status.ERROR, component, None, expected, unit=unit, message=message,
        evidence=evidence,
    )  # fmt: skip

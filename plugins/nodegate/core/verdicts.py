"""One verdict builder for every stage: PASS/FAIL from a boolean or a threshold, ERROR when a
fact could not be read. The remediation rides only on failures, and on an ERROR whose cause is
known; a verdict judged against a threshold carries it as data (`reference`). Each builder
takes the Check it judges for, never its id as text.
"""

from __future__ import annotations

from typing import Any

from nodegate.core.checks import AnyCheck
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status, Verdict


def judged(
    check: AnyCheck,
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
    reference: Threshold | None = None,
) -> Verdict:
    """PASS when `ok`, else FAIL with `remediation` (and `remediation_class`, when the check
    knows it better than the profile's per-check table: `nodegate.admission.remediation`);
    `reference`: the threshold `ok` came from, when one did."""
    return Verdict(
        check.id,
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
        reference=reference,
    )


def against(
    check: AnyCheck,
    node: str,
    component: str,
    observed: Any,
    threshold: Threshold,
    message: str = "",
    *,
    remediation: str | None = None,
    evidence: tuple[str, ...] = (),
) -> Verdict:
    """Judge `observed` against a profile threshold; expected, unit and reference come from it."""
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
        reference=threshold,
    )


def error(
    check: AnyCheck,
    node: str,
    component: str,
    message: str,
    *,
    expected: Any = None,
    unit: str | None = None,
    evidence: tuple[str, ...] = (),
    remediation: str | None = None,
    remediation_class: str | None = None,
) -> Verdict:
    """Could not judge (tool failed, output not understood): never a pass. `remediation` and
    `remediation_class` only where the failure's cause is known (`core.remediation.tool_failure`:
    nvidia-smi cannot reach the driver); otherwise the class is `retest`."""
    return Verdict(
        check.id, node, Status.ERROR, component, None, expected, unit=unit, message=message,
        remediation=remediation, evidence=evidence, remediation_class=remediation_class,
    )  # fmt: skip


def marked(
    check: AnyCheck,
    node: str,
    component: str,
    observed: Any,
    expected: Any,
    message: str,
    *,
    remediation: str,
    unit: str | None = None,
    evidence: tuple[str, ...] = (),
) -> Verdict:
    """A node behind an infrastructure fault (a switch, a cable between switches, the subnet
    manager): PASS for the node, which is not to blame, marked with the fault (`component`,
    observed, expected, what to repair). Only an `infrastructure` check builds these; the
    admission's repair list is made of them (`admission.infrastructure`)."""
    if not check.infrastructure:
        raise ValueError(f"{check.id}: only an infrastructure check marks nodes")
    return Verdict(
        check.id, node, Status.PASS, component, observed, expected, unit=unit,
        message=message, remediation=remediation, evidence=evidence,
    )  # fmt: skip

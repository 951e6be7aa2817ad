"""Remediation classes: what the operator must do about a verdict, from one closed vocabulary.

Each check id has a class in the profile (`admission.remediation`, shared by the shipped
profiles through `_admission.yaml`); gpu.xid and gpu.nvswitch take the class of their worst
Xid/SXid from the profile's Xid table instead. A check that could not be judged (ERROR, SKIP,
not run) is `retest`: nothing was measured, so fix what its message says and run it again.

>>> RemediationTable.of({"default": "retest", "checks": {"gpu.count": "reseat_cable"}}).of_check(
...     "gpu.count")
'reseat_cable'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodegate.core.remediation import CLASSES, DEFAULT_CLASS, UNJUDGED_CLASS, XID_ACTION_CLASS
from nodegate.core.values import Status, Verdict

__all__ = ["CLASSES", "DEFAULT_CLASS", "UNJUDGED_CLASS", "XID_ACTION_CLASS", "RemediationTable"]


@dataclass(frozen=True, slots=True)
class RemediationTable:
    """A profile's class per check id, and the class of checks it does not list."""

    default: str = DEFAULT_CLASS
    checks: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, doc: Mapping[str, Any] | None) -> RemediationTable:
        """From the profile's `admission.remediation` mapping (validated by the schema)."""
        if not doc:
            return cls()
        return cls(str(doc.get("default", DEFAULT_CLASS)), dict(doc.get("checks", {})))

    def of_check(self, check: str) -> str:
        return self.checks.get(check, self.default)

    def classify(self, v: Verdict) -> Verdict:
        """`v` with its class: none on a pass; a class the check set itself is kept."""
        if v.status is Status.PASS:
            return (
                v if v.remediation_class is None else dataclasses.replace(v, remediation_class=None)
            )
        if v.remediation_class is not None:
            return v
        cls = self.of_check(v.check) if v.status is Status.FAIL else UNJUDGED_CLASS
        return dataclasses.replace(v, remediation_class=cls)


def table_of(profile_data: Mapping[str, Any]) -> RemediationTable:
    """The remediation table of a profile document (defaults when it has none)."""
    adm = profile_data.get("admission")
    return RemediationTable.of(adm.get("remediation") if isinstance(adm, Mapping) else None)


def class_order(cls: str | None) -> int:
    """Sort key: the vocabulary's order, unknown (a site's) last."""
    return CLASSES.index(cls) if cls in CLASSES else len(CLASSES)

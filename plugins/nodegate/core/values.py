"""Core value types: commands, their outcomes, verdicts."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from nodegate.core.thresholds import Threshold


class Status(str, enum.Enum):
    """Verdict status. Only PASS admits; everything else fails closed."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"


class Reach(str, enum.Enum):
    """How far a node's stage session got (transport-level outcome)."""

    OK = "ok"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth_failed"
    HOSTKEY_UNKNOWN = "hostkey_unknown"  # not in known_hosts: verify and add, or accept-new
    HOSTKEY_CHANGED = "hostkey_changed"  # known_hosts holds another key: re-image or attack
    TIMEOUT = "timeout"
    ERROR = "error"
    # The scheduler holds the node out of service (drained) and no other way reached it: the
    # node is not tested (not qualified), nothing says it is broken.
    HELD = "held"


@dataclass(frozen=True, slots=True)
class Shell:
    """Shell syntax nodegate writes itself (a glob, a redirection, a pipeline, `$var`), placed
    in a command line exactly as written, spaces included.

    Trusted text: never built from inventory, profile or node strings (numbers nodegate
    formats, and names it has checked, excepted). Those are plain `str` parts of a command
    (one argument each), quoted once where the line is rendered
    (`nodegate.transport.script.command_line`).
    """

    text: str


# One part of a command: an argument (quoted when rendered) or shell syntax (as written).
Part: TypeAlias = str | Shell


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One command a stage runs on a node: `argv` parts, rendered and quoted once when the
    stage script is built; it runs under `timeout timeout_s`.

    >>> CommandSpec("kernel", ("uname", "-r"), 10.0).argv
    ('uname', '-r')
    """

    id: str
    argv: tuple[Part, ...]
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if isinstance(self.argv, (str, Shell)):
            raise TypeError(f"command {self.id!r}: argv is a tuple of parts, not {self.argv!r}")
        object.__setattr__(self, "argv", tuple(self.argv))


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command did on one node. rc 124/137 = killed at its deadline."""

    id: str
    cmd: str
    rc: int | None
    stdout: str
    stderr: str
    duration_s: float | None
    timed_out: bool = False
    evidence: str | None = None  # path of the raw file, relative to the run directory
    truncated: str | None = None  # why the output is not whole (cut at the cap, NUL bytes)

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out and self.truncated is None


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """Everything one stage session returned for one node: data, not exceptions."""

    node: str
    reach: Reach
    results: dict[str, CommandResult] = field(default_factory=dict)
    detail: str = ""
    duration_s: float | None = None
    connects: int = 0  # SSH connections opened for this session (0 when reused)

    def result(self, cmd_id: str) -> CommandResult | None:
        return self.results.get(cmd_id)


# What a verdict says of its check, in the order verdicts.jsonl.gz and admission.json write it
# (between the check/node/status and the evidence).
SAID = ("component", "observed", "expected", "unit", "message", "remediation", "remediation_class")


@dataclass(frozen=True, slots=True)
class Verdict:
    """One check's judgement on one component of one node."""

    check: str
    node: str
    status: Status
    component: str = ""
    observed: Any = None
    expected: Any = None
    unit: str | None = None
    message: str = ""
    remediation: str | None = None
    evidence: tuple[str, ...] = ()
    # What the operator must do (`nodegate.admission.remediation.CLASSES`); None on a pass.
    remediation_class: str | None = None
    # The threshold `observed` was judged against, as data (`expected` is its display text);
    # None when no single threshold judged it.
    reference: Threshold | None = None
    # The nodes (a nodeset) of the job whose number `observed` is, for a check that measures a
    # job (`Check.measures`); None for a node's own number.
    job: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON; `reference` and `job` only when set (older verdicts read the
        same)."""
        # Written out field by field, in SAID's order (2.5 M verdicts at 10,000 nodes).
        d = {"check": self.check, "node": self.node, "status": _STATUS_TEXT[self.status],
             "component": self.component, "observed": self.observed, "expected": self.expected,
             "unit": self.unit, "message": self.message, "remediation": self.remediation,
             "remediation_class": self.remediation_class,
             "evidence": list(self.evidence)}  # fmt: skip
        if self.reference is not None:
            d["reference"] = self.reference.to_json()
        if self.job is not None:
            d["job"] = self.job
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Verdict:
        return cls(
            check=d["check"],
            node=d["node"],
            status=Status(d["status"]),
            component=d.get("component", ""),
            observed=d.get("observed"),
            expected=d.get("expected"),
            unit=d.get("unit"),
            message=d.get("message", ""),
            remediation=d.get("remediation"),
            evidence=tuple(d.get("evidence", ())),
            remediation_class=d.get("remediation_class"),
            reference=None if d.get("reference") is None else Threshold.from_json(d["reference"]),
            job=d.get("job"),
        )


_STATUS_TEXT = {s: s.value for s in Status}
_SERIAL = re.compile(r" serial \S+")


def component_key(component: str) -> str:
    """A verdict's component without a part's serial number.

    >>> component_key("GPU3 0000:5d:00.0 serial 1650124032506 via 0000:15:01.0 (Root Port)")
    'GPU3 0000:5d:00.0 via 0000:15:01.0 (Root Port)'
    """
    return _SERIAL.sub("", component)


def is_number(value: Any) -> bool:
    """A metric's value: an int or float, never a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)

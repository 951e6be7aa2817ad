"""One node's facts for the `reach` stage, read through nodegate.parsers only."""

from __future__ import annotations

from dataclasses import dataclass

from nodegate.core.values import NodeOutcome
from nodegate.framework.stage import OutcomeReader
from nodegate.parsers.reach import (
    OsRelease,
    parse_nvidia_version,
    parse_ofed_info,
    parse_os_release,
    parse_uname_r,
)
from nodegate.stages.reach.commands import KERNEL, NVIDIA_DRIVER, OFED, OS_RELEASE

# Exit codes that mean "not installed" rather than "broken": `cat` of the absent
# /proc/driver/nvidia/version exits 1; a shell that cannot find `ofed_info` exits 127.
DRIVER_ABSENT_RCS = (1,)
OFED_ABSENT_RCS = (127,)


@dataclass(frozen=True, slots=True)
class VersionFact:
    """One installed version, or why there is none (`absent`: the part is not installed)."""

    value: str | None
    why: str | None  # the command's failure as OutcomeReader put it; None when value is set
    absent: bool
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OsFact:
    """/etc/os-release, or why it could not be read."""

    release: OsRelease | None
    why: str | None
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReachFacts:
    """What one reachable node's session showed: how much of it ran, OS and versions."""

    node: str
    commands_ran: int
    commands_total: int
    session_detail: str  # why the session ended early, if it did ("" otherwise)
    os: OsFact
    kernel: VersionFact
    nvidia_driver: VersionFact
    ofed: VersionFact


def _version(reader: OutcomeReader, cmd_id: str, value: str | None) -> VersionFact:
    why = None if value is not None else reader.errors.get(cmd_id)
    return VersionFact(value, why, reader.absent(cmd_id), reader.evidence(cmd_id))


def build_facts(outcome: NodeOutcome, commands_total: int) -> ReachFacts:
    """The facts of one reachable node's outcome (`commands_total`: commands it was sent)."""
    r = OutcomeReader("reach", outcome)
    release = r.parse(OS_RELEASE, parse_os_release)
    kernel = r.parse(KERNEL, parse_uname_r)
    driver = r.parse(NVIDIA_DRIVER, parse_nvidia_version, absent_rcs=DRIVER_ABSENT_RCS)
    ofed = r.parse(OFED, parse_ofed_info, absent_rcs=OFED_ABSENT_RCS)
    return ReachFacts(
        node=outcome.node,
        commands_ran=len(outcome.results),
        commands_total=commands_total,
        session_detail=outcome.detail,
        os=OsFact(release, r.errors.get(OS_RELEASE), r.evidence(OS_RELEASE)),
        kernel=_version(r, KERNEL, kernel),
        nvidia_driver=_version(r, NVIDIA_DRIVER, None if driver is None else driver.version),
        ofed=_version(r, OFED, None if ofed is None else ofed.version),
    )

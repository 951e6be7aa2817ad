"""The `reach` stage's checks: session, OS release, three versions against the profile and the
same three against the fleet majority of the node's profile."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nodegate.core.checks import AnyCheck, Check, CheckTable
from nodegate.core.majority import Majority
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.core.versions import VersionRule
from nodegate.stages.reach.facts import ReachFacts, VersionFact
from nodegate.stages.reach.profile import ReachProfile

NodeCheck = Callable[[AnyCheck, ReachFacts, ReachProfile], list[Verdict]]
FleetCheck = Callable[
    [AnyCheck, Mapping[str, ReachFacts], Mapping[str, ReachProfile]], list[Verdict]
]


@dataclass(frozen=True, slots=True)
class VersionedPart:
    """A part judged by version twice: against its profile rule and against the fleet."""

    key: str  # its name in the profile's `uniform` list
    component: str  # what verdicts name: "kernel", "nvidia driver", "OFED"
    fact: Callable[[ReachFacts], VersionFact]
    rule: Callable[[ReachProfile], VersionRule]


KERNEL = VersionedPart("kernel", "kernel", lambda f: f.kernel, lambda p: p.kernel)
DRIVER = VersionedPart(
    "nvidia_driver", "nvidia driver", lambda f: f.nvidia_driver, lambda p: p.nvidia_driver
)
OFED = VersionedPart("ofed", "OFED", lambda f: f.ofed, lambda p: p.ofed)


def ssh_session(check: AnyCheck, facts: ReachFacts, prof: ReachProfile) -> list[Verdict]:
    """reach.ssh: the session ran every command, or was cut short."""
    ran, total = facts.commands_ran, facts.commands_total
    cut_short = bool(facts.session_detail) and ran < total
    return [
        judged(
            check,
            facts.node,
            not cut_short,
            "ssh",
            f"{ran}/{total} commands" if cut_short else "ok",
            "every command reports" if cut_short else "ok",
            facts.session_detail if cut_short else f"session ran {ran} of {total} commands",
            remediation="node session cut short; check node load and sshd",
        )
    ]


def os_release(check: AnyCheck, facts: ReachFacts, prof: ReachProfile) -> list[Verdict]:
    """reach.os.release: ID and VERSION_ID are among the profile's."""
    node, osf = facts.node, facts.os
    want = f"ID in {list(prof.os_id.value)}, VERSION_ID in {list(prof.os_version_id.value)}"
    if osf.release is None:
        return [error(check, node, "os", osf.why or "", expected=want, evidence=osf.evidence)]
    rel = osf.release
    got = f"{rel.id} {rel.version_id}"
    ok = prof.os_id.holds(rel.id) and prof.os_version_id.holds(rel.version_id)
    return [
        judged(
            check,
            node,
            ok,
            "os",
            got,
            want,
            rel.pretty_name or got,
            remediation="reimage the node with a qualified OS release",
            evidence=osf.evidence,
        )
    ]


def _unversioned(
    check: AnyCheck, node: str, part: VersionedPart, v: VersionFact, rule: VersionRule
) -> Verdict:
    """No version read: not installed (required or not), or the command failed."""
    comp, why = part.component, v.why or "no value"
    if not v.absent:
        return error(check, node, comp, why, expected=rule.expected(), evidence=v.evidence)
    if rule.required:
        return judged(
            check,
            node,
            False,
            comp,
            "not installed",
            rule.expected(),
            f"{comp} not installed ({why.removeprefix('absent: ')})",
            remediation=f"install the qualified {comp}",
            evidence=v.evidence,
        )
    return judged(
        check,
        node,
        True,
        comp,
        "not installed",
        "optional",
        "not installed; profile does not require it",
        evidence=v.evidence,
    )


def version_check(part: VersionedPart) -> NodeCheck:
    """`reach.<part>.version`: the installed version is allowed by the profile's rule."""

    def judge(check: AnyCheck, facts: ReachFacts, prof: ReachProfile) -> list[Verdict]:
        v, rule, comp = part.fact(facts), part.rule(prof), part.component
        if v.value is None:
            return [_unversioned(check, facts.node, part, v, rule)]
        ok, want = rule.holds(v.value), rule.expected()
        return [
            judged(
                check,
                facts.node,
                ok,
                comp,
                v.value,
                want,
                f"{comp} {v.value}" + ("" if ok else f", expected {want}"),
                remediation=f"install a qualified {comp} ({want})",
                evidence=v.evidence,
            )
        ]

    judge.__name__ = judge.__qualname__ = f"{part.key}_version"
    return judge


def _against_majority(
    check: AnyCheck, node: str, part: VersionedPart, v: VersionFact, m: Majority
) -> Verdict:
    """One node's version against the majority of its profile's nodes."""
    comp, value = part.component, v.value
    if m.tie:
        return judged(
            check,
            node,
            False,
            comp,
            value,
            "fleet majority",
            f"no {comp} majority in the fleet: {m.histogram()}",
            remediation=f"align {comp} across the fleet",
            evidence=v.evidence,
        )
    top, n_top, total = m.top, m.top_count, m.total
    ok = m.agrees(value)
    return judged(
        check,
        node,
        ok,
        comp,
        value,
        top,
        f"{comp} {value} = fleet majority ({n_top}/{total})"
        if ok
        else f"{comp} {value} differs from fleet {top} ({n_top}/{total} nodes)",
        remediation=f"align {comp} with the fleet ({top})",
        evidence=v.evidence,
    )


def uniform_check(part: VersionedPart) -> FleetCheck:
    """`reach.<part>.uniform`: the version equals the majority among reachable nodes of the
    same profile that reported one (a tie fails every node in it)."""

    def judge(
        check: AnyCheck, facts: Mapping[str, ReachFacts], profiles: Mapping[str, ReachProfile]
    ) -> list[Verdict]:
        by_profile: dict[str, list[str | None]] = {}
        for node, f in facts.items():
            by_profile.setdefault(profiles[node].name, []).append(part.fact(f).value)
        majority = {name: Majority.of(values) for name, values in by_profile.items()}
        out: list[Verdict] = []
        for node, f in facts.items():
            prof, v, comp = profiles[node], part.fact(f), part.component
            if part.key not in prof.uniform:
                out.append(
                    judged(
                        check,
                        node,
                        True,
                        comp,
                        v.value,
                        "not required",
                        f"profile {prof.name} does not require a uniform {comp}",
                        evidence=v.evidence,
                    )
                )
            elif v.value is None:
                why = f"no {comp} value to compare: {v.why or 'missing'}"
                out.append(
                    error(check, node, comp, why, expected="fleet majority", evidence=v.evidence)
                )
            else:
                out.append(_against_majority(check, node, part, v, majority[prof.name]))
        return out

    judge.__name__ = judge.__qualname__ = f"{part.key}_uniform"
    return judge


# The session check: the engine keeps a node that fails it out of every later stage.
SSH: Check[ReachFacts, ReachProfile] = Check(
    "reach.ssh",
    "an SSH session opens and runs every command of the stage.",
    ssh_session,
    "ssh session",
    "test_ssh_reachable",
)

CHECKS: CheckTable[ReachFacts, ReachProfile] = CheckTable(
    "reach",
    [
        SSH,
        Check(
            "reach.os.release",
            "/etc/os-release ID and VERSION_ID are in the profile.",
            os_release,
            "OS",
            "test_os_release",
        ),
        Check(
            "reach.kernel.version",
            "`uname -r` is allowed by the profile.",
            version_check(KERNEL),
            "kernel",
            "test_kernel_version",
        ),
        Check(
            "reach.kernel.uniform",
            "the kernel equals the fleet majority (same profile).",
            uniform_check(KERNEL),
            "kernel",
            "test_kernel_uniform",
            "fleet",
        ),
        Check(
            "reach.driver.version",
            "the NVIDIA kernel module version is allowed by the profile.",
            version_check(DRIVER),
            "nvidia driver",
            "test_driver_version",
        ),
        Check(
            "reach.driver.uniform",
            "the driver equals the fleet majority (same profile).",
            uniform_check(DRIVER),
            "nvidia driver",
            "test_driver_uniform",
            "fleet",
        ),
        Check(
            "reach.ofed.version",
            "`ofed_info -s` is allowed by the profile.",
            version_check(OFED),
            "OFED",
            "test_ofed_version",
        ),
        Check(
            "reach.ofed.uniform",
            "OFED equals the fleet majority (same profile).",
            uniform_check(OFED),
            "OFED",
            "test_ofed_uniform",
            "fleet",
        ),
    ],
)

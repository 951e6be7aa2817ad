"""Stage `reach`: SSH reachable; OS, kernel, NVIDIA driver and OFED versions vs the profile;
fleet uniformity (a node off the fleet majority is flagged even where the profile allows it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from nodegate.inventory import Node
from nodegate.model import CommandSpec, NodeOutcome, Reach, Status, Verdict
from nodegate.parsers.reach import (
    parse_nvidia_version,
    parse_ofed_info,
    parse_os_release,
    parse_uname_r,
)
from nodegate.profiles import Profile
from nodegate.stages.base import (
    CheckSpec,
    OutcomeReader,
    PassiveStage,
    StageContext,
    unreachable_verdicts,
)
from nodegate.versions import check_version

CMD_TIMEOUT_S = 10.0

# fact name -> (command id, component, unit)
FACTS = {
    "kernel": ("kernel", "kernel", None),
    "nvidia_driver": ("nvidia_driver", "nvidia driver", None),
    "ofed": ("ofed", "OFED", None),
}


class ReachStage(PassiveStage[Any, Any]):
    name = "reach"
    checks = (
        CheckSpec("reach.ssh", "test_ssh_reachable", "SSH session opens and runs commands"),
        CheckSpec("reach.os.release", "test_os_release", "OS distribution and release"),
        CheckSpec("reach.kernel.version", "test_kernel_version", "kernel release vs profile"),
        CheckSpec("reach.kernel.uniform", "test_kernel_uniform", "kernel matches fleet majority"),
        CheckSpec("reach.driver.version", "test_driver_version", "NVIDIA driver vs profile"),
        CheckSpec("reach.driver.uniform", "test_driver_uniform", "driver matches fleet majority"),
        CheckSpec("reach.ofed.version", "test_ofed_version", "OFED version vs profile"),
        CheckSpec("reach.ofed.uniform", "test_ofed_uniform", "OFED matches fleet majority"),
    )

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        t = CMD_TIMEOUT_S
        return [
            CommandSpec("os_release", "cat /etc/os-release", t),
            CommandSpec("kernel", "uname -r", t),
            CommandSpec("nvidia_driver", "cat /proc/driver/nvidia/version", t),
            CommandSpec("ofed", "ofed_info -s", t),
        ]

    def evaluate(self, outcomes: Mapping[str, NodeOutcome], ctx: StageContext) -> list[Verdict]:
        verdicts: list[Verdict] = []
        values: dict[str, dict[str, str | None]] = {}
        facts_by_node: dict[str, OutcomeReader] = {}
        for node in ctx.nodes:
            out = outcomes[node.name]
            if out.reach is not Reach.OK:
                verdicts += unreachable_verdicts(self, out, first_check_fails=True)
                continue
            f = facts_by_node[node.name] = OutcomeReader(self.name, out)
            prof = ctx.profiles[node.name].section("reach")
            verdicts.append(self._ssh(f))
            verdicts.append(self._os(f, prof))
            vals = {
                "kernel": f.parse("kernel", parse_uname_r),
                "nvidia_driver": _opt(
                    f.parse("nvidia_driver", parse_nvidia_version, absent_rcs=(1,)), "version"
                ),
                "ofed": _opt(f.parse("ofed", parse_ofed_info, absent_rcs=(127,)), "version"),
            }
            values[node.name] = vals
            for fact, check in (
                ("kernel", "reach.kernel.version"),
                ("nvidia_driver", "reach.driver.version"),
                ("ofed", "reach.ofed.version"),
            ):
                verdicts.append(self._version(f, check, fact, vals[fact], prof[fact]))
        for fact, check in (
            ("kernel", "reach.kernel.uniform"),
            ("nvidia_driver", "reach.driver.uniform"),
            ("ofed", "reach.ofed.uniform"),
        ):
            verdicts += self._uniform(check, fact, values, facts_by_node, ctx)
        return verdicts

    # -- checks ----------------------------------------------------------------------------
    def _ssh(self, f: OutcomeReader) -> Verdict:
        out = f.outcome
        ran = len(out.results)
        total = 4
        if out.detail and ran < total:
            return Verdict(
                "reach.ssh",
                out.node,
                Status.FAIL,
                "ssh",
                f"{ran}/{total} commands",
                "every command reports",
                message=out.detail,
                remediation="node session cut short; check node load and sshd",
            )
        return Verdict(
            "reach.ssh",
            out.node,
            Status.PASS,
            "ssh",
            "ok",
            "ok",
            message=f"session ran {ran} of {total} commands",
        )

    def _os(self, f: OutcomeReader, prof: Mapping[str, Any]) -> Verdict:
        node = f.outcome.node
        osr = f.parse("os_release", parse_os_release)
        ev = f.evidence("os_release")
        want = f"ID in {prof['os']['id']}, VERSION_ID in {prof['os']['version_id']}"
        if osr is None:
            return Verdict(
                "reach.os.release",
                node,
                Status.ERROR,
                "os",
                None,
                want,
                message=f.errors["os_release"],
                evidence=ev,
            )
        got = f"{osr.id} {osr.version_id}"
        ok = osr.id in prof["os"]["id"] and osr.version_id in prof["os"]["version_id"]
        return Verdict(
            "reach.os.release",
            node,
            Status.PASS if ok else Status.FAIL,
            "os",
            got,
            want,
            message=osr.pretty_name or got,
            evidence=ev,
            remediation=None if ok else "reimage the node with a qualified OS release",
        )

    def _version(
        self, f: OutcomeReader, check: str, fact: str, value: str | None, rule: Mapping[str, Any]
    ) -> Verdict:
        cmd_id, component, unit = FACTS[fact]
        node = f.outcome.node
        ev = f.evidence(cmd_id)
        if value is None:
            why = f.errors.get(cmd_id, "no value")
            if f.absent(cmd_id):
                if rule["required"]:
                    return Verdict(
                        check,
                        node,
                        Status.FAIL,
                        component,
                        "not installed",
                        _expect(rule),
                        message=f"{component} not installed ({why[8:]})",
                        evidence=ev,
                        remediation=f"install the qualified {component}",
                    )
                return Verdict(
                    check,
                    node,
                    Status.PASS,
                    component,
                    "not installed",
                    "optional",
                    message="not installed; profile does not require it",
                    evidence=ev,
                )
            return Verdict(
                check, node, Status.ERROR, component, None, _expect(rule), message=why, evidence=ev
            )
        ok, want = check_version(value, rule)
        return Verdict(
            check,
            node,
            Status.PASS if ok else Status.FAIL,
            component,
            value,
            want,
            unit=unit,
            evidence=ev,
            message=f"{component} {value}" + ("" if ok else f", expected {want}"),
            remediation=None if ok else f"install a qualified {component} ({want})",
        )

    def _uniform(
        self,
        check: str,
        fact: str,
        values: Mapping[str, Mapping[str, str | None]],
        facts: Mapping[str, OutcomeReader],
        ctx: StageContext,
    ) -> list[Verdict]:
        cmd_id, component, _ = FACTS[fact]
        # Majority among reachable nodes of the same profile that reported the fact.
        by_profile: dict[str, Counter[str]] = {}
        for name, vals in values.items():
            v = vals.get(fact)
            if v is not None:
                by_profile.setdefault(ctx.profiles[name].name, Counter())[v] += 1
        out: list[Verdict] = []
        for name, vals in values.items():
            prof = ctx.profiles[name]
            f = facts[name]
            ev = f.evidence(cmd_id)
            v = vals.get(fact)
            if fact not in prof.section("reach")["uniform"]:
                out.append(
                    Verdict(
                        check,
                        name,
                        Status.PASS,
                        component,
                        v,
                        "not required",
                        message=f"profile {prof.name} does not require a uniform {component}",
                        evidence=ev,
                    )
                )
                continue
            if v is None:
                out.append(
                    Verdict(
                        check,
                        name,
                        Status.ERROR,
                        component,
                        None,
                        "fleet majority",
                        message=f"no {component} value to compare: "
                        + f.errors.get(cmd_id, "missing"),
                        evidence=ev,
                    )
                )
                continue
            counts = by_profile[prof.name]
            ranked = counts.most_common()
            top, n_top = ranked[0]
            tie = len(ranked) > 1 and ranked[1][1] == n_top
            total = sum(counts.values())
            if tie:
                split = ", ".join(f"{val} ({n})" for val, n in ranked)
                out.append(
                    Verdict(
                        check,
                        name,
                        Status.FAIL,
                        component,
                        v,
                        "fleet majority",
                        message=f"no {component} majority in the fleet: {split}",
                        evidence=ev,
                        remediation=f"align {component} across the fleet",
                    )
                )
            elif v != top:
                out.append(
                    Verdict(
                        check,
                        name,
                        Status.FAIL,
                        component,
                        v,
                        top,
                        message=f"{component} {v} differs from fleet {top} ({n_top}/{total} nodes)",
                        evidence=ev,
                        remediation=f"align {component} with the fleet ({top})",
                    )
                )
            else:
                out.append(
                    Verdict(
                        check,
                        name,
                        Status.PASS,
                        component,
                        v,
                        top,
                        message=f"{component} {v} = fleet majority ({n_top}/{total})",
                        evidence=ev,
                    )
                )
        return out


def _opt(obj: Any, attr: str) -> str | None:
    return None if obj is None else str(getattr(obj, attr))


def _expect(rule: Mapping[str, Any]) -> str:
    return check_version("", rule)[1]


STAGE = ReachStage()

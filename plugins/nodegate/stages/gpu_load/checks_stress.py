"""gpu_load checks on DCGM's stress plugins (`dcgmi diag -r 3|4 -j`): each plugin judged per
GPU by DCGM's own result, plus the profile's numbers where the plugin states one
(targeted_power's max power, `parsers.dcgm_stress`)."""

from __future__ import annotations

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.parsers.dcgm import DiagResult, DiagTest
from nodegate.parsers.dcgm_stress import targeted_power_reading
from nodegate.stages.gpu_load.checks_copy import not_at_level
from nodegate.stages.gpu_load.commands import DCGM
from nodegate.stages.gpu_load.profile import GpuLoadProfile
from nodegate.stages.gpu_load.reading import LoadFacts

_PASSING = (DiagResult.PASS,)


def _plugin(f: LoadFacts, name: str) -> DiagTest | None:
    if f.dcgm is None:
        return None
    return next((t for t in f.dcgm.tests if t.name == name), None)


def plugin_check(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile, name: str) -> list[Verdict]:
    """One plugin on every GPU: DCGM's result per entity (its warnings as the message)."""
    if name not in p.run.dcgm_plugins:
        return not_at_level(check, f.node, f"DCGM {name}")
    ev = f.evidence(DCGM)
    if f.dcgm is None:
        return [error(check, f.node, "node", f.why(DCGM), evidence=ev)]
    test = _plugin(f, name)
    if test is None:
        ran = ", ".join(t.name for t in f.dcgm.tests) or "none"
        why = f"dcgmi diag -r {p.run.dcgm_level} ran no {name} (ran: {ran})"
        return [error(check, f.node, "node", why, evidence=ev)]
    ok_results = (DiagResult.PASS, DiagResult.WARN) if p.dcgm_allow_warn else _PASSING
    gpus = {e.entity_id: e.result for e in test.entities if e.entity_group == "GPU"}
    if not gpus:
        return [error(check, f.node, "node", f"DCGM {name}: no per-GPU result", evidence=ev)]
    power = {}
    if name == "targeted_power":
        for note in test.info:
            r = targeted_power_reading(note.text)
            if r is not None:
                power[note.entity_id if note.entity_id is not None else r.gpu] = r
    out = []
    for idx in sorted(gpus):
        res, comp = gpus[idx], f.gpu(idx).name
        said = [w.text for w in test.warnings if w.entity_id in (idx, None)]
        if res in (DiagResult.SKIP, DiagResult.NOT_RUN):
            out.append(
                error(
                    check,
                    f.node,
                    comp,
                    f"DCGM {name}: {res.value} on GPU{idx}",
                    expected="Pass",
                    evidence=ev,
                )
            )
            continue
        msg = f"DCGM {name}: {res.value}" + (f": {'; '.join(said)}" if said else "")
        ok = res in ok_results
        observed: object = res.value
        if name == "targeted_power" and p.power_min is not None:
            reading = power.get(idx)
            if reading is None:
                out.append(
                    error(
                        check,
                        f.node,
                        comp,
                        f"DCGM {name}: {res.value}, but no max power stated for GPU{idx}",
                        expected=p.power_min.expected(),
                        unit=p.power_min.unit,
                        evidence=ev,
                    )
                )
                continue
            msg += f"; max power {reading.max_w:g} W, average {reading.average_w:g} W"
            ok = ok and p.power_min.holds(reading.max_w)
            observed = reading.max_w
        out.append(
            judged(
                check,
                f.node,
                ok,
                comp,
                observed,
                p.power_min.expected() if name == "targeted_power" and p.power_min else "Pass",
                msg,
                unit="W" if isinstance(observed, float) else None,
                evidence=ev,
                reference=p.power_min if name == "targeted_power" else None,
                remediation=f"DCGM {name} fails on GPU{idx} under load: a hardware fault "
                "(power delivery, cooling, the GPU); reseat, then RMA if it repeats",
            )
        )
    return out


def check_targeted_stress(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.dcgm.targeted_stress."""
    return plugin_check(check, f, p, "targeted_stress")


def check_targeted_power(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.dcgm.targeted_power: DCGM's result and the profile's max-power floor."""
    return plugin_check(check, f, p, "targeted_power")


def check_memory_bandwidth(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.dcgm.memory_bandwidth."""
    return plugin_check(check, f, p, "memory_bandwidth")


def check_pulse(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.dcgm.pulse_test (level 4)."""
    return plugin_check(check, f, p, "pulse_test")

"""gpu_load checks on the telemetry sampled while the load ran: clock event reasons (thermal,
power brake), the SM clock against the GPU's max clock, temperature, uncorrectable ECC delta,
Xids logged during the run. A failure
quotes the samples that show it (timestamp, SM clock of max, temperature, power)."""

from __future__ import annotations

from collections.abc import Sequence

from nodegate.core.checks import AnyCheck
from nodegate.core.errors import ParseError
from nodegate.core.values import Verdict
from nodegate.core.verdicts import against, error, judged
from nodegate.parsers.nvsmi_csv import CsvSample
from nodegate.stages.gpu_load.commands import KERNEL_LOG, SAMPLER
from nodegate.stages.gpu_load.profile import GpuLoadProfile
from nodegate.stages.gpu_load.reading import LoadFacts

QUOTED = 3  # samples quoted in a message
REASON = "clocks_event_reasons."
GPU_IDLE = 0x1  # nvml.h nvmlClocksEventReasonGpuIdle: nothing runs on the GPU


def _describe(s: CsvSample) -> str:
    """`2026/12/01 18:40:02.100 1410/1980 MHz 92 C 690.12 W`."""
    sm, mx = s.text("clocks.current.sm") or "?", s.text("clocks.max.sm") or "?"
    return (
        f"{s.text('timestamp')} SM {sm.removesuffix(' MHz')}/{mx} "
        f"{s.text('temperature.gpu') or '?'} C {s.text('power.draw') or '? W'}"
    )


def _per_gpu(
    check: AnyCheck, f: LoadFacts
) -> tuple[list[tuple[str, int, list[CsvSample]]], list[Verdict]]:
    ev = f.evidence(SAMPLER)
    if f.samples is None:
        return [], [error(check, f.node, "node", f.why(SAMPLER), evidence=ev)]
    return [(g.name, g.index, f.samples_of(g.index)) for g in f.gpus], []


def check_throttle(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.telemetry.throttle: none of the profile's fail reasons active in any sample."""
    per, errs = _per_gpu(check, f)
    if errs:
        return errs
    ev, reasons = f.evidence(SAMPLER), p.telemetry.fail_reasons
    want = "none of " + ", ".join(reasons)
    out = []
    for comp, _idx, samples in per:
        try:
            hits = [(s, [r for r in reasons if s.active(REASON + r)]) for s in samples]
            unread = [s for s in samples if any(s.active(REASON + r) is None for r in reasons)]
        except ParseError as exc:
            out.append(error(check, f.node, comp, exc.reason, expected=want, evidence=ev))
            continue
        if unread and len(unread) == len(samples):
            out.append(
                error(
                    check,
                    f.node,
                    comp,
                    "clock event reasons not reported ([N/A])",
                    expected=want,
                    evidence=ev,
                )
            )
            continue
        bad = [(s, rs) for s, rs in hits if rs]
        seen = sorted({r for _, rs in bad for r in rs}, key=reasons.index)
        quoted = "; ".join(_describe(s) for s, _ in bad[:QUOTED])
        msg = (
            f"{', '.join(seen)} active in {len(bad)} of {len(samples)} samples under load: {quoted}"
            if bad
            else f"no fail reason in {len(samples)} samples under load"
        )
        thermal = any("thermal" in r for r in seen)
        hint = (
            "the GPU slows down for heat under load: check its cooling (fans, airflow, heatsink "
            "contact, inlet temperature) on site"
            if thermal
            else "the GPU's clocks are braked for power under load: check the node's power "
            "supplies and power-brake signal on site"
        )
        out.append(
            judged(
                check,
                f.node,
                not bad,
                comp,
                ", ".join(seen) or "none",
                want,
                msg,
                remediation=hint,
                evidence=ev,
            )
        )
    return out


def _idle(s: CsvSample) -> bool | None:
    """Whether `clocks_event_reasons.active` (a hex bit mask) has the GPU-idle bit; None when
    not reported; ParseError when it is not a mask."""
    raw = s.text(REASON + "active")
    if raw is None:
        return None
    try:
        return bool(int(raw, 16) & GPU_IDLE)
    except ValueError:
        raise ParseError(
            "nvidia-smi --query-gpu",
            f"line {s.line_no}: {REASON}active {raw[:30]!r} is not a bit mask",
        ) from None


def check_sm_clock(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.telemetry.sm_clock: under load (samples without the GPU-idle bit), the SM clock
    below `min_share` of the GPU's max SM clock in more than `max_samples_below` samples is a
    FAIL, whatever the clock event reasons say (the ones active in those samples are named)."""
    rule = p.telemetry.sm_clock
    if rule is None:  # not asserted: a PASS that says so
        return [judged(check, f.node, True, "node", None, None,
                       "the profile sets no gpu_load.telemetry.sm_clock")]  # fmt: skip
    per, errs = _per_gpu(check, f)
    if errs:
        return errs
    ev = f.evidence(SAMPLER)
    pct = f"{rule.min_share * 100:g} %"
    want = f"<= {rule.max_samples_below} samples below {pct} of clocks.max.sm"
    out = []
    for comp, _idx, samples in per:
        try:
            idle = [(s, _idle(s)) for s in samples]
            if any(i is None for _, i in idle):
                out.append(error(check, f.node, comp, f"{REASON}active not reported ([N/A]): "
                                 "samples under load cannot be told from idle ones",
                                 expected=want, unit="samples", evidence=ev))  # fmt: skip
                continue
            loaded = [s for s, i in idle if not i]
            clocks = [(s, sm, mx) for s in loaded
                      if (sm := s.number("clocks.current.sm")) is not None
                      and (mx := s.number("clocks.max.sm")) is not None and mx > 0]  # fmt: skip
            low = [s for s, sm, mx in clocks if sm < rule.min_share * mx]
            why = sorted({r.removeprefix(REASON) for s in low for r in s.cells
                          if r.startswith(REASON) and r != REASON + "active"
                          and s.active(r)})  # fmt: skip
        except ParseError as exc:
            out.append(error(check, f.node, comp, exc.reason, expected=want, evidence=ev))
            continue
        if not clocks:
            what = "no sample under load" if not loaded else "clocks.current.sm/max.sm not reported"
            out.append(error(check, f.node, comp, what, expected=want, unit="samples",
                             evidence=ev))  # fmt: skip
            continue
        reasons = (
            f"clock event reasons active: {', '.join(why)}"
            if why
            else "no clock event reason reported"
        )
        msg = (
            f"SM clock below {pct} of max in {len(low)} of {len(clocks)} samples under load: "
            + "; ".join(_describe(s) for s in low[:QUOTED])
            + f" ({reasons})"
            if low
            else f"SM clock at or above {pct} of max in {len(clocks)} samples under load"
        )
        out.append(
            judged(
                check,
                f.node,
                len(low) <= rule.max_samples_below,
                comp,
                len(low),
                want,
                msg,
                unit="samples",
                remediation="the GPU does not hold its clocks under load"
                + (f" ({', '.join(why)})" if why else ", with no reason NVML reports")
                + ": check its cooling and power delivery on site, and any clock lock "
                "(nvidia-smi -q -d PERFORMANCE,CLOCK)",
                evidence=ev,
            )
        )
    return out


def _max(samples: Sequence[CsvSample], field: str) -> float | None:
    vals = [v for s in samples if (v := s.number(field)) is not None]
    return max(vals) if vals else None


def check_temperature(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.telemetry.temperature: the hottest sample against the profile's maximum."""
    per, errs = _per_gpu(check, f)
    if errs:
        return errs
    ev, t = f.evidence(SAMPLER), p.telemetry.temperature
    out = []
    for comp, _idx, samples in per:
        try:
            hot = _max(samples, "temperature.gpu")
        except ParseError as exc:
            out.append(error(check, f.node, comp, exc.reason, expected=t.expected(), evidence=ev))
            continue
        if hot is None:
            out.append(
                error(
                    check,
                    f.node,
                    comp,
                    "no temperature sampled",
                    expected=t.expected(),
                    unit=t.unit,
                    evidence=ev,
                )
            )
            continue
        worst = max(samples, key=lambda s: s.number("temperature.gpu") or -1.0)
        out.append(
            against(
                check,
                f.node,
                comp,
                hot,
                t,
                f"hottest of {len(samples)} samples: {_describe(worst)}",
                remediation="check the GPU's cooling on site",
                evidence=ev,
            )
        )
    return out


def check_ecc(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.telemetry.ecc: volatile uncorrectable ECC errors counted during the load."""
    per, errs = _per_gpu(check, f)
    if errs:
        return errs
    ev, t = f.evidence(SAMPLER), p.telemetry.ecc_delta
    field = "ecc.errors.uncorrected.volatile.total"
    out = []
    for comp, _idx, samples in per:
        try:
            counts = [(s, v) for s in samples if (v := s.number(field)) is not None]
        except ParseError as exc:
            out.append(error(check, f.node, comp, exc.reason, expected=t.expected(), evidence=ev))
            continue
        if not counts:
            out.append(
                error(
                    check,
                    f.node,
                    comp,
                    f"{field} not reported",
                    expected=t.expected(),
                    unit=t.unit,
                    evidence=ev,
                )
            )
            continue
        delta = int(counts[-1][1] - counts[0][1])
        msg = (
            f"{field} {counts[0][1]:g} at {counts[0][0].text('timestamp')}, "
            f"{counts[-1][1]:g} at {counts[-1][0].text('timestamp')}"
        )
        out.append(
            against(
                check,
                f.node,
                comp,
                delta,
                t,
                msg,
                remediation="uncorrectable memory errors under load: reset the GPU, "
                "check row remapping; RMA if they recur",
                evidence=ev,
            )
        )
    return out


def check_xid(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.telemetry.xid: Xids the kernel logged from the first sample on, per GPU."""
    ev, t = f.evidence(KERNEL_LOG, SAMPLER), p.telemetry.xids
    if f.xids is None:
        return [error(check, f.node, "node", f.why(KERNEL_LOG), evidence=ev)]
    if not f.gpus:
        return [error(check, f.node, "node", f.why(SAMPLER), evidence=ev)]
    out = []
    by_bdf = {g.bdf: g for g in f.gpus if g.bdf}
    stray = [x for x in f.xids if x.bdf not in by_bdf]
    for g in f.gpus:
        mine = [x for x in f.xids if x.bdf == g.bdf]
        msg = "; ".join(f"Xid {x.xid} ({x.message[:80]})" for x in mine[:QUOTED]) or (
            "no Xid logged during the load"
        )
        out.append(
            against(
                check,
                f.node,
                g.name,
                len(mine),
                t,
                msg,
                remediation=f"GPU{g.index} logged Xid under load: reset it; the Xid "
                "table (pcie_gpu.xid) says what each code asks",
                evidence=ev,
            )
        )
    if stray:
        out.append(
            judged(
                check,
                f.node,
                False,
                "node",
                len(stray),
                t.expected(),
                "Xid of a device the sampler did not name: "
                + ", ".join(f"Xid {x.xid} PCI:{x.bdf}" for x in stray[:QUOTED]),
                unit=t.unit,
                remediation="reset the GPU named by its PCI address",
                evidence=ev,
                reference=t,
            )
        )
    return out

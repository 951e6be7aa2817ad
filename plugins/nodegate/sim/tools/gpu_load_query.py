"""The simulated `nvidia-smi --query-gpu=... --format=csv [-l S | -lms MS]` of the gpu_load
stage, and the fault targets it shares with sim/tools/gpu_load.py: each GPU's cells idle or
under load (the node is under load once its state file exists), computed per requested field
by a shell prelude (no process per cell: a sampler prints a row per GPU per interval)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools import gpu_render as r
from nodegate.sim.tools.base import NVIDIA_SMI_USAGE

DEFAULT_GPU = 3
STATE = "/var/lib/nodegate-sim/gpu-load"  # exists: the node is under load

# The header names of the fields nvidia-smi prints with a unit (corpus CSV captures).
UNITS = {
    "power.draw": "W",
    "clocks.current.sm": "MHz",
    "clocks.max.sm": "MHz",
    "clocks.current.memory": "MHz",
    "utilization.gpu": "%",
}
REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
    "sync_boost",
)
# NVML's clocks event reason bits (nvml.h nvmlClocksEventReason*), for `.active`.
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
}


def _gpu(arg: str | None) -> int:
    return int(arg) if arg and arg.isdigit() else DEFAULT_GPU


def faulty(node: SimNode, kind: str) -> int | None:
    """The GPU index a fault of `kind` targets on the node, if it has one."""
    f = node.fault(kind)
    if f is None:
        return None
    if kind == "xid_under_load":
        return _gpu((f.arg or "").partition("@")[2] or None)
    return _gpu(f.arg)


def _state(node: SimNode, idx: int, loaded: bool) -> dict[str, str]:
    """One GPU's CSV cells (as printed, units included) idle or under load."""
    hot, brake = faulty(node, "thermal_throttle_under_load"), faulty(node, "power_brake")
    active = {"gpu_idle"} if not loaded else set()
    sm, temp, power = ("345", "34", "71.24") if not loaded else ("1980", str(63 + idx % 4), "688.4")
    if loaded and idx == hot:
        active |= {"hw_thermal_slowdown", "sw_thermal_slowdown"}
        sm, temp = "1275", "92"
    if loaded and idx == brake:
        active |= {"hw_power_brake_slowdown"}
        sm, power = "1035", "402.7"
    if loaded and idx == faulty(node, "sm_clock_drop"):
        sm, power = "1395", "512.6"  # clocks down, nothing reported: only the clock shows it
    bits = sum(REASON_BITS[a] for a in active)
    cells = {
        "clocks.current.sm": f"{sm} MHz",
        "clocks.max.sm": "1980 MHz",
        "clocks_event_reasons.supported": "0x00000000000001FF",
        "clocks_event_reasons.active": f"0x{bits:016X}",
        "temperature.gpu": temp,
        "power.draw": f"{power} W",
        "ecc.errors.uncorrected.volatile.total": "0",
        "pstate": "P0",
        "utilization.gpu": "100 %" if loaded else "0 %",
    }
    for reason in REASONS:
        cells["clocks_event_reasons." + reason] = "Active" if reason in active else "Not Active"
        cells["clocks_throttle_reasons." + reason] = cells["clocks_event_reasons." + reason]
    return cells


def _cell_cases(node: SimNode, gpus: Sequence[r.SimGpu]) -> list[str]:
    lines = ["ngl_cell() {", '  case "$1:$2:$3" in']
    for g in gpus:
        fixed = {"index": str(g.index), "serial": g.serial, "uuid": g.uuid, "pci.bus_id": g.bus_id}
        for loaded in (False, True):
            st = "load" if loaded else "idle"
            for field, value in {**fixed, **_state(node, g.index, loaded)}.items():
                lines.append(f"    {g.index}:{st}:{field}) ngl_v={shlex.quote(value)} ;;")
    lines += ["    *) return 1 ;;", "  esac", "}"]
    return lines


def query_prelude(node: SimNode, gpus: Sequence[r.SimGpu]) -> str:
    """Answers `--query-gpu=... --format=csv...` (looping with -l/-lms) from the node's model."""
    state = shlex.quote(STATE)
    idx = " ".join(str(g.index) for g in gpus)
    units = " ".join(f'{k}) ngl_h="$ngl_h [{u}]" ;;' for k, u in UNITS.items())
    body = [
        *_cell_cases(node, gpus),
        "ngl_q= ngl_fmt= ngl_ms= ngl_next= ngl_bad=",
        'case "${1-}" in --query-gpu=*) ;; *) ngl_bad=skip ;; esac',
        'if [ -z "$ngl_bad" ]; then',
        "for ng_a do",
        '  if [ -n "$ngl_next" ]; then',
        '    case $ng_a in *[!0-9]*|"") ngl_bad=1 ;; esac',
        '    if [ "$ngl_next" = s ]; then ngl_ms=$((ng_a * 1000)); else ngl_ms=$ng_a; fi',
        "    ngl_next=; continue",
        "  fi",
        "  case $ng_a in",
        "    --query-gpu=*) ngl_q=${ng_a#*=} ;;",
        "    --format=*) ngl_fmt=${ng_a#*=} ;;",
        "    -lms|--loop-ms) ngl_next=ms ;;",
        "    -l|--loop) ngl_next=s ;;",
        "    *) ngl_bad=1 ;;",
        "  esac",
        "done",
        'case ",$ngl_fmt," in *,csv,*) ;; *) ngl_bad=1 ;; esac',
        'if [ -n "$ngl_bad$ngl_next" ]; then',
        f"  printf '%s' {shlex.quote(NVIDIA_SMI_USAGE.stdout)}; return 2",
        "fi",
        "ngl_hdr= ngl_oldifs=$IFS; IFS=,",
        "for ngl_f in $ngl_q; do",
        '  ngl_v=; ngl_cell 0 idle "$ngl_f" || [ "$ngl_f" = timestamp ] || {',
        "    IFS=$ngl_oldifs; printf 'Field \"%s\" is not a valid field to query.\\n\\n' "
        '"$ngl_f"; return 2; }',
        f'  ngl_h=$ngl_f; case ",$ngl_fmt," in *,nounits,*|*) case $ngl_f in {units} esac ;; esac',
        '  ngl_hdr="$ngl_hdr${ngl_hdr:+, }$ngl_h"',
        "done",
        "IFS=$ngl_oldifs",
        f'if [ -n "$ngl_ms" ]; then rm -f "${{NG_NODE:?}}/root"{state}; fi',
        'case ",$ngl_fmt," in *,noheader,*) ;; *) printf \'%s\\n\' "$ngl_hdr" ;; esac',
        "while :; do",
        f'  if [ -e "${{NG_NODE:?}}/root"{state} ]; then ngl_st=load; else ngl_st=idle; fi',
        "  ngl_ts=$(date '+%Y/%m/%d %H:%M:%S.%3N')",
        f"  for ngl_i in {idx}; do",
        "    ngl_row= IFS=,",
        "    for ngl_f in $ngl_q; do",
        '      if [ "$ngl_f" = timestamp ]; then ngl_v=$ngl_ts; '
        'else ngl_cell "$ngl_i" "$ngl_st" "$ngl_f"; fi',
        '      case ",$ngl_fmt," in *,nounits,*) ngl_v=${ngl_v% W}; ngl_v=${ngl_v% MHz}; '
        "ngl_v=${ngl_v% %} ;; esac",
        '      ngl_row="$ngl_row${ngl_row:+, }$ngl_v"',
        "    done",
        "    IFS=$ngl_oldifs",
        "    printf '%s\\n' \"$ngl_row\"",
        "  done",
        '  [ -n "$ngl_ms" ] || return 0',
        "  sleep \"$((ngl_ms / 1000)).$(printf '%03d' $((ngl_ms % 1000)))\"",
        "done",
        "fi",
    ]
    return "\n".join(body)

"""Simulated tools of the `gpu_load` stage: nvbandwidth, the DCGM stress levels of dcgmi diag,
nvidia-smi --query-gpu (with -l/-lms sampling), and the kernel log under load.

The load is a state of the node: nvbandwidth and `dcgmi diag -r 3|4` mark it loaded (a file
under the node's root) when they start; a looping nvidia-smi query (-l/-lms: a sampler, which
starts before any load) marks it idle when it starts. Samples taken once the node is loaded
show the load's telemetry, its faults included; `journalctl -k` shows an Xid under load once
the node is loaded.

Formats:
  nvbandwidth    plain text as v0.8 prints it (output.cpp, inline_common.h: banner, hostname,
                 `Device N: <name> (<pci>)`, per testcase `Running <t>.`, the description, the
                 matrix `%10.2f`, a blank line, `SUM <t> <sum>`); an unknown testcase:
                 `ERROR: Testcase <t> not found!` (nvbandwidth.cpp findTestcase). The
                 device<->device values are those of the corpus capture (~370 GB/s).
  nvidia-smi     --query-gpu=<fields> --format=csv[,noheader][,nounits] [-l S | -lms MS]: the
                 header with units as the corpus CSV captures print them, one row per GPU per
                 sample; an unknown field: `Field "<f>" is not a valid field to query.` rc 2
  dcgmi          diag -r 3|4 [-p <params>] -j (options in any order), taking 1/100 of the
                 -p targeted_stress.test_duration (default 30 s: 0.3 s): DCGM 4.x JSON (the GB10
                 capture's shape) with the Stress plugins; targeted_power's info messages as
                 TargetedPower_wrapper.cpp words them; exits 226 when a plugin fails
Faults take an optional GPU index (default 3); `xid_under_load` takes `CODE` or `CODE@GPU`.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools import gpu_render as r
from nodegate.sim.tools.base import NVIDIA_SMI_USAGE, Provider, SimTool, bad_arguments

DEFAULT_GPU = 3
STATE = "/var/lib/nodegate-sim/gpu-load"  # exists: the node is under load
NVB_VERSION = "v0.8"
NOT_FOUND = "printf 'ERROR: Testcase %s not found!\\n' \"$ng_a\""  # findTestcase's throw

FAULTS = {
    "h2d_slow": "GPU ARG (default 3) copies host->device at 13.5 GB/s (nvbandwidth)",
    "hbm_slow": "GPU ARG (default 3) copies its own memory at 610 GB/s (device_local_copy)",
    "thermal_throttle_under_load": "GPU ARG (default 3) reaches 92 C with HW thermal slowdown "
    "active under load (nvidia-smi samples)",
    "power_brake": "GPU ARG (default 3) has HW power brake slowdown active under load",
    "xid_under_load": "the kernel logs Xid ARG (`13`, or `13@GPU`; default 13 on GPU 3) once "
    "the node is under load",
    "dcgm_targeted_power_fail": "DCGM targeted_power fails GPU ARG (default 3): max power 498.2 W",
}

TESTCASES: Mapping[str, str] = {
    "host_to_device_memcpy_ce": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_host_memcpy_ce": "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
    "device_to_device_memcpy_read_ce": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_local_copy": "memcpy local GPU(column) bandwidth (GB/s)",
}
# The corpus capture's device_to_device matrix (rows 0..7), used as the healthy board's.
D2D_CAPTURE = (
    (None, 370.90, 370.90, 370.90, 370.38, 370.64, 370.26, 371.67),
    (370.90, None, 370.90, 370.90, 371.67, 370.90, 370.38, 371.67),
    (372.05, 370.90, None, 370.90, 372.96, 370.38, 371.67, 371.67),
    (370.90, 372.05, 372.05, None, 371.79, 371.02, 370.77, 370.90),
    (370.38, 371.54, 370.38, 371.02, None, 372.05, 370.90, 370.90),
    (371.02, 370.51, 371.92, 372.18, 370.90, None, 372.05, 370.90),
    (371.41, 371.79, 371.67, 370.38, 370.90, 372.05, None, 370.90),
    (370.51, 371.67, 371.67, 370.38, 370.90, 370.90, 370.90, None),
)
H2D_GBPS, D2H_GBPS, LOCAL_GBPS = 55.20, 55.90, 1480.0
H2D_SLOW_GBPS, LOCAL_SLOW_GBPS = 13.50, 610.0
POWER_FAIL_W = 498.2
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


def printf(text: str) -> str:
    """Shell that prints `text` exactly, on one line of script (a tool's function body is
    re-indented line by line: a quoted multi-line string would change)."""
    lines = text.split("\n")
    last = lines.pop()
    out = []
    if lines:
        out.append("printf '%s\\n' " + " ".join(shlex.quote(ln) for ln in lines))
    if last:
        out.append(f"printf '%s' {shlex.quote(last)}")
    return "; ".join(out) or ":"


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


def _matrix(key: str, rows: Sequence[Sequence[float | None]]) -> str:
    """One testcase block as nvbandwidth prints it."""
    ncol = len(rows[0])
    out = [f"Running {key}.", TESTCASES[key], "  " + "".join(f"{c:>10}" for c in range(ncol))]
    total = 0.0
    for i, row in enumerate(rows):
        cells = "".join(f"{'N/A':>10}" if v is None else f"{v:>10.2f}" for v in row)
        out.append(f"{i:>2}{cells}")
        total += sum(v for v in row if v is not None)
    out += ["", f"SUM {key} {total:.2f}", ""]
    return "\n".join(out) + "\n"


def nvbandwidth_blocks(node: SimNode, n: int) -> dict[str, str]:
    slow, hbm = faulty(node, "h2d_slow"), faulty(node, "hbm_slow")
    h2d = [H2D_SLOW_GBPS if i == slow else round(H2D_GBPS - 0.03 * i, 2) for i in range(n)]
    d2h = [round(D2H_GBPS - 0.02 * i, 2) for i in range(n)]
    local = [LOCAL_SLOW_GBPS if i == hbm else round(LOCAL_GBPS + 0.5 * i, 2) for i in range(n)]
    d2d = [list(row[:n]) for row in D2D_CAPTURE[:n]]
    return {
        "host_to_device_memcpy_ce": _matrix("host_to_device_memcpy_ce", [h2d]),
        "device_to_host_memcpy_ce": _matrix("device_to_host_memcpy_ce", [d2h]),
        "device_to_device_memcpy_read_ce": _matrix("device_to_device_memcpy_read_ce", d2d),
        "device_local_copy": _matrix("device_local_copy", [local]),
    }


def nvbandwidth_banner(node: SimNode, gpus: Sequence[r.SimGpu], product: str, driver: str) -> str:
    lines = [
        f"nvbandwidth Version: {NVB_VERSION}",
        f"Built from Git version: {NVB_VERSION}",
        "",
        "NOTE: The reported results may not reflect the full capabilities of the platform.",
        "Performance can vary with software drivers, hardware clocks, and system topology.",
        "",
        "CUDA Runtime Version: 12080",
        "CUDA Driver Version: 12080",
        f"Driver Version: {driver}",
        "",
        node.name,
    ]
    for g in gpus:
        lines.append(f"Device {g.index}: {product} ({g.bus_id[:-2].lower()})")
    return "\n".join(lines) + "\n\n"


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


def dcgm_stress_json(
    node: SimNode, gpus: Sequence[r.SimGpu], level: int, driver: str, device_id: str
) -> tuple[str, bool]:
    """`dcgmi diag -r 3|4 -j` (DCGM 4.x): Deployment .. Stress; whether a plugin failed."""
    failing = faulty(node, "dcgm_targeted_power_fail")
    tests: list[tuple[str, str]] = [
        ("Deployment", "software"),
        ("Integration", "pcie"),
        ("Hardware", "memory"),
        ("Hardware", "diagnostic"),
    ]
    if level >= 4:
        tests += [("Hardware", "pulse_test"), ("Hardware", "memtest")]
    tests += [
        ("Stress", "targeted_stress"),
        ("Stress", "targeted_power"),
        ("Stress", "memory_bandwidth"),
    ]
    categories: dict[str, list[object]] = {}
    failed = False
    for cat, name in tests:
        results: list[dict[str, object]] = []
        for g in gpus:
            res: dict[str, object] = {
                "entity_group": "GPU",
                "entity_group_id": 1,
                "entity_id": g.index,
                "status": "Pass",
            }
            if name == "targeted_power":
                mx = POWER_FAIL_W if g.index == failing else 699.1
                res["info"] = [
                    f"GPU {g.index} max power: {mx:.1f} W average power usage: {mx - 4.2:.1f} W"
                ]
                if g.index == failing:
                    res["status"], failed = "Fail", True
                    res["warnings"] = [
                        {
                            "error_category": 4,
                            "error_id": 21,
                            "error_severity": 2,
                            "warning": f"GPU {g.index} Max power of {mx:.1f} did not reach desired "
                            f"power minimum target_power_min_ratio of 525.0 for GPU {g.index} "
                            "Verify that the clock speeds and GPU utilization are high.",
                        }
                    ]
            if name == "targeted_stress":
                # DCGM words it with a tab before the number (TargetedStress_wrapper.cpp),
                # which JsonCpp escapes; the sim's JSON writer does not, so a space here.
                res["info"] = [f"GPU {g.index} relative stress level {5212 + g.index}"]
            results.append(res)
        status = "Fail" if any(x["status"] == "Fail" for x in results) else "Pass"
        categories.setdefault(cat, []).append(
            {"name": name, "results": results, "test_summary": {"status": status}}
        )
    doc = {
        "DCGM Diagnostic": {
            "test_categories": [{"category": c, "tests": t} for c, t in categories.items()]
        },
        "entity_groups": [
            {
                "entities": [
                    {"device_id": device_id, "entity_id": g.index, "serial_num": g.serial}
                    for g in gpus
                ],
                "entity_group": "GPU",
                "entity_group_id": 1,
            }
        ],
        "metadata": {"Driver Version Detected": driver, "version": "4.2.3"},
    }
    return r.styled_json(doc), failed


def tools(node: SimNode) -> Iterable[SimTool]:
    model = str(node.hw.get("gpu_model", "h100-sxm5-80gb"))
    if model not in r.MODELS:
        return
    gm = r.MODELS[model]
    driver = str(node.hw.get("nvidia_driver", r.TEMPLATE_DRIVER))
    from nodegate.sim.tools.pcie_gpu import node_gpus

    gpus = [g for g in node_gpus(node) if not g.missing]
    nvsmi = r.nvsmi_q(gpus, driver, gm)
    product = next(
        ln.split(" : ", 1)[1].strip()
        for ln in nvsmi.splitlines()
        if ln.strip().startswith("Product Name")
    )
    state = shlex.quote(STATE)
    where = shlex.quote(STATE.rsplit("/", 1)[0])
    mark = f'mkdir -p "${{NG_NODE:?}}/root"{where}; : > "${{NG_NODE:?}}/root"{state}'
    blocks = nvbandwidth_blocks(node, len(gpus))
    cases = " ".join(f"{k}) {printf(v)} ;;" for k, v in blocks.items())
    nvb = "\n".join(
        [
            "ngl_t= ngl_x=",
            "for ng_a do",
            "  case $ng_a in",
            "    -t|--testcase) ngl_t=1 ;;",
            "    -*) ngl_x=1 ;;",
            "  esac",
            "done",
            'if [ -n "$ngl_t" ] && [ -z "$ngl_x" ]; then',
            f"  {mark}",
            f"  {printf(nvbandwidth_banner(node, gpus, product, driver))}",
            "  for ng_a do",
            "    case $ng_a in -t|--testcase) continue ;; esac",
            f"    case $ng_a in {cases} *) {NOT_FOUND} ;; esac",
            "  done",
            "  return 0",
            "fi",
        ]
    )
    yield SimTool("nvbandwidth", {}, prelude=nvb, usage=bad_arguments("nvbandwidth", 1))
    yield SimTool("nvidia-smi", {}, prelude=query_prelude(node, gpus), usage=NVIDIA_SMI_USAGE)
    docs = {lvl: dcgm_stress_json(node, gpus, lvl, driver, gm.device_id) for lvl in (3, 4)}
    dcgm = [
        "ngl_r= ngl_j= ngl_x= ngl_next= ngl_i=0 ngl_p=",
        '[ "${1-}" = diag ] || ngl_x=1',
        "for ng_a do",
        "  ngl_i=$((ngl_i + 1)); [ $ngl_i -gt 1 ] || continue",
        '  if [ -n "$ngl_next" ]; then',
        '    if [ "$ngl_next" = r ]; then ngl_r=$ng_a; else ngl_p=$ng_a; fi; ngl_next=; continue',
        "  fi",
        "  case $ng_a in -r|--run) ngl_next=r ;; -p|--parameters) ngl_next=p ;; "
        "-j|--json) ngl_j=1 ;; *) ngl_x=1 ;; esac",
        "done",
        'if [ -z "$ngl_x$ngl_next" ] && [ -n "$ngl_j" ]; then',
        # The burn: targeted_stress's test_duration (-p), run at 1/100 of its length.
        "  ngl_d=${ngl_p#*targeted_stress.test_duration=}; ngl_d=${ngl_d%%;*}",
        '  case $ngl_d in ""|*[!0-9]*) ngl_d=30 ;; esac',
        "  ngl_s=$((ngl_d / 100)).$(printf '%02d' $((ngl_d % 100)))",
        "  case $ngl_r in",
    ]
    for lvl, (doc, failed) in docs.items():
        dcgm.append(
            f'    {lvl}) {mark}; sleep "$ngl_s"; {printf(doc)}; return {226 if failed else 0} ;;'
        )
    dcgm += ["  esac", "fi"]
    yield SimTool("dcgmi", {}, prelude="\n".join(dcgm), usage=bad_arguments("dcgmi", 1))
    xid = node.fault("xid_under_load")
    if xid is not None:
        code = int((xid.arg or "13").partition("@")[0] or 13)
        at = faulty(node, "xid_under_load") or 0
        for g in gpus:
            if g.index == at % len(gpus):
                g.xids.append(code)
        log = r.journal_kernel(node.name, gpus, driver)
        pre = (
            f'if [ "$*" = "-k -o short-iso" ] && [ -e "${{NG_NODE:?}}/root"{state} ]; then '
            f"{printf(log)}; return 0; fi"
        )
        yield SimTool("journalctl", {}, prelude=pre)


PROVIDER = Provider(name="gpu_load", tools=tools, faults=FAULTS)

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
from nodegate.sim.tools.gpu_load_query import STATE, faulty, query_prelude

NVB_VERSION = "v0.8"
NOT_FOUND = "printf 'ERROR: Testcase %s not found!\\n' \"$ng_a\""  # findTestcase's throw

FAULTS = {
    "h2d_slow": "GPU ARG (default 3) copies host->device at 13.5 GB/s (nvbandwidth)",
    "hbm_slow": "GPU ARG (default 3) copies its own memory at 610 GB/s (device_local_copy)",
    "thermal_throttle_under_load": "GPU ARG (default 3) reaches 92 C with HW thermal slowdown "
    "active under load (nvidia-smi samples)",
    "power_brake": "GPU ARG (default 3) has HW power brake slowdown active under load",
    "sm_clock_drop": "GPU ARG (default 3) runs its SM at 1395 of 1980 MHz under load with no "
    "clock event reason active (nvidia-smi samples)",
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
    xid = node.fault("xid_under_load")
    if xid is not None:  # the kernel logs it when the load starts, once, dated then
        code = int((xid.arg or "13").partition("@")[0] or 13)
        gpu = next(g for g in gpus if g.index == (faulty(node, "xid_under_load") or 0) % len(gpus))
        text = r.XID_TEXT.get(code, "pid='<unknown>', name=<unknown>, ")
        line = f"{node.name} kernel: NVRM: Xid (PCI:{gpu.bdf[:-2]}): {code}, {text}"
        journal = f'"${{NG_NODE:?}}/root"{shlex.quote(r.RUNTIME_JOURNAL)}'
        mark += (
            f"; [ -e {journal} ] || {{ mkdir -p \"${{NG_NODE:?}}/root\"/var/log; "
            f"ngl_e=$(date +%s); printf '%s %s %s\\n' \"$ngl_e\" "
            f"\"$(date -u -d \"@$ngl_e\" +%Y-%m-%dT%H:%M:%S+0000)\" {shlex.quote(line)} "
            f"> {journal}; }}"
        )
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

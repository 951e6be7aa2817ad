"""Simulated tools of the `pcie_gpu` stage: nvidia-smi, lspci, journalctl, systemctl, dcgmi.

Hardware keys (fleet model `hardware:` / `overrides:`):
  gpu_model      `h100-sxm5-80gb` (default: HGX H100 8-GPU, 4 NVSwitch), `h200-sxm-141gb`
                 (the same board with the H200 capture's GPU block), anything else: no GPU
  nvidia_driver  shared with the reach stage; printed by nvidia-smi and dcgmi
Faults take an optional GPU index (default 3), e.g. `{gpu_pcie_x8: 5}`; `xid` takes the code,
optionally `CODE@GPU` (`{xid: "79@2"}`); `sxid` the NVSwitch code, optionally `CODE:fatal`.

What each tool answers (sim/tools/__init__.py: anything else fails, rc non-zero, with the
tool's bad-arguments answer and a `nodegate-sim:` line naming what it answers):
  nvidia-smi   -q | --query, nvlink -s | nvlink --status (invalid arguments: its own message,
               rc 2); a node without GPUs: "No devices were found", rc 6, whatever it is asked
  lspci        -vvv, as one cluster or several (-v -vv); other options are not simulated
  journalctl   -k | --dmesg with -o/--output short-iso, in any order, --no-pager, -q, -b;
               a --since/-S, --until/-U window is honoured against the clock (relative
               `-24h`, `-90min`, `-2d`, `+1h`, `now`, `@EPOCH`, or what `date -d` reads; else
               "Failed to parse timestamp", rc 1); the log holds the driver banner and what
               the faults put there, written minutes before the fleet was built (`xid: 79~48h`:
               48 hours before); without -k or in another output format: not simulated
  systemctl    status | is-active of nvidia-fabricmanager[.service], --no-pager anywhere;
               status of another unit: "Unit X.service could not be found." rc 4, is-active:
               "inactive" rc 3
  dcgmi        diag with -r/--run LEVEL and -j/--json in any order, the levels rendered (1-3)
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterable, Sequence

from nodegate.core.errors import ConfigError
from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools import gpu_render as r
from nodegate.sim.tools.base import NVIDIA_SMI_USAGE, Provider, Response, SimTool, bad_arguments

DEFAULT_GPU = 3

FAULTS = {
    "gpu_missing": "GPU ARG (default 3) is gone: absent from nvidia-smi, lspci, nvlink and dcgmi",
    "gpu_pcie_x8": "GPU ARG (default 3) trained at x8 (nvidia-smi and lspci LnkSta)",
    "gpu_pcie_gen4": "GPU ARG (default 3) trained at Gen4 16GT/s on a Gen5 board",
    "xid": "kernel log holds Xid ARG (`79`, or `79@GPU`; default GPU 3) minutes before the fleet "
    "was built; `79@2~48h`: that many hours before (outside a 24 h window)",
    "ecc_dbe": "GPU ARG (default 3) has 1 volatile uncorrectable (DRAM) ECC error",
    "remap_pending": "GPU ARG (default 3) has a row remap pending (uncorrectable 1, Pending Yes)",
    "nvlink_down": "GPU ARG (default 3) has NVLink 5 inactive",
    "fabricmanager_stopped": "nvidia-fabricmanager is inactive (dead)",
    "hw_slowdown": "GPU ARG (default 3) reports HW Slowdown and HW Thermal Slowdown active",
    "dcgm_fail": "dcgmi diag reports GPU ARG (default 3) Fail in the level's last test",
    "dcgm_test_fail": "dcgmi diag fails the level's last test itself (an internal error) while "
    "every GPU row says Pass; exits 226",
    "sxid": "kernel log holds NVSwitch SXid ARG (`12028`, `20034:fatal`; default non-fatal) on "
    "NVSwitch 0000:83:00.0 within the window; the running fabric manager reports it too",
    "fallen_off_bus": "kernel log says GPU ARG (default 3) fell off the bus, with no Xid",
}
# Faults of the whole node, not of one GPU.
NODE_FAULTS = ("fabricmanager_stopped", "dcgm_test_fail", "sxid")


def _gpu_arg(arg: str | None) -> int:
    return int(arg) if arg and arg.isdigit() else DEFAULT_GPU


def node_gpus(node: SimNode) -> list[r.SimGpu]:
    """The node's GPUs with its faults applied."""
    gpus = r.base_gpus(node.index)
    for f in node.faults:
        if f.kind == "xid":
            code, gpu, hours = xid_arg(f.arg)
            g = gpus[gpu % len(gpus)]
            if hours:
                g.old_xids[len(g.xids)] = hours
            g.xids.append(code)
            continue
        if f.kind not in FAULTS or f.kind in NODE_FAULTS:
            continue
        g = gpus[_gpu_arg(f.arg) % len(gpus)]
        if f.kind == "gpu_missing":
            g.missing = True
        elif f.kind == "gpu_pcie_x8":
            g.width_lanes = 8
        elif f.kind == "gpu_pcie_gen4":
            g.gen = 4
        elif f.kind == "ecc_dbe":
            g.ecc_dbe = 1
        elif f.kind == "remap_pending":
            g.remap_pending = True
        elif f.kind == "nvlink_down":
            g.nvlink_down = (5,)
        elif f.kind == "hw_slowdown":
            g.hw_slowdown = True
        elif f.kind == "dcgm_fail":
            g.dcgm_fail = True
        elif f.kind == "fallen_off_bus":
            g.fallen_off_bus = True
    return gpus


def xid_arg(arg: str | None) -> tuple[int, int, int]:
    """`79`, `79@2`, `79@2~48h` -> (code, GPU, hours before the build)."""
    text = arg or "79"
    head, _, age = text.partition("~")
    code, _, at = head.partition("@")
    hours = age.removesuffix("h")
    if not (code.isdigit() and (not at or at.isdigit()) and (not age or hours.isdigit())):
        raise ConfigError(f"fault xid: got {text!r}, expected CODE[@GPU][~HOURSh] (79@2~48h)")
    return int(code), _gpu_arg(at or None), int(hours or 0)


def node_sxids(node: SimNode) -> list[tuple[int, bool]]:
    """(code, fatal) of every `sxid` fault of the node."""
    out = []
    for f in node.faults:
        if f.kind == "sxid":
            code, _, sev = (f.arg or "12028").partition(":")
            out.append((int(code), sev == "fatal"))
    return out


NVSMI_PRELUDE = """case "$*" in
  --query) set -- -q ;;
  "nvlink --status") set -- nvlink -s ;;
esac"""
# lspci takes -v repeated: -vvv, -v -vv, -v -v -v (three or more: its most verbose).
LSPCI_PRELUDE = """ng_v=0
for ng_a do
  case $ng_a in -v|-vv|-vvv|-vvvv) ng_v=$((ng_v + ${#ng_a} - 1)) ;; *) ng_v=-99 ;; esac
done
[ $ng_v -lt 3 ] || set -- -vvv"""
JOURNALCTL_PRELUDE = """ng_k= ng_o=short ng_x= ng_next= ng_since= ng_until=
for ng_a do
  if [ -n "$ng_next" ]; then
    case $ng_next in o) ng_o=$ng_a ;; S) ng_since=$ng_a ;; *) ng_until=$ng_a ;; esac
    ng_next=; continue
  fi
  case $ng_a in
    -k|--dmesg) ng_k=-k ;;
    -S|--since) ng_next=S ;;
    -U|--until) ng_next=U ;;
    -S?*) ng_since=${ng_a#-S} ;;
    --since=*) ng_since=${ng_a#*=} ;;
    -U?*) ng_until=${ng_a#-U} ;;
    --until=*) ng_until=${ng_a#*=} ;;
    -o|--output) ng_next=o ;;
    -o?*) ng_o=${ng_a#-o} ;;
    --output=*) ng_o=${ng_a#*=} ;;
    --no-pager|-q|--quiet|-b|--boot|-b0|--boot=0) ;;
    *) ng_x=1 ;;
  esac
done
[ -n "$ng_x$ng_next" ] || set -- $ng_k -o "$ng_o"
"""
# journalctl's window (systemd.time(7)): a relative time (`-24h`, `+90min`, `-2d`; a bare
# number is seconds), `now`, `@EPOCH`, or a date `date -d` reads; sets ng_jt (epoch seconds).
JOURNAL_TIME = """ngsim_jt() {
  case $1 in
    now) ng_jt=$2; return 0 ;;
    @*) ng_jt=${1#@}; case $ng_jt in ''|*[!0-9]*) return 1 ;; esac; return 0 ;;
    [-+][0-9]*)
      ng_n=${1#?}; ng_u=${ng_n##*[0-9]}; ng_n=${ng_n%"$ng_u"}
      case $ng_n in *[!0-9]*) return 1 ;; esac
      case $ng_u in
        ''|s|sec|second|seconds) ng_m=1 ;; m|min|minute|minutes) ng_m=60 ;;
        h|hr|hour|hours) ng_m=3600 ;; d|day|days) ng_m=86400 ;; w|week|weeks) ng_m=604800 ;;
        *) return 1 ;;
      esac
      case $1 in -*) ng_jt=$(($2 - ng_n * ng_m)) ;; *) ng_jt=$(($2 + ng_n * ng_m)) ;; esac
      return 0 ;;
  esac
  ng_jt=$(date -d "$1" +%s 2>/dev/null) && [ -n "$ng_jt" ]
}"""


def journalctl_prelude(records: Sequence[tuple[int, str]]) -> str:
    """The journalctl prelude: its options read, and with a --since/--until window the
    records inside it printed (the window against the clock at the time of asking)."""
    lines = [
        JOURNALCTL_PRELUDE.rstrip("\n"),
        'if [ "$*" = "-k -o short-iso" ] && [ -n "$ng_since$ng_until" ]; then',
        JOURNAL_TIME,
        "  ng_now=${EPOCHSECONDS:-$(date +%s)} ng_lo=0 ng_hi=9999999999",
        '  for ng_w in "S$ng_since" "U$ng_until"; do',
        '    [ "$ng_w" != S ] && [ "$ng_w" != U ] || continue',
        '    if ! ngsim_jt "${ng_w#?}" "$ng_now"; then',
        "      printf 'Failed to parse timestamp: %s\\n' \"${ng_w#?}\" >&2; return 1",
        "    fi",
        "    case $ng_w in S*) ng_lo=$ng_jt ;; *) ng_hi=$ng_jt ;; esac",
        "  done",
        '  ngsim_jr() { [ "$1" -lt "$ng_lo" ] || [ "$1" -gt "$ng_hi" ] || printf \'%s\\n\' "$2"; }',
        *(f"  ngsim_jr {at} {shlex.quote(text)}" for at, text in records),
        # records a tool logged while the fleet runs (an Xid under load): `EPOCH line`
        f'  ng_rj="${{NG_NODE-}}/root"{shlex.quote(r.RUNTIME_JOURNAL)}',
        '  if [ -n "${NG_NODE-}" ] && [ -f "$ng_rj" ]; then',
        '    while read -r ng_t ng_l; do ngsim_jr "$ng_t" "$ng_l"; done \\',
        '      < "$ng_rj"',
        "  fi",
        "  return 0",
        "fi",
    ]
    return "\n".join(lines)


SYSTEMCTL_PRELUDE = """ng_verb= ng_units= ng_x=
for ng_a do
  case $ng_a in
    --no-pager) ;;
    -*) ng_x=1 ;;
    *) if [ -z "$ng_verb" ]; then ng_verb=$ng_a; else ng_units="$ng_units ${ng_a%.service}"; fi ;;
  esac
done
if [ -z "$ng_x" ]; then
  case $ng_verb$ng_units in
    "status nvidia-fabricmanager"|"is-active nvidia-fabricmanager") set -- $ng_verb$ng_units ;;
    "status "*" "*|"is-active "*" "*) ;;
    "status "*) printf 'Unit %s.service could not be found.\\n' "${ng_units# }" >&2; return 4 ;;
    "is-active "*) printf 'inactive\\n'; return 3 ;;
  esac
fi"""
DCGMI_PRELUDE = """ng_r= ng_j= ng_x= ng_next= ng_i=0
[ "${1-}" = diag ] || ng_x=1
for ng_a do
  ng_i=$((ng_i + 1))
  [ $ng_i -gt 1 ] || continue
  if [ -n "$ng_next" ]; then ng_r=$ng_a; ng_next=; continue; fi
  case $ng_a in -r|--run) ng_next=1 ;; -j|--json) ng_j=1 ;; *) ng_x=1 ;; esac
done
[ -n "$ng_x$ng_next" ] || [ -z "$ng_j" ] || [ -z "$ng_r" ] || set -- diag -r "$ng_r" -j"""


def tools(node: SimNode) -> Iterable[SimTool]:
    model = str(node.hw.get("gpu_model", "h100-sxm5-80gb"))
    driver = str(node.hw.get("nvidia_driver", r.TEMPLATE_DRIVER))
    if model not in r.MODELS:
        # What nvidia-smi says on a node without a usable GPU (exit 6: no devices).
        none = Response("No devices were found\n", rc=6)
        yield SimTool("nvidia-smi", {}, fallback=none)
        return
    gm = r.MODELS[model]
    gpus = node_gpus(node)
    nvsmi = r.nvsmi_q(gpus, driver, gm)
    sxids = node_sxids(node)
    product = next(
        ln.split(" : ", 1)[1].strip()
        for ln in nvsmi.splitlines()
        if ln.strip().startswith("Product Name")
    )
    yield SimTool(
        "nvidia-smi",
        {
            "-q": Response(nvsmi),
            "nvlink -s": Response(r.nvlink_s(gpus, product)),
        },
        prelude=NVSMI_PRELUDE,
        usage=NVIDIA_SMI_USAGE,
    )
    yield SimTool(
        "lspci",
        {"-vvv": Response(r.lspci_vvv(gpus, gm.device_id))},
        prelude=LSPCI_PRELUDE,
        usage=Response(stderr="Usage: lspci [<switches>]\n", rc=1),
    )
    records = r.journal_records(node.name, gpus, driver, sxids, int(time.time()))
    yield SimTool(
        "journalctl",
        {"-k -o short-iso": Response("".join(line + "\n" for _, line in records))},
        prelude=journalctl_prelude(records),
        usage=bad_arguments("journalctl", 1),
    )
    running = node.fault("fabricmanager_stopped") is None
    yield SimTool(
        "systemctl",
        {
            "status nvidia-fabricmanager": Response(
                r.fm_status(running, sxids), rc=0 if running else 3
            ),
            "is-active nvidia-fabricmanager": Response(
                "active\n" if running else "inactive\n", rc=0 if running else 3
            ),
        },
        prelude=SYSTEMCTL_PRELUDE,
        usage=bad_arguments("systemctl", 1),
    )
    test_fail = node.fault("dcgm_test_fail") is not None
    failed = test_fail or any(g.dcgm_fail and not g.missing for g in gpus)
    yield SimTool(
        "dcgmi",
        {
            # dcgmi exits 226 when a test fails (corpus: the GB10 capture's run).
            f"diag -r {lvl} -j": Response(
                r.dcgm_diag_json(gpus, lvl, driver, gm.device_id, test_fail=test_fail),
                rc=226 if failed else 0,
            )
            for lvl in r.DCGM_TESTS
        },
        prelude=DCGMI_PRELUDE,
        usage=bad_arguments("dcgmi", 1),
    )


PROVIDER = Provider(name="pcie_gpu", tools=tools, faults=FAULTS)

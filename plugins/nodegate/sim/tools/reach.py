"""Simulated tools and files of the `reach` stage: uname, /etc/os-release, driver, OFED.

`uname` parses its options as coreutils' does (letters in any order and clusters, the long
forms, -a; fields printed in uname's own order; a bad option or an operand fails with its
message, rc 1). `ofed_info` answers `-s` and `-n`; other arguments fail (rc 1).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools.base import Provider, Response, SimTool, bad_arguments, getopt_error

UNAME_VERSION = "#115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024"  # the 5.15.0-105 build
_UNAME_LONG = {
    "all": "a",
    "kernel-name": "s",
    "nodename": "n",
    "kernel-release": "r",
    "kernel-version": "v",
    "machine": "m",
    "processor": "p",
    "hardware-platform": "i",
    "operating-system": "o",
}
_TRY_UNAME = "Try 'uname --help' for more information."


def _hw(node: SimNode, key: str, default: Any = None) -> Any:
    return node.hw.get(key, default)


def os_release(os_: Mapping[str, Any]) -> str:
    """/etc/os-release as Ubuntu/RHEL write it (KEY=value, values quoted where they are)."""
    order = [
        "PRETTY_NAME",
        "NAME",
        "VERSION_ID",
        "VERSION",
        "VERSION_CODENAME",
        "ID",
        "ID_LIKE",
        "HOME_URL",
        "SUPPORT_URL",
        "BUG_REPORT_URL",
        "UBUNTU_CODENAME",
    ]
    keys = [k for k in order if k in os_] + sorted(k for k in os_ if k not in order)
    lines = []
    for k in keys:
        v = str(os_[k])
        quoted = k in {
            "PRETTY_NAME",
            "NAME",
            "VERSION_ID",
            "VERSION",
            "HOME_URL",
            "SUPPORT_URL",
            "BUG_REPORT_URL",
            "ID_LIKE",
        }
        lines.append(f'{k}="{v}"' if quoted else f"{k}={v}")
    return "\n".join(lines) + "\n"


def nvidia_version(driver: str, open_module: bool, gcc: str) -> str:
    """/proc/driver/nvidia/version, proprietary or open kernel module wording."""
    if open_module:
        head = (
            f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build"
            "  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 23:47:02 UTC 2025"
        )
    else:
        stamp = "Tue Mar  5 22:13:07 UTC 2024"
        head = f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  {stamp}"
    return f"{head}\nGCC version:  gcc version {gcc}\n"


def uname_prelude(fields: Mapping[str, str]) -> str:
    """`uname [OPTION]...` in sh: `fields` by letter (s n r v m p i o), printed in that order;
    long options by unique prefix, as getopt_long takes them."""
    longs = " ".join(f"{k}:{v}" for k, v in _UNAME_LONG.items())
    values = "\n".join(
        f"case $ng_f in *{k}*) ng_out=${{ng_out:+$ng_out }}{shlex.quote(v)} ;; esac"
        for k, v in fields.items()
    )
    return f"""ng_f=
for ng_a do
  case $ng_a in
    --) ;;
    --?*)
      ng_hit= ng_n=0
      for ng_w in {longs}; do
        case ${{ng_w%:*}} in
          "${{ng_a#--}}") ng_hit=$ng_w; ng_n=1; break ;;
          "${{ng_a#--}}"*) ng_hit=$ng_w; ng_n=$((ng_n + 1)) ;;
        esac
      done
      if [ $ng_n != 1 ]; then
        {getopt_error("uname", '"$ng_a"', _TRY_UNAME)}
        return 1
      fi
      ng_f=$ng_f${{ng_hit#*:}} ;;
    -?*)
      ng_o=${{ng_a#-}}
      while [ -n "$ng_o" ]; do
        ng_c=${{ng_o%"${{ng_o#?}}"}}; ng_o=${{ng_o#?}}
        case $ng_c in
          [asnrvmpio]) ng_f=$ng_f$ng_c ;;
          *) {getopt_error("uname", '"$ng_c"', _TRY_UNAME)}; return 1 ;;
        esac
      done ;;
    *)
      printf "uname: extra operand '%s'\\n%s\\n" "$ng_a" {shlex.quote(_TRY_UNAME)} >&2
      return 1 ;;
  esac
done
case $ng_f in '') ng_f=s ;; *a*) ng_f=snrvmpio ;; esac
ng_out=
{values}
printf '%s\\n' "$ng_out"
return 0"""


def tools(node: SimNode) -> Iterable[SimTool]:
    kernel = str(_hw(node, "kernel", "5.15.0-105-generic"))
    fields = {
        "s": "Linux",
        "n": node.name,
        "r": kernel,
        "v": str(_hw(node, "kernel_version", UNAME_VERSION)),
        "m": "x86_64",
        "p": "x86_64",  # Ubuntu's coreutils knows them (upstream prints "unknown")
        "i": "x86_64",
        "o": "GNU/Linux",
    }
    yield SimTool("uname", {}, prelude=uname_prelude(fields))
    ofed = _hw(node, "ofed")
    if ofed:
        yield SimTool(
            "ofed_info",
            {"-s": Response(f"MLNX_OFED_LINUX-{ofed}:\n"), "-n": Response(f"{ofed}\n")},
            usage=bad_arguments("ofed_info", 1),
        )


def files(node: SimNode) -> dict[str, str]:
    out = {"/etc/os-release": os_release(_hw(node, "os", {}))}
    driver = _hw(node, "nvidia_driver")
    if driver:
        out["/proc/driver/nvidia/version"] = nvidia_version(
            str(driver),
            bool(_hw(node, "nvidia_open_module", False)),
            str(_hw(node, "gcc", "12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)")),
        )
    return out


PROVIDER = Provider(name="reach", tools=tools, files=files)

"""Simulated tools and files of the `reach` stage: uname, /etc/os-release, driver, OFED."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodegate.sim.model import SimNode
from nodegate.sim.tools import Provider, Response, SimTool


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


def tools(node: SimNode) -> Iterable[SimTool]:
    kernel = str(_hw(node, "kernel", "5.15.0-105-generic"))
    yield SimTool(
        "uname",
        {
            "-r": Response(kernel + "\n"),
            "-s": Response("Linux\n"),
            "-m": Response("x86_64\n"),
            "-n": Response(node.name + "\n"),
        },
    )
    ofed = _hw(node, "ofed")
    if ofed:
        yield SimTool("ofed_info", {"-s": Response(f"MLNX_OFED_LINUX-{ofed}:\n")})


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

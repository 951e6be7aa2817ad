"""What the `reach` stage runs on a node: command ids (the keys of `raw/<node>/reach.json` and
of evidence links, `...#kernel`) and the commands, the same for every node (the simulated fleet
answers these exact lines)."""

from __future__ import annotations

from nodegate.core.values import CommandSpec

OS_RELEASE = "os_release"
KERNEL = "kernel"
NVIDIA_DRIVER = "nvidia_driver"
OFED = "ofed"

CMD_TIMEOUT_S = 10.0

COMMANDS = (
    CommandSpec(OS_RELEASE, ("cat", "/etc/os-release"), CMD_TIMEOUT_S),
    CommandSpec(KERNEL, ("uname", "-r"), CMD_TIMEOUT_S),
    CommandSpec(NVIDIA_DRIVER, ("cat", "/proc/driver/nvidia/version"), CMD_TIMEOUT_S),
    CommandSpec(OFED, ("ofed_info", "-s"), CMD_TIMEOUT_S),
)

"""What the `reach` stage runs on a node: command ids (the keys of `raw/<node>/reach.json` and
of evidence links, `...#kernel`) and the commands, the same for every node (the simulated fleet
answers these exact lines)."""

from __future__ import annotations

from nodegate.core.values import CommandSpec

OS_RELEASE = "os_release"
KERNEL = "kernel"
NVIDIA_DRIVER = "nvidia_driver"
OFED = "ofed"

CMD_TIMEOUT_S = 10.0  # each command's deadline unless the profile's reach.command_timeout_s says


def commands(timeout_s: float = CMD_TIMEOUT_S) -> tuple[CommandSpec, ...]:
    """The stage's commands, each under `timeout timeout_s`.

    >>> [c.timeout_s for c in commands(3)]
    [3, 3, 3, 3]
    """
    return (
        CommandSpec(OS_RELEASE, ("cat", "/etc/os-release"), timeout_s),
        CommandSpec(KERNEL, ("uname", "-r"), timeout_s),
        CommandSpec(NVIDIA_DRIVER, ("cat", "/proc/driver/nvidia/version"), timeout_s),
        CommandSpec(OFED, ("ofed_info", "-s"), timeout_s),
    )


COMMANDS = commands()

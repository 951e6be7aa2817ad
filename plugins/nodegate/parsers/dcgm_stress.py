"""Numbers DCGM's stress plugins state in their `info` messages (`dcgmi diag -j` entity info,
or the table's `Info` rows), read where a profile judges them.

targeted_power (NVIDIA/DCGM `nvvs/plugin_src/targetedpower/TargetedPower_wrapper.cpp`):
    "GPU {} max power: {:.1f} W average power usage: {:.1f} W"
the table prefixes `GPU n ` once more (corpus: dcgmi-diag-r3__a10g-...-targeted-power-fail-...:
`GPU 0 GPU 0 max power: 299.5 W average power usage: 299.0 W`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_POWER = re.compile(
    r"GPU (?P<gpu>\d+) max power: (?P<max>\d+(?:\.\d+)?) W average power usage: "
    r"(?P<avg>\d+(?:\.\d+)?) W"
)


@dataclass(frozen=True, slots=True)
class PowerReading:
    gpu: int
    max_w: float
    average_w: float


def targeted_power_reading(text: str) -> PowerReading | None:
    """The max/average power of a targeted_power info message; None if it states none."""
    m = _POWER.search(" ".join(text.split()))
    if m is None:
        return None
    return PowerReading(int(m["gpu"]), float(m["max"]), float(m["avg"]))

"""The `gpu_load` profile section, typed once per profile.

gpu_load:
  run:                               # what runs: the part a level overlays (`levels:`)
    testcases: [host_to_device_memcpy_ce, device_to_host_memcpy_ce,
                device_to_device_memcpy_read_ce, device_local_copy]
    dcgm_level: 3                    # dcgmi diag -r 3|4; null: no DCGM stress
    dcgm_plugins: [targeted_stress, targeted_power, memory_bandwidth]
    burn_s: 60                       # targeted_stress/targeted_power test_duration
  nvbandwidth:
    floors: {host_to_device_memcpy_ce: {min: 45, unit: GB/s}, ...}   # per GPU
    peer_ratio: 0.8                  # host<->device far below the peers: name the placement
    timeout_s: 300
  dcgm: {timeout_s: 1800, allow_warn: false, targeted_power_min: {min: 600, unit: W}}
  telemetry:
    interval_ms: 1000
    fail_reasons: [hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, sw_thermal_slowdown]
    temperature: {max: 87, unit: C}
    ecc_uncorrected_delta: {max: 0, unit: errors}
    xid_during_run: {max: 0, unit: Xids}
    sm_clock: {min_share: 0.75, max_samples_below: 1}   # optional: SM clock of clocks.max.sm
  timeout_s: 2400
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.profiles import Profile

SECTION = "gpu_load"

H2D = "host_to_device_memcpy_ce"
D2H = "device_to_host_memcpy_ce"
D2D = "device_to_device_memcpy_read_ce"
LOCAL = "device_local_copy"
TESTCASES = (H2D, D2H, D2D, LOCAL)
PLUGINS = ("targeted_stress", "targeted_power", "memory_bandwidth", "pulse_test")


@dataclass(frozen=True, slots=True)
class Selection:
    """What a level runs."""

    testcases: tuple[str, ...]  # nvbandwidth testcases, in TESTCASES order
    dcgm_level: int | None
    dcgm_plugins: tuple[str, ...]
    burn_s: int


@dataclass(frozen=True, slots=True)
class SmClock:
    """`telemetry.sm_clock`: the SM clock under load may be below `min_share` of the GPU's
    max SM clock in at most `max_samples_below` samples."""

    min_share: float
    max_samples_below: int


@dataclass(frozen=True, slots=True)
class Telemetry:
    interval_ms: int
    fail_reasons: tuple[str, ...]
    temperature: Threshold
    ecc_delta: Threshold
    xids: Threshold
    sm_clock: SmClock | None = None


@dataclass(frozen=True, slots=True)
class GpuLoadProfile:
    run: Selection
    floors: Mapping[str, Threshold]
    peer_ratio: float | None
    nvbandwidth_timeout_s: float
    dcgm_timeout_s: float
    dcgm_allow_warn: bool
    power_min: Threshold | None
    telemetry: Telemetry
    timeout_s: float

    @classmethod
    def of(cls, sec: Mapping[str, Any]) -> GpuLoadProfile:
        """From the schema-validated section."""
        run, nvb, dcgm, tel = sec["run"], sec["nvbandwidth"], sec["dcgm"], sec["telemetry"]
        where = f"{SECTION}.telemetry"
        level = run["dcgm_level"]
        plugins = tuple(p for p in PLUGINS if p in run["dcgm_plugins"])
        if level is not None and level < 4 and "pulse_test" in plugins:
            raise ConfigError(f"{SECTION}.run.dcgm_plugins: pulse_test runs at dcgm_level 4 only")
        power = dcgm.get("targeted_power_min")
        clock = tel.get("sm_clock")
        return cls(
            run=Selection(
                tuple(t for t in TESTCASES if t in run["testcases"]),
                None if level is None else int(level),
                plugins if level is not None else (),
                int(run["burn_s"]),
            ),
            floors={
                t: Threshold.from_profile(nvb["floors"][t], f"{SECTION}.nvbandwidth.floors.{t}")
                for t in TESTCASES
            },
            peer_ratio=None if nvb.get("peer_ratio") is None else float(nvb["peer_ratio"]),
            nvbandwidth_timeout_s=float(nvb["timeout_s"]),
            dcgm_timeout_s=float(dcgm["timeout_s"]),
            dcgm_allow_warn=bool(dcgm["allow_warn"]),
            power_min=None
            if power is None
            else Threshold.from_profile(power, f"{SECTION}.dcgm.targeted_power_min"),
            telemetry=Telemetry(
                int(tel["interval_ms"]),
                tuple(tel["fail_reasons"]),
                Threshold.from_profile(tel["temperature"], f"{where}.temperature"),
                Threshold.from_profile(tel["ecc_uncorrected_delta"], f"{where}.ecc"),
                Threshold.from_profile(tel["xid_during_run"], f"{where}.xid_during_run"),
                None
                if clock is None
                else SmClock(float(clock["min_share"]), int(clock["max_samples_below"])),
            ),
            timeout_s=float(sec["timeout_s"]),
        )

    def describe(self) -> str:
        """What ran, as verdict messages say it."""
        r = self.run
        dcgm = f"dcgmi diag -r {r.dcgm_level} ({', '.join(r.dcgm_plugins)}; {r.burn_s} s burn)"
        return f"nvbandwidth {', '.join(r.testcases) or 'none'}; " + (
            dcgm if r.dcgm_level is not None else "no DCGM stress"
        )


def gpu_load_profile(profile: Profile) -> GpuLoadProfile:
    """The typed `gpu_load` section of a profile, built once per profile."""
    return profile.typed(SECTION, GpuLoadProfile.of)

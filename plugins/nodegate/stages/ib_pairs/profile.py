"""The `ib_pairs` profile section, typed once per profile, and the rails it tests (`hca.rails`).

ib_pairs:
  floor: {min: 360, unit: Gb/s}     # BW average per rail, for the method below
  method: {message_bytes: 8388608, iterations: 5000, bidirectional: false, qps: 1,
           gpudirect: true}
  port_base: 18515                  # rail i listens on port_base + i
  timeout_s: 60
  ready_timeout_s: 15
  rails_concurrent: true
  pairing: cross_leaf               # or same_leaf
  seed: 0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodegate.core.thresholds import Threshold
from nodegate.profiles import Profile
from nodegate.stages.hca.profile import hca_profile

SECTION = "ib_pairs"


@dataclass(frozen=True, slots=True)
class Rail:
    """One rail: its HCA, the GPU it serves (for --use_cuda) and its NUMA node (numactl)."""

    rail: int
    device: str
    gpu_index: int | None
    numa_node: int | None


@dataclass(frozen=True, slots=True)
class Method:
    """How ib_write_bw runs: the measurement the floor is meant for."""

    message_bytes: int
    iterations: int
    bidirectional: bool
    qps: int
    gpudirect: bool
    extra_args: tuple[str, ...]

    def describe(self, floor: Threshold) -> str:
        way = "bidirectional" if self.bidirectional else "unidirectional"
        gd = "GPUDirect" if self.gpudirect else "host memory"
        return (
            f"ib_write_bw {way}, {self.message_bytes} B messages x {self.iterations}, "
            f"{self.qps} QP(s), {gd}; floor {float(floor.value):g} {floor.unit}"
        )


@dataclass(frozen=True, slots=True)
class IbPairsProfile:
    """The `ib_pairs` section of one profile."""

    floor: Threshold  # BW average per rail, Gb/s
    method: Method
    port_base: int
    timeout_s: float
    ready_timeout_s: float
    rails_concurrent: bool
    pairing: Literal["cross_leaf", "same_leaf"]
    seed: int

    @classmethod
    def of(cls, sec: Mapping[str, Any]) -> IbPairsProfile:
        """From the schema-validated section."""
        m = sec["method"]
        return cls(
            floor=Threshold.from_profile(sec["floor"], f"{SECTION}.floor"),
            method=Method(
                message_bytes=int(m["message_bytes"]),
                iterations=int(m["iterations"]),
                bidirectional=bool(m["bidirectional"]),
                qps=int(m["qps"]),
                gpudirect=bool(m["gpudirect"]),
                extra_args=tuple(m.get("extra_args", ())),
            ),
            port_base=int(sec["port_base"]),
            timeout_s=float(sec["timeout_s"]),
            ready_timeout_s=float(sec["ready_timeout_s"]),
            rails_concurrent=bool(sec["rails_concurrent"]),
            pairing="same_leaf" if sec["pairing"] == "same_leaf" else "cross_leaf",
            seed=int(sec["seed"]),
        )

    def describe(self) -> str:
        """The method and floor, as verdict messages show them."""
        return self.method.describe(self.floor)


def ib_pairs_profile(profile: Profile) -> IbPairsProfile:
    """The typed `ib_pairs` section of a profile, built once per profile."""
    return profile.typed(SECTION, IbPairsProfile.of)


def profile_rails(profile: Profile) -> tuple[Rail, ...]:
    """The rails ib_pairs tests: the hca stage's typed `rails` (empty when the profile has no
    hca section). The one place ib_pairs reads the hca section."""
    if not isinstance(profile.data.get("hca"), Mapping):
        return ()
    return tuple(
        Rail(r.rail, r.device, r.gpu_index, r.numa_node) for r in hca_profile(profile).rails
    )

"""The pipeline's stages in order (explicit registry) and the check catalogue."""

from __future__ import annotations

from functools import cache
from typing import Any

from nodegate.core.checks import Check
from nodegate.framework.stage import Stage
from nodegate.stages.fabric import STAGE as FABRIC
from nodegate.stages.gpu_load import STAGE as GPU_LOAD
from nodegate.stages.hca import STAGE as HCA
from nodegate.stages.ib_pairs import STAGE as IB_PAIRS
from nodegate.stages.nccl import STAGE as NCCL
from nodegate.stages.pcie_gpu import STAGE as PCIE_GPU
from nodegate.stages.reach import STAGE as REACH
from nodegate.stages.roce import STAGE as ROCE
from nodegate.stages.traffic import STAGE as TRAFFIC

# Pipeline order.
STAGES: tuple[Stage, ...] = (
    REACH, PCIE_GPU, GPU_LOAD, HCA, FABRIC, ROCE, IB_PAIRS, TRAFFIC, NCCL
)  # fmt: skip
# Stage names known to the plugin as markers, including stages still to come.
STAGE_MARKERS = (
    "reach", "pcie_gpu", "gpu_load", "hca", "fabric", "roce", "ib_pairs", "traffic", "nccl"
)  # fmt: skip

CheckEntry = tuple[Stage, Check[Any, Any]]


def stage(name: str) -> Stage:
    for s in STAGES:
        if s.name == name:
            return s
    raise KeyError(name)


@cache
def checks_by_test() -> dict[str, CheckEntry]:
    """pytest test function name -> (stage, check). Names are unique across stages (built once:
    every item and report asks; callers must not change it)."""
    out: dict[str, CheckEntry] = {}
    for s in STAGES:
        for c in s.checks:
            if c.test in out:
                raise RuntimeError(f"test name {c.test} used by two checks")
            out[c.test] = (s, c)
    return out


@cache
def checks_by_id() -> dict[str, CheckEntry]:
    return {c.id: (s, c) for s in STAGES for c in s.checks}

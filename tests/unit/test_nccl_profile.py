"""The nccl stage's typed profile: the RoCE settings come from the roce section's accessor."""

from __future__ import annotations

from pathlib import Path

from nodegate.profiles import ProfileLibrary
from nodegate.stages.nccl.profile import nccl_profile, roce_settings

REPO = Path(__file__).resolve().parents[2]


def test_roce_profile_gives_nccl_its_gid_index_and_traffic_class() -> None:
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    assert roce_settings(lib.get("hgx-h100-roce")) == {
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
    }
    assert roce_settings(lib.get("nd-h100-v5")) == {}  # InfiniBand: roce: null


def test_every_shipped_profile_has_an_nccl_section() -> None:
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    for name in ("generic-hgx-h100", "nd-h100-v5", "nd-h200-v5", "nd-a100-v4", "hgx-h100-roce"):
        assert nccl_profile(lib.get(name)).ranks_per_node == 8, name

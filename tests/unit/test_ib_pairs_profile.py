"""The typed `ib_pairs` profile section: the floor is a threshold, every shipped profile cites
it, and the old `floor_gbps` or a floor without its unit is refused with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.profiles import ProfileLibrary, load_profile_file
from nodegate.stages.ib_pairs.profile import Rail, ib_pairs_profile, profile_rails

from tests.integration.conftest import REPO

PROFILES = sorted((REPO / "inventories" / "profiles").glob("[!_]*.yaml"))
FLOORS = {
    "generic-hgx-h100": 360,
    "hgx-h100-roce": 360,
    "nd-a100-v4": 180,
    "nd-h100-v5": 360,
    "nd-h200-v5": 360,
}


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_shipped_profiles_floor_is_a_cited_threshold(path: Path) -> None:
    prof = load_profile_file(path)
    typed = ib_pairs_profile(prof)
    assert typed.floor == Threshold("min", FLOORS[path.stem], "Gb/s")
    assert (typed.floor.expected(), typed.floor.holds(FLOORS[path.stem] - 0.1)) == (
        f">= {FLOORS[path.stem]}",
        False,
    )
    assert {"ib_pairs.floor", "ib_pairs.port_base"} <= set(prof.data["sources"])
    assert typed.describe().endswith(f"; floor {FLOORS[path.stem]} Gb/s")
    assert ib_pairs_profile(prof) is typed  # built once per profile


def test_rails_come_from_the_hca_section() -> None:
    rails = profile_rails(load_profile_file(REPO / "inventories/profiles/generic-hgx-h100.yaml"))
    assert rails[0] == Rail(0, "mlx5_0", 0, 0) and rails[7] == Rail(7, "mlx5_7", 7, 1)
    assert len(rails) == 8


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"floor_gbps": 360}, "ib_pairs: Additional properties are not allowed ('floor_gbps'"),
        ({"floor": 360}, "ib_pairs.floor: 360 is not of type 'object'"),
        ({"floor": {"min": 360, "unit": "GB/s"}}, "ib_pairs.floor.unit: 'Gb/s' was expected"),
        ({"floor": {"max": 360, "unit": "Gb/s"}}, "ib_pairs.floor: 'min' is a required property"),
    ],
    ids=["old-key", "bare-number", "wrong-unit", "not-a-floor"],
)
def test_bad_floor_is_refused_naming_the_key(tmp_path: Path, section: dict, message: str) -> None:
    base = yaml.safe_load((REPO / "inventories/profiles/generic-hgx-h100.yaml").read_text())
    base["ib_pairs"] = {k: v for k, v in base["ib_pairs"].items() if k != "floor"}
    if "floor_gbps" in section:
        base["ib_pairs"]["floor"] = {"min": 360, "unit": "Gb/s"}
    base["ib_pairs"].update(section)
    base["name"] = "site"
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(base))
    with pytest.raises(ConfigError) as info:
        ProfileLibrary([tmp_path]).get("site")
    assert message in str(info.value)

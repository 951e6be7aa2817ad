"""The channel limit of active stages: --max-active (or its ini twin) over the inventory's
`settings.max_active` over the product's default; a simulated fleet writes its own lower one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.core.settings import DEFAULT_MAX_ACTIVE, Settings, build_settings
from nodegate.inventory import InventorySettings, load_inventory
from nodegate.sim.files import write_inventory
from nodegate.sim.fleet_model import SIM_SETTINGS, load_model
from nodegate.sim.tools import known_faults

ROOT = Path("/srv/site")


def build(cli: dict[str, object], ini: dict[str, object]) -> Settings:
    return build_settings(cli, ini, known_transports={"ssh"}, rootpath=ROOT)


@pytest.mark.parametrize(
    ("cli", "ini", "inventory", "limit"),
    [
        ({}, {}, None, DEFAULT_MAX_ACTIVE),
        ({}, {}, 64, 64),  # the fleet's own, when nobody gives one
        ({"nodegate_max_active": "512"}, {}, 64, 512),  # the command line overrides it
        ({}, {"nodegate_max_active": "32"}, 64, 32),  # and so does the ini twin
        ({"nodegate_max_active": "8"}, {"nodegate_max_active": "32"}, None, 8),
    ],
)
def test_which_limit_a_run_uses(
    cli: dict[str, object], ini: dict[str, object], inventory: int | None, limit: int
) -> None:
    assert build(cli, ini).active_limit(inventory) == limit


def test_the_default_and_its_validation() -> None:
    assert DEFAULT_MAX_ACTIVE == 8192
    assert build({}, {}).max_active is None
    with pytest.raises(ConfigError) as exc:
        build({"nodegate_max_active": "-3"}, {})
    assert str(exc.value) == "--max-active: got '-3', expected a whole number >= 1"


def inventory(tmp_path: Path, settings: str) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(f"version: 1\n{settings}nodes:\n  n[1-2]: {{}}\n")
    return path


def test_an_inventory_carries_run_settings(tmp_path: Path) -> None:
    assert load_inventory(inventory(tmp_path, "settings: {max_active: 64}\n")).settings == (
        InventorySettings(max_active=64)
    )
    assert load_inventory(inventory(tmp_path, "")).settings == InventorySettings(None)
    assert load_inventory(inventory(tmp_path, "settings:\n")).settings == InventorySettings(None)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("{max_active: 0}", "settings.max_active: 0 out of range (expected a whole number >= 1)"),
        ("{max_active: '64'}", "settings.max_active: expected an integer, got a string '64'"),
        ("{max_active: true}", "settings.max_active: expected an integer, got a boolean True"),
        ("{fanout: 3}",
         "settings.fanout: unknown key 'fanout' (expected one of: max_active, max_drain)"),
        ("[64]", "settings: expected a mapping or null, got a list [64]"),
    ],
)
def test_bad_inventory_settings_are_one_line_errors(
    tmp_path: Path, settings: str, message: str
) -> None:
    path = inventory(tmp_path, f"settings: {settings}\n")
    with pytest.raises(ConfigError) as exc:
        load_inventory(path)
    assert str(exc.value) == f"{path}: {message}"


def model(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(f"name: m\nprofile: generic-hgx-h100\nnodes: gpu[1-2]\n{extra}")
    return path


@pytest.mark.parametrize(
    ("extra", "limit"), [("", 64), ("settings: {max_active: 8}\n", 8), ("settings:\n", 64)]
)
def test_a_simulated_fleet_writes_its_own_limit_into_its_inventory(
    tmp_path: Path, extra: str, limit: int
) -> None:
    m = load_model(model(tmp_path, extra), known_faults())
    write_inventory(tmp_path, m)
    (tmp_path / "ssh_config").write_text("")  # the fleet's own, which the inventory names
    doc = yaml.safe_load((tmp_path / "inventory.yaml").read_text())
    assert doc["settings"] == {"max_active": limit}
    assert load_inventory(tmp_path / "inventory.yaml").settings.max_active == limit
    assert SIM_SETTINGS == {"max_active": 64}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("settings: {max_active: 0}\n", "settings.max_active: got 0, expected a whole number >= 1"),
        (
            "settings: {fanout: 2}\n",
            "settings: a mapping of max_active, got {'fanout': 2}",
        ),
    ],
)
def test_bad_fleet_settings_are_build_errors(tmp_path: Path, extra: str, message: str) -> None:
    path = model(tmp_path, extra)
    with pytest.raises(ConfigError) as exc:
        load_model(path, known_faults())
    assert str(exc.value) == f"{path}: {message}"

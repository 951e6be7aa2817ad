"""Inventory.select: ClusterShell nodesets, @groups and operators over one inventory."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError
from nodegate.inventory import Inventory, load_inventory

EXAMPLE = Path(__file__).resolve().parents[2] / "inventories" / "examples" / "h100-racks.yaml"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(EXAMPLE)


def names(inv: Inventory, expr: str | None) -> list[str]:
    return [n.name for n in inv.select(expr)]


def gpus(*numbers: int) -> list[str]:
    return [f"gpu{i:03d}" for i in numbers]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        pytest.param(None, gpus(*range(1, 33)), id="none"),
        pytest.param("", gpus(*range(1, 33)), id="empty"),
        pytest.param("   ", gpus(*range(1, 33)), id="blank"),
        pytest.param("gpu017", gpus(17), id="name"),
        pytest.param("gpu[001-004,017]", gpus(1, 2, 3, 4, 17), id="nodeset"),
        pytest.param("@canary", gpus(1, 2), id="group"),
        pytest.param("@all", gpus(*range(1, 33)), id="all"),
        pytest.param("@leaf0[1-2]", gpus(*range(1, 17)), id="group-range"),
        pytest.param("@rack01,@leaf03", gpus(*range(1, 25)), id="union"),
        pytest.param("@all!@rack01", gpus(*range(17, 33)), id="difference"),
        pytest.param("@rack01&gpu[010-020]", gpus(*range(10, 17)), id="intersection"),
        pytest.param("@canary^gpu[002-003]", gpus(1, 3), id="xor"),
        pytest.param("@rack02!gpu[018-032],gpu001", gpus(1, 17), id="left-to-right"),
        pytest.param(" gpu003 , gpu001 ", gpus(1, 3), id="spaces-around"),
        pytest.param("gpu[001-032/8]", gpus(1, 9, 17, 25), id="step"),
    ],
)
def test_select(inv: Inventory, expr: str | None, expected: list[str]) -> None:
    assert names(inv, expr) == expected


def test_result_is_in_inventory_order_and_unique(inv: Inventory) -> None:
    assert names(inv, "gpu010,gpu002,gpu010,@canary") == gpus(1, 2, 10)


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        pytest.param("gpu099", "gpu099 not in this inventory", id="unknown-node"),
        pytest.param("gpu[030-034]", "gpu[033-034] not in this inventory", id="partly-unknown"),
        pytest.param("@all!gpu999", "gpu999 not in this inventory", id="subtracted-typo"),
        pytest.param("@rack9", "unknown group '@rack9'", id="unknown-group"),
        pytest.param("@leaf0[4-5]", "unknown group '@leaf05'", id="group-range"),
        pytest.param("gpu[001-", "bad nodeset expression", id="syntax"),
        pytest.param("gpu001,,gpu002", "empty operand", id="empty-operand"),
        pytest.param("gpu001!", "empty operand", id="trailing-operator"),
        pytest.param("gpu001 gpu002", "whitespace inside", id="space-separated"),
    ],
)
def test_select_errors_name_the_problem_and_file(inv: Inventory, expr: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        inv.select(expr)
    message = str(info.value)
    assert message.startswith(f"{EXAMPLE}: node selection {expr!r}"), message
    assert needle in message


def test_select_does_not_read_system_clustershell_groups(tmp_path: Path) -> None:
    # Only the inventory's groups exist: a name from /etc/clustershell must not resolve.
    path = tmp_path / "inv.yaml"
    path.write_text("version: 1\nnodes: {n1: }\ngroups: {g: {nodes: n1}}\n")
    inv = load_inventory(path)
    assert names(inv, "@g") == ["n1"]
    with pytest.raises(ConfigError, match="unknown group '@adm'"):
        inv.select("@adm")

"""The package's layers point one way: import-linter's contracts (`[tool.importlinter]` in
pyproject.toml) hold, and every top-level package is in them, so a new one cannot escape."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # import-linter reads its TOML with tomli there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "plugins" / "nodegate"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# Below every layer, each with a forbidden contract of its own: the simulator (`sim`). Data
# only, no code: `schemas`.
OUTSIDE_THE_LAYERS = {"nodegate.sim"}


def lint_imports(config: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on `config`, the package imported from `pythonpath` (not whichever one
    the interpreter has installed)."""
    if not LINT_IMPORTS.exists():
        pytest.fail(f"no {LINT_IMPORTS}: install the dev extra (import-linter)")
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)],
        cwd=config.parent, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def contracts() -> list[dict[str, Any]]:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = doc["tool"]["importlinter"]["contracts"]
    return found


def _one(**match: str) -> dict[str, Any]:
    (contract,) = [c for c in contracts() if all(c.get(k) == v for k, v in match.items())]
    return contract


def code_packages() -> set[str]:
    """nodegate's top-level modules and packages that hold code (a data directory has none)."""
    found = {f"nodegate.{p.stem}" for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    found |= {f"nodegate.{d.name}" for d in PACKAGE.iterdir() if (d / "__init__.py").is_file()}
    return found


def test_the_import_contracts_hold() -> None:
    p = lint_imports(REPO / "pyproject.toml", REPO / "plugins")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 broken" in p.stdout, p.stdout


def test_a_broken_contract_fails_with_its_report(tmp_path: Path) -> None:
    for name, text in {
        "__init__.py": "",
        "low.py": "from pkg import high\n",
        "high.py": "",
    }.items():
        (tmp_path / "pkg").mkdir(exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.importlinter]\nroot_package = "pkg"\n[[tool.importlinter.contracts]]\n'
        'name = "down only"\ntype = "layers"\nlayers = ["pkg.high", "pkg.low"]\n'
    )
    p = lint_imports(tmp_path / "pyproject.toml", tmp_path)
    assert p.returncode != 0
    assert "down only BROKEN" in p.stdout and "pkg.low -> pkg.high" in p.stdout, p.stdout


def test_every_package_is_in_the_layers() -> None:
    layers = set(_one(type="layers")["layers"])
    packages = code_packages()
    assert "nodegate.schemas" not in packages  # data only (a new module there: a layer)
    assert packages - OUTSIDE_THE_LAYERS - layers == set(), "add it to the layers contract"
    assert layers - packages == set(), "a layer that is no package"
    assert OUTSIDE_THE_LAYERS.isdisjoint(layers)


def test_the_simulator_is_kept_apart_from_every_layer() -> None:
    layers = _one(type="layers")["layers"]
    # It imports only the bottom two (core values, parser formats; a few named exceptions)...
    sim = _one(type="forbidden", source_modules=["nodegate.sim"])
    assert set(sim["forbidden_modules"]) == set(layers) - {"nodegate.core", "nodegate.parsers"}
    # ...and only the top one imports it.
    only_cli = _one(type="forbidden", forbidden_modules=["nodegate.sim"])
    assert set(only_cli["source_modules"]) == set(layers) - {"nodegate.cli"}

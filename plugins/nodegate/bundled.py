"""Where nodegate's own data lives: shipped profiles, the suites, the demo fleet model.

One place answers for the checkout and for an installed wheel, so callers never build
repository-relative paths themselves.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _repo_path(*parts: str) -> Path:
    return REPO.joinpath(*parts)


def profiles_dir() -> Path:
    """The directory of the shipped SKU profiles (a user's --profiles-dir comes first)."""
    return _repo_path("inventories", "profiles")


def suites_dir() -> Path:
    """The directory holding the registered checks as pytest test files."""
    return _repo_path("suites")


def demo_model() -> Path:
    """The demo's simulated fleet model."""
    return _repo_path("inventories", "sim", "demo.yaml")


def default_reports_dir(rootpath: Path) -> Path:
    """Run directories go under `<rootpath>/reports` by default."""
    return rootpath / "reports"

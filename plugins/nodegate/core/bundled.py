"""Where nodegate's own data lives: shipped profiles, the suites, the demo fleet model.

One place answers for the checkout and for an installed wheel, so callers never build
repository-relative paths themselves. From a checkout (or its editable install) these are the
checkout's own files, so an edited profile takes effect at once; from an installed wheel they
are its package data, `nodegate/_bundled/` (setup.py maps the same checkout files there).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # the nodegate package (this file is in core/)
REPO = PACKAGE.parents[1]
# each bundled directory: its place in the checkout (and its name under nodegate/_bundled/)
_CHECKOUT = {
    "profiles": ("inventories", "profiles"),
    "suites": ("suites",),
    "sim": ("inventories", "sim"),
}


def installed() -> bool:
    """True when nodegate runs from an installed wheel (its data is package data)."""
    return (PACKAGE / "_bundled").is_dir()


def _bundled(name: str) -> Path:
    if installed():
        return PACKAGE / "_bundled" / name
    return REPO.joinpath(*_CHECKOUT[name])


def profiles_dir() -> Path:
    """The directory of the shipped SKU profiles (a user's --profiles-dir comes first)."""
    return _bundled("profiles")


def suites_dir() -> Path:
    """The directory holding the registered checks as pytest test files."""
    return _bundled("suites")


def demo_model() -> Path:
    """The demo's simulated fleet model."""
    return _bundled("sim") / "demo.yaml"


def suites_rootdir() -> Path:
    """The pytest rootdir for a run of the shipped suites: the checkout, else the cwd."""
    return Path.cwd() if installed() else REPO


def suite_args() -> list[str]:
    """pytest arguments that run the shipped suites, rooted at `suites_rootdir()`.

    Installed, the suites sit in site-packages: no config file or conftest.py is looked for
    above them (a venv inside someone's project must not pick up that project's pytest
    settings). From a checkout its pyproject.toml applies, as always.
    """
    suites = suites_dir()
    args = [str(suites), f"--rootdir={suites_rootdir()}"]
    if installed():
        args += [f"--config-file={os.devnull}", f"--confcutdir={suites}"]
    return args


def default_reports_dir(rootpath: Path) -> Path:
    """Run directories go under `<rootpath>/reports`; under `./reports` when pytest was rooted
    inside the installed package (`pytest <site-packages>/nodegate/_bundled/suites`)."""
    if rootpath.resolve().is_relative_to(PACKAGE):
        return Path.cwd() / "reports"
    return rootpath / "reports"

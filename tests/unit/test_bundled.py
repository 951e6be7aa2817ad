"""nodegate.core.bundled: the checkout's own files from a checkout, package data when installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nodegate.core import bundled

REPO = Path(__file__).resolve().parents[2]


def test_checkout_answers_with_its_own_files():
    # the tests run on the editable install: edits to the checkout take effect at once
    assert not bundled.installed()
    assert bundled.profiles_dir() == REPO / "inventories" / "profiles"
    assert bundled.suites_dir() == REPO / "suites"
    assert bundled.demo_model() == REPO / "inventories" / "sim" / "demo.yaml"
    assert bundled.suites_rootdir() == REPO
    assert bundled.suite_args() == [str(REPO / "suites"), f"--rootdir={REPO}"]


def test_reports_go_under_the_rootdir(tmp_path):
    assert bundled.default_reports_dir(tmp_path) == tmp_path / "reports"


@pytest.fixture
def installed_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for site-packages/nodegate with its _bundled data, and an empty cwd."""
    pkg = tmp_path / "site-packages" / "nodegate"
    for name in ("profiles", "suites", "sim"):
        (pkg / "_bundled" / name).mkdir(parents=True)
    cwd = tmp_path / "work"
    cwd.mkdir()
    monkeypatch.setattr(bundled, "PACKAGE", pkg)
    monkeypatch.chdir(cwd)
    return pkg


def test_installed_answers_with_package_data(installed_package, tmp_path):
    data = installed_package / "_bundled"
    assert bundled.installed()
    assert bundled.profiles_dir() == data / "profiles"
    assert bundled.suites_dir() == data / "suites"
    assert bundled.demo_model() == data / "sim" / "demo.yaml"
    assert bundled.suites_rootdir() == tmp_path / "work"
    assert bundled.suite_args() == [
        str(data / "suites"),
        f"--rootdir={tmp_path / 'work'}",
        f"--config-file={os.devnull}",
        f"--confcutdir={data / 'suites'}",
    ]


def test_installed_reports_never_go_into_the_package(installed_package, tmp_path):
    # `pytest <site-packages>/nodegate/_bundled/suites` roots the run there: reports go to cwd
    rooted_inside = installed_package / "_bundled" / "suites"
    assert bundled.default_reports_dir(rooted_inside) == tmp_path / "work" / "reports"
    elsewhere = tmp_path / "project"
    assert bundled.default_reports_dir(elsewhere) == elsewhere / "reports"

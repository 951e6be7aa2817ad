"""The built wheel: it holds every shipped file, and `nodegate demo` runs from it in an empty
directory of a fresh venv, using the wheel's own files and writing only where it was run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nodegate.stages.registry import checks_by_test

from tests.integration.conftest import REPO
from tests.integration.test_demo_model import EXPECTED

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# what a build leaves in a source tree, and what is never part of one: the checkout's own
# folders at its top (only there: `nodegate.reports` is a package), caches anywhere
_TOP_NOT_SOURCE = {".git", ".venv", "build", "dist", "reports", ".nodegate"}
_CACHES = shutil.ignore_patterns("*.egg-info", "__pycache__", ".*cache")


def _not_source(folder: str, names: list[str]) -> set[str]:
    top = _TOP_NOT_SOURCE.intersection(names) if Path(folder) == REPO else set()
    return top | set(_CACHES(folder, names))


def _files(root: Path, skip: Callable[[str], bool] = lambda _dir: False) -> dict[str, Any]:
    """Every file under root (not following links, not in a skipped folder): size, mtime."""
    out = {}
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if not skip(d)]
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def _not_checkout(folder: str) -> bool:
    """Folders of the checkout that other processes write to while this test runs."""
    return folder in {".git", "__pycache__"} or folder.startswith(".") and folder.endswith("cache")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built offline from a copy of the checkout (the checkout is left untouched)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=_not_source, symlinks=True)
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(tmp / "dist"), str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    (whl,) = (tmp / "dist").glob("nodegate-*.whl")
    return whl


def test_wheel_holds_every_shipped_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())

    def shipped(folder: str, pattern: str, into: str) -> set[str]:
        found = {f"{into}/{p.name}" for p in (REPO / folder).glob(pattern) if p.is_file()}
        assert found, (folder, pattern)
        return found

    want = (
        shipped("inventories/profiles", "*.yaml", "nodegate/_bundled/profiles")  # and _fragments
        | shipped("suites", "*.py", "nodegate/_bundled/suites")
        | shipped("inventories/sim", "demo.yaml", "nodegate/_bundled/sim")
        | shipped("plugins/nodegate/schemas", "*.json", "nodegate/schemas")
        | shipped("plugins/nodegate/sim/data", "*", "nodegate/sim/data")
    )
    assert want - names == set()


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path  # the venv's site-packages

    def python(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "python"), *args],
            capture_output=True, text=True, timeout=120, cwd=cwd,
        )  # fmt: skip


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv holding only the wheel, its dependencies seen from this venv through a .pth
    (naming site-packages only: never the checkout's plugins/). It sits inside a project whose
    pytest settings and conftest.py must not reach nodegate's runs."""
    project = tmp_path_factory.mktemp("project")
    (project / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option\n")
    (project / "conftest.py").write_text(
        "import sys\nsys.stderr.write('conftest above the venv loaded\\n')\nsys.exit(97)\n"
    )
    venv = project / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "nodegate-test-deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    p = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
         "-q", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    return Installed(venv, Path(site))


def test_installed_nodegate_uses_the_wheels_own_files(installed, tmp_path):
    p = installed.python(
        "-c",
        "import nodegate, nodegate.core.bundled as b; print(nodegate.__file__, b.installed()); "
        "print(b.profiles_dir()); print(b.suites_dir()); print(b.demo_model())",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    data = installed.site / "nodegate" / "_bundled"
    assert p.stdout.splitlines() == [
        f"{installed.site / 'nodegate' / '__init__.py'} True",
        str(data / "profiles"),
        str(data / "suites"),
        str(data / "sim" / "demo.yaml"),
    ]


def test_user_profiles_dir_comes_before_the_shipped_one(installed, tmp_path):
    (tmp_path / "inv.yaml").write_text(
        "version: 1\ndefaults: {profile: generic-hgx-h100}\nnodes: {gpu001: {}}\n"
    )
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "generic-hgx-h100.yaml").write_text("name: generic-hgx-h100\n")
    args = installed.python(
        "-c", "import nodegate.core.bundled as b; print('\\n'.join(b.suite_args()))", cwd=tmp_path
    ).stdout.splitlines()
    run = [*args, "-p", "no:cacheprovider", "--inventory=inv.yaml", "--collect-only", "-q"]
    shipped = installed.python("-m", "pytest", *run, cwd=tmp_path)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    # every registered check, once for the one node: the shipped profile was found and valid
    assert shipped.stdout.splitlines()[-1].startswith(f"{len(checks_by_test())} tests collected")
    mine = installed.python("-m", "pytest", *run, "--profiles-dir=mine", cwd=tmp_path)
    assert mine.returncode == 4, mine.stdout + mine.stderr
    # the user's copy was loaded (and refused); what the schema says of it is the schema's
    assert mine.stderr.splitlines()[0] == (
        "ERROR: nodegate: invalid profile mine/generic-hgx-h100.yaml:"
    )


def test_demo_runs_from_the_wheel_in_an_empty_directory(
    installed, tmp_path, sshd_available, subnet
):
    venv, site = installed.venv, installed.site
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    venv_before, repo_before = _files(venv), _files(REPO, _not_checkout)
    for _attempt in range(5):
        fleet = tmp_path / "fleet"
        cmd = [str(venv / "bin" / "nodegate"), "demo", "--subnet", subnet(), "--dir", str(fleet)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=work, env=env)
        if not (p.returncode == 4 and "already accept connections" in p.stderr):
            break
        shutil.rmtree(fleet)  # another run's fleet holds that subnet: take the next
    out = p.stdout + p.stderr
    assert p.returncode == 1, out

    run_dir = (work / "reports" / "latest").resolve()
    assert f"reports: {run_dir}  (" in out
    assert f"simulated fleet from {site / 'nodegate' / '_bundled' / 'sim' / 'demo.yaml'}" in out
    admission = json.loads((run_dir / "admission.json").read_text())
    rejected = {n: d["reasons"] for n, d in admission["nodes"].items() if not d["admitted"]}
    assert sorted(rejected) == sorted(EXPECTED)
    for node, check in EXPECTED.items():
        assert check in {r["check"] for r in rejected[node]}, (node, rejected[node])
    slow = [r for r in rejected["gpu026"] if r["check"] == "ib_pairs.rail.bandwidth"]
    assert [r["component"] for r in slow] == ["mlx5_3 port 1 (rail 3)"]
    assert len(admission["nodes"]) - len(rejected) == 32 - len(EXPECTED)

    # written: reports/ in the cwd and the fleet dir; nothing in the venv or the checkout
    assert sorted(os.listdir(work)) == ["reports"]
    assert _files(venv) == venv_before
    assert _files(REPO, _not_checkout) == repo_before

"""Without --inventory the plugin stays out of the way; a suite needing it says so."""

from __future__ import annotations

import subprocess
import sys

OTHER = """
import pytest

@pytest.fixture
def node():
    return "mine"

def test_mine(node):
    assert node == "mine"
"""


def run(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )


def test_foreign_node_fixture_is_left_alone(tmp_path):
    (tmp_path / "test_other.py").write_text(OTHER)
    p = run(tmp_path, "test_other.py")
    assert p.returncode == 0, p.stdout + p.stderr


def test_suites_without_inventory_is_a_usage_error(tmp_path):
    (tmp_path / "test_suite.py").write_text(
        "def test_kernel_version(nodegate_check):\n    nodegate_check.assert_pass()\n"
    )
    p = run(tmp_path, "test_suite.py", "-W", "ignore::pytest.PytestAssertRewriteWarning")
    # One usage error (exit 4), not a collection error per module (exit 2, "interrupted").
    assert (p.returncode, p.stdout, p.stderr) == (
        4,
        "",
        "ERROR: nodegate: --inventory: missing; test_suite.py::test_kernel_version needs the "
        "nodes to qualify (a nodegate YAML, Ansible INI or Ansible YAML inventory; ini twin "
        "nodegate_inventory)\n\n",
    )

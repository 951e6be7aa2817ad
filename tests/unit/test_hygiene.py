"""The test suite's own hygiene: every integration file is marked (the fast lane is
`-m "not integration"`), the plugin loads without assert-rewrite warnings, and simulated
fleets get loopback subnets reserved across processes."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import subnets

REPO = Path(__file__).resolve().parents[2]


def _marked_integration(path: Path) -> bool:
    """Whether the test file's module-level `pytestmark` has pytest.mark.integration."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            marks = (
                node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            )
            return "pytest.mark.integration" in {ast.unparse(m) for m in marks}
    return False


def _mentions_integration_mark(path: Path) -> bool:
    """Whether the code (not its text) uses `mark.integration` anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == "integration"
        and ast.unparse(n.value).endswith("mark")
        for n in ast.walk(tree)
    )


def test_every_integration_test_file_carries_the_integration_marker() -> None:
    files = sorted((REPO / "tests" / "integration").glob("test_*.py"))
    assert files
    unmarked = [f.name for f in files if not _marked_integration(f)]
    assert unmarked == [], "each needs `pytestmark = pytest.mark.integration` (the fast lane)"


def test_no_unit_or_parser_test_is_marked_integration() -> None:
    files = sorted((REPO / "tests").glob("[up]*/test_*.py"))
    assert len(files) > 50
    assert [f.name for f in files if _mentions_integration_mark(f)] == []


def test_the_plugin_loads_with_nothing_pytest_cannot_rewrite(tmp_path: Path) -> None:
    # Loaded by name, as an editable install's entry point is (pytest then marks only the
    # plugin's own module for rewriting): a module it registers that was imported before
    # pytest asked for it warned "Module already imported so cannot be rewritten".
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert True\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO / "plugins"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    cmd = [
        sys.executable, "-m", "pytest", "-p", "nodegate.session.plugin", "-p", "no:cacheprovider",
        "-W", "error::pytest.PytestAssertRewriteWarning", "-q", "test_x.py",
    ]  # fmt: skip
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "cannot be rewritten" not in p.stdout + p.stderr


HOLD = """\
import sys
from pathlib import Path
from tests.integration import subnets
subnets.OCTETS = range(100, 102)
r = subnets.reserve(Path(sys.argv[1]))
print(r.subnet, flush=True)
sys.stdin.read()  # held until the test closes our stdin
"""


def test_a_subnet_is_reserved_across_processes_until_released(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(subnets, "OCTETS", range(100, 102))
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO}/plugins"}
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert other.stdout is not None
        theirs = other.stdout.readline().strip()
        mine = subnets.reserve(tmp_path)
        assert {theirs, mine.subnet} == {"127.100", "127.101"}
        with pytest.raises(RuntimeError, match="no free loopback subnet: all 2 held"):
            subnets.reserve(tmp_path)  # this process's own second try included
        mine.release()
        again = subnets.reserve(tmp_path)
        assert again.subnet == mine.subnet
    finally:
        other.communicate("", timeout=30)  # it ends: the kernel drops its lock
    assert subnets.reserve(tmp_path).subnet == theirs
    again.release()

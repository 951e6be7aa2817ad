"""Issue #10 item 6, walked whole through real runs (pytest and the `nodegate` CLI in a
subprocess, as an operator types them): every bad input exits 4 with one line naming the
option or file and what is accepted; no traceback; no run directory left behind."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from nodegate.compare.abmode import EXIT_REGRESSED
from nodegate.stages.registry import STAGES

REPO = Path(__file__).resolve().parents[2]
SECRET = "root:$6$s3cr3t-hash:19700:0:99999:7:::"
INVENTORY = "version: 1\ndefaults: {profile: generic-hgx-h100}\nnodes: {n1: {}}\n"


def inventory_with(ssh_config: str) -> str:
    return (
        "version: 1\n"
        f"defaults: {{profile: generic-hgx-h100, ssh: {{ssh_config: {ssh_config}}}}}\n"
        "nodes: {n1: {}}\n"
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory with an inventory, bad ssh_configs and files that are not bundles."""
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "proxy_config").write_text("Host n1\n  ProxyCommand ssh -W %h:%p bastion\n")
    (tmp_path / "inv-proxy.yaml").write_text(inventory_with("proxy_config"))
    (tmp_path / "shadow").write_text(SECRET + "\n")
    (tmp_path / "include_config").write_text(f"Include {tmp_path}/shadow\n")
    (tmp_path / "inv-include.yaml").write_text(inventory_with("include_config"))
    (tmp_path / "unreadable_config").write_text("Include /proc/self/mem\n")  # EIO, even as root
    (tmp_path / "inv-unreadable.yaml").write_text(inventory_with("unreadable_config"))
    (tmp_path / "inv-max-active.yaml").write_text(
        "version: 1\nsettings: {max_active: 0}\nnodes: {n1: {profile: generic-hgx-h100}}\n"
    )
    (tmp_path / "reports" / "used").mkdir(parents=True)
    return tmp_path


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    message: str  # the one line, after "ERROR: nodegate: " (pytest) or "nodegate: " (the CLI)
    cli: bool = False  # `nodegate capture ...` rather than pytest


def pytest_run(*args: str) -> tuple[str, ...]:
    return ("--inventory=inv.yaml", *args)


BUNDLE = "a capture bundle or a run's raw/"
NAME = "ASCII letters, digits, '_', '.', '-'; not starting with '.' or '-'"
CASES = {
    "fanout-negative": Case(
        pytest_run("--fanout", "-1"), "--fanout: got '-1', expected a whole number >= 1"
    ),
    "fanout-zero": Case(
        pytest_run("--fanout", "0"), "--fanout: got '0', expected a whole number >= 1"
    ),
    "max-active-zero": Case(
        pytest_run("--max-active", "0"), "--max-active: got '0', expected a whole number >= 1"
    ),
    "ini-max-active": Case(
        pytest_run("-o", "nodegate_max_active=many"),
        "--max-active (from ini nodegate_max_active): got 'many', expected a whole number >= 1",
    ),
    "inventory-max-active": Case(
        ("--inventory=inv-max-active.yaml",),
        "inv-max-active.yaml: settings.max_active: 0 out of range (expected a whole number >= 1)",
    ),
    "connect-timeout-zero": Case(
        pytest_run("--connect-timeout", "0"),
        "--connect-timeout: got '0', expected a number of seconds > 0",
    ),
    "connect-timeout-negative": Case(
        pytest_run("--connect-timeout", "-1"),
        "--connect-timeout: got '-1', expected a number of seconds > 0",
    ),
    "replay-missing": Case(
        pytest_run("--transport", "replay", "--replay", "nope"),
        f"--replay: got 'nope', expected an existing directory ({BUNDLE})",
    ),
    "replay-file": Case(
        pytest_run("--transport", "replay", "--replay", "a-file"),
        f"--replay: got 'a-file', expected an existing directory ({BUNDLE})",
    ),
    "ini-fanout": Case(
        pytest_run("-o", "nodegate_fanout=abc"),
        "--fanout (from ini nodegate_fanout): got 'abc', expected a whole number >= 1",
    ),
    "ini-connect-timeout": Case(
        pytest_run("-o", "nodegate_connect_timeout=abc"),
        "--connect-timeout (from ini nodegate_connect_timeout): got 'abc', expected a number "
        "of seconds > 0",
    ),
    "ini-transport": Case(
        pytest_run("-o", "nodegate_transport=bogus"),
        "--transport (from ini nodegate_transport): got 'bogus', expected one of local, "
        "replay, slurm, ssh",
    ),
    "ini-item-reports": Case(
        pytest_run("-o", "nodegate_item_reports=maybe"),
        "--item-reports (from ini nodegate_item_reports): got 'maybe', expected one of "
        "true/false, yes/no, 1/0, on/off",
    ),
    "ini-summary-lines": Case(
        pytest_run("-o", "nodegate_summary_lines=-1"),
        "--summary-lines (from ini nodegate_summary_lines): got '-1', expected a whole number >= 0",
    ),
    "ini-progress": Case(
        pytest_run("-o", "nodegate_progress=loud"),
        "--progress (from ini nodegate_progress): got 'loud', expected one of auto, live, "
        "plain, off",
    ),
    "ssh-config-proxycommand": Case(
        ("--inventory=inv-proxy.yaml",),
        "{tmp}/proxy_config:2: ProxyCommand (used for n1) is not supported; use ProxyJump",
    ),
    "ssh-config-include-not-a-config": Case(
        ("--inventory=inv-include.yaml",),
        "inv-include.yaml: defaults.ssh.ssh_config: {tmp}/shadow:1: not an ssh_config line "
        "(Included file: content not shown)",
    ),
    "ssh-config-include-unreadable": Case(
        ("--inventory=inv-unreadable.yaml",),
        "inv-unreadable.yaml: defaults.ssh.ssh_config: /proc/self/mem: cannot read ssh_config: "
        "Input/output error",
    ),
    "no-inventory": Case(
        (),
        "--inventory: missing; suites/test_fabric.py::test_fabric_cable_expected needs the nodes "
        "to qualify (a nodegate YAML, Ansible INI or Ansible YAML inventory; ini twin "
        "nodegate_inventory)",
    ),
    "run-id-path": Case(
        pytest_run("--run-id", "../x"),
        f"--run-id: got '../x', expected a name of {NAME}, other than 'latest'",
    ),
    "run-id-latest": Case(
        pytest_run("--run-id", "latest"),
        f"--run-id: got 'latest', expected a name of {NAME}, other than 'latest'",
    ),
    "run-id-reused": Case(
        pytest_run("--run-id", "used"),
        "--run-id: got 'used', expected an id not used yet (reports/used exists)",
    ),
    "mark-unknown": Case(  # #21: exit 5, a run directory, and no word of the stage markers
        pytest_run("-m", "reach or nosuchstage"),
        "-m: 'nosuchstage' in 'reach or nosuchstage' is no marker of these suites; the stage "
        f"markers: {', '.join(s.name for s in STAGES)} (every registered marker: "
        "pytest --markers)",
    ),
    "profiles-dir-missing": Case(  # #21: accepted, the shipped profiles used instead
        pytest_run("--profiles-dir", "/nonexistent"),
        "--profiles-dir: got '/nonexistent', expected an existing directory",
    ),
    "ini-profiles-dir-file": Case(
        pytest_run("-o", "nodegate_profiles_dir=. a-file"),
        "--profiles-dir (from ini nodegate_profiles_dir): got 'a-file', expected an existing "
        "directory",
    ),
    "capture-stages": Case(
        ("capture", "--inventory", "inv.yaml", "--stages", "bogus", "--out", "bundle"),
        "--stages: unknown stage 'bogus'; known: reach, pcie_gpu, gpu_load, hca, fabric, roce, "
        "ib_pairs, traffic, nccl",
        cli=True,
    ),
    "capture-out-file": Case(
        ("capture", "--inventory", "inv.yaml", "--transport", "local", "--out", "a-file"),
        "--out: got 'a-file', expected a directory for the bundle (absent or a directory; "
        "a file is there)",
        cli=True,
    ),
}


def run(site: Path, case: Case) -> subprocess.CompletedProcess[str]:
    if case.cli:
        cmd = [sys.executable, "-m", "nodegate.cli", *case.args]
    else:
        cmd = [sys.executable, "-m", "pytest", str(REPO / "suites"), f"--rootdir={REPO}"]
        cmd += ["-p", "no:cacheprovider", "-q", "--reports-dir=reports", *case.args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=site)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", list(CASES))
def test_usage_error_is_one_line_and_exit_4(site: Path, name: str) -> None:
    case = CASES[name]
    before = tree(site)
    p = run(site, case)
    message = case.message.format(tmp=site)
    expected = f"nodegate: {message}\n" if case.cli else f"ERROR: nodegate: {message}\n\n"
    assert (p.returncode, p.stdout, p.stderr) == (4, "", expected)
    assert SECRET.split(":")[1] not in p.stdout + p.stderr
    assert tree(site) == before  # no run directory, no bundle, no reports/latest


def test_collect_only_leaves_no_run_directory(site: Path) -> None:
    p = run(site, Case(pytest_run("--collect-only", "--run-id", "c1", "-m", "reach"), ""))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == "suites/test_reach.py::test_ssh_reachable[n1]"
    assert not (site / "reports" / "c1").exists()


def test_readme_exit_code_table_says_4_is_a_usage_error() -> None:
    readme = (REPO / "README.md").read_text()
    table = dict(re.findall(r"^\| (\d) \| (.+) \|$", readme, re.MULTILINE))
    assert sorted(table) == ["0", "1", "2", "3", "4", "5", "6", "7", "8"]  # 6, 7, 8: #13
    assert table[str(EXIT_REGRESSED)].startswith("regressed: `--compare-to` found a regression")
    assert table["4"].startswith("usage error: ")
    for words in ("inventory", "ssh_config", "option", "--run-id", "waiver", "SLURM_CONF"):
        assert words in table["4"], (words, table["4"])


def test_marker_names_are_read_as_pytest_scans_them() -> None:
    from nodegate.session.collection import marker_names

    assert marker_names("reach and not (pcie_gpu or device(serial='1', n=2))") == [
        "reach",
        "pcie_gpu",
        "device",
    ]
    assert marker_names("not  nccl") == ["nccl"]


def test_an_expression_of_known_markers_runs(site: Path) -> None:
    """A registered marker other than a stage's (pyproject's `slow`) is known too."""
    p = run(site, Case(pytest_run("--collect-only", "-m", "reach and not slow"), ""))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == "suites/test_reach.py::test_ssh_reachable[n1]"

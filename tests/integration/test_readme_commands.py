"""Every command the README shows works as written.

The README's `sh` blocks and its "Two commands" table are parsed; each command must be in
PLAN below (a new README command fails this test until it is added here) and is run, in
README order, in a workspace that looks like the checkout (`.venv`, `suites`, `inventories`,
`scripts`, ... linked from it), so relative paths resolve and what a command writes
(`.nodegate/`, `reports/`, `bundle/`) stays in the workspace. The placeholders the README
uses for the operator's files exist there: `inv.yaml` is the inventory of the simulated fleet
that `nodegate sim up` starts (the demo model), `hosts.ini` the shipped Ansible INI example.

What is appended to a command, and why, is in PLAN: a fresh loopback subnet for each fleet;
`scripts/test` (the full suite and the fast lane) only collects (the suite must not run itself);
inventories of real nodes are collected, not connected to; the full-fleet run and the demo
run the reach stage only, and the benchmarks their smallest size (CI time). The wheel block is
run by tests/integration/test_wheel.py (a wheel built offline, installed in a fresh venv, the
demo in an empty directory).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LINKED = ("bench", "conftest.py", "inventories", "plugins", "pyproject.toml", "scripts")
LINKED += ("setup.py", "suites", "tests", ".venv", ".mypy_cache")
FLEET = ".nodegate/sim/demo"


@dataclass(frozen=True)
class Step:
    extra: str = ""  # appended to the command ({subnet}: a fresh one)
    rc: int = 0
    shows: str = ""  # a line the output must hold
    why: str = ""  # why something is appended, or why the command runs elsewhere


COVERED_BY_WHEEL_TEST = Step(why="tests/integration/test_wheel.py")
PLAN: dict[str, Step] = {
    "scripts/demo": Step(
        f"--dir {FLEET}-2 --subnet {{subnet}} -- -m reach",
        1,
        "exit code 1: some nodes rejected, as this demo intends: its fleet has injected faults",
        "a fresh fleet dir and subnet; the reach stage only",
    ),
    "scripts/test": Step(
        "--collect-only -q tests/unit/test_cli.py", 0, "", "collects: the suite does not recurse"
    ),
    "scripts/bootstrap && .venv/bin/python -m build": COVERED_BY_WHEEL_TEST,
    "python3 -m venv /opt/nodegate && /opt/nodegate/bin/pip install "
    "dist/nodegate-0.1.0-py3-none-any.whl": COVERED_BY_WHEEL_TEST,
    'cd "$(mktemp -d)" && /opt/nodegate/bin/nodegate demo': COVERED_BY_WHEEL_TEST,
    "scripts/test#2": Step(),  # the Development block's copy: same command, run once
    ".venv/bin/nodegate sim up --model inventories/sim/demo.yaml --dir .nodegate/sim/demo": Step(
        "--subnet {subnet}", 0, "", "a fresh subnet"
    ),
    "ssh -F .nodegate/sim/demo/ssh_config gpu001 uname -r": Step("", 0, "5.15.0-105-generic"),
    ".venv/bin/clush -o '-F .nodegate/sim/demo/ssh_config' -w 'gpu[004-007]' -b uname -r": Step(
        "", 0, "5.15.0-105-generic"
    ),
    "PDSH_RCMD_TYPE=ssh PDSH_SSH_ARGS_APPEND='-F .nodegate/sim/demo/ssh_config' "
    "pdsh -w 'gpu[004-007]' uname -r": Step("", 0, "gpu004: 5.15.0-105-generic"),
    ".venv/bin/pytest suites --inventory .nodegate/sim/demo/inventory.yaml": Step(
        "-m reach", 1, "", "the reach stage only"
    ),
    ".venv/bin/pytest suites --inventory inv.yaml --nodes 'gpu[001-016]' -m reach": Step(
        "", 1, "nodegate run "
    ),
    ".venv/bin/pytest suites --inventory inv.yaml --save-baseline baselines/fleet-a": Step(
        "--nodes 'gpu[001-002,004]'",
        0,
        "baseline saved: baselines/fleet-a/baseline.json",
        "three healthy nodes: every stage in seconds",
    ),
    ".venv/bin/pytest suites --inventory inv.yaml --compare-to baselines/fleet-a": Step(
        "--nodes 'gpu[001-002,004]'",
        0,
        "3 nodes, 0 changes, no regression",
        "the same three nodes, compared with the baseline the command before saved",
    ),
    ".venv/bin/nodegate capture --inventory inv.yaml --nodes gpu017 --stages reach "
    "--out bundle/": Step("", 0, "gpu017 reach: ok 4 commands "),
    ".venv/bin/pytest suites --inventory inv.yaml --transport replay --replay bundle/": Step(
        "-m reach", 1, "", "the reach stage only (the bundle holds reach)"
    ),
    ".venv/bin/nodegate sim status --dir .nodegate/sim/demo": Step(
        "", 0, "running: 2 of 2 sshd daemons up, 31 of 32 node addresses listening"
    ),
    ".venv/bin/nodegate sim stop --dir .nodegate/sim/demo": Step(),
    ".venv/bin/pytest suites --inventory inventories/examples/h100-racks.yaml": Step(
        "--collect-only -q", 0, "", "real nodes: collected, not connected to"
    ),
    ".venv/bin/pytest suites --inventory hosts.ini --nodes=@rack02 -k kernel -n 2": Step(
        "--collect-only -q", 0, "", "real nodes: collected, not connected to"
    ),
    ".venv/bin/nodegate run --inventory hosts.ini --nodes @rack02 -m reach --collect-only -q": (
        Step("", 0, "64/768 tests collected (704 deselected)")
    ),
    'scripts/test -m "not integration"': Step(
        "--collect-only -q tests/unit/test_cli.py", 0, "", "collects: the suite does not recurse"
    ),
    ".venv/bin/mypy && .venv/bin/ruff check plugins tests": Step("", 0, "All checks passed!"),
    ".venv/bin/python bench/bench_reach.py": Step(
        "--sizes 4 --subnet {subnet}", 0, "", "the smallest size, a fresh subnet"
    ),
    ".venv/bin/python bench/bench_ib_pairs.py": Step(
        "--sizes 4 --faults 1 --subnet {subnet}", 0, "", "the smallest size, a fresh subnet"
    ),
    # The history the runs above wrote (the workspace's reports/history.sqlite), after them.
    ".venv/bin/nodegate history nodes": Step("", 0, "nodes: last state, rejections"),
    ".venv/bin/nodegate history timeline gpu017": Step("", 0, "timeline of gpu017"),
    ".venv/bin/nodegate history series gpu001 ib_pairs.rail.bandwidth --component mlx5_3": Step(
        "", 0, "mlx5_3 port 1 (rail 3)"
    ),
    ".venv/bin/nodegate history yield": Step("", 0, "yield per run"),
    ".venv/bin/nodegate history mtbr --json": Step("", 0, '"node": "gpu001"'),
    ".venv/bin/nodegate history import reports/latest": Step("", 0, "replaced "),
    ".venv/bin/python bench/bench_history.py": Step(
        "--ingest-nodes 20 --runs 3 --nodes 8",
        0,
        "targets: ingest <= 10 s",
        "the smallest sizes (both backends: its own PostgreSQL server)",
    ),
    ".venv/bin/python bench/bench_traffic.py": Step(
        "--sizes 64 --flows 256", 0, "| 64 | 11 |", "the smallest size; no fleet is started"
    ),
    ".venv/bin/python bench/bench_report.py": Step(
        "--nodes 64", 0, "nodes (admitted / rejected)", "64 nodes, from the demo's run"
    ),
}


def readme_commands() -> list[str]:
    """The README's commands in order: its `sh` blocks' lines, then the "Two commands" table;
    a command shown twice gets `#2`."""
    text = (REPO / "README.md").read_text()
    found: list[str] = []
    two = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    found += re.findall(r"^\|[^|\n]+\| `([^`]+)` \|$", two, re.M)
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            cmd = re.sub(r"\s+#\s.*$", "", line).strip()
            if cmd:
                found.append(cmd)
    out: list[str] = []
    for cmd in found:
        out.append(cmd if cmd not in out else f"{cmd}#{out.count(cmd) + 1}")
    return out


def test_plan_holds_every_readme_command():
    assert set(readme_commands()) == set(PLAN)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    stamp = REPO / ".venv" / ".nodegate-installed"
    newest = max((REPO / f).stat().st_mtime for f in ("pyproject.toml", "setup.py"))
    if not stamp.is_file() or stamp.stat().st_mtime < newest:
        # scripts/test and scripts/demo run scripts/bootstrap, which would reinstall the
        # checkout's .venv from this workspace (an editable install pointing here).
        pytest.fail("run scripts/bootstrap first: .venv is older than pyproject.toml/setup.py")
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in LINKED:
        if (REPO / name).exists():
            (ws / name).symlink_to(REPO / name)
    (ws / "inv.yaml").symlink_to(ws / FLEET / "inventory.yaml")
    (ws / "hosts.ini").symlink_to(REPO / "inventories" / "examples" / "hosts.ini")
    return ws


def test_every_readme_command_works(
    workspace: Path, sshd_available: None, subnet: Callable[[], str]
) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")
    }
    readme = [c for c in readme_commands() if PLAN[c].why != COVERED_BY_WHEEL_TEST.why]
    # Every fleet command after `sim up`; the demo before the report bench, which reads its run.
    order = sorted(readme, key=lambda c: (_phase(c), readme.index(c)))
    failures = []
    try:
        for cmd in order:
            step = PLAN[cmd]
            if cmd.endswith("#2"):
                continue
            line = f"{cmd} {step.extra.format(subnet=subnet())}".strip()
            p = subprocess.run(
                ["bash", "-c", line], cwd=workspace, env=env, capture_output=True, text=True,
                timeout=600,
            )  # fmt: skip
            out = p.stdout + p.stderr
            if p.returncode != step.rc or (step.shows and step.shows not in out):
                failures.append(f"{line}: rc {p.returncode} (want {step.rc})\n{out[-2000:]}")
    finally:
        for fleet in (FLEET, f"{FLEET}-2"):
            if (workspace / fleet / "model.json").exists():
                subprocess.run(
                    [str(workspace / ".venv/bin/nodegate"), "sim", "stop", "--dir", fleet],
                    cwd=workspace, capture_output=True, timeout=120,
                )  # fmt: skip
    assert failures == []


def _phase(cmd: str) -> int:
    """0: the fleet comes up; 1: commands that use it; 2: it stops; 3: the rest."""
    if "sim up" in cmd:
        return 0
    if "sim stop" in cmd:
        return 2
    if "inv.yaml" in cmd or FLEET in cmd or cmd.startswith("ssh "):
        return 1
    if "bench_report" in cmd:
        return 4
    return 3

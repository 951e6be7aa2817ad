"""The issue's demo check, on both backends: `nodegate demo` run twice over a fleet whose
fault moved between the runs (gpu002 unreachable, then gpu003), and `nodegate history` shows
both runs, the node that recovered and the new offender."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import REPO, base_model

pytestmark = pytest.mark.integration

# The reach stage is this profile's whole admission policy: a `-m reach` run is complete.
PROFILE = """\
name: reach-only
description: generic-hgx-h100 admitted on its reach stage alone (a short demo)
extends: generic-hgx-h100
admission:
  require: {stages: [reach]}
"""


def nodegate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(REPO / "plugins")}
    return subprocess.run([sys.executable, "-m", "nodegate.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_two_demo_runs_show_the_recovered_node_and_the_new_offender(
    tmp_path: Path, sshd_available: None, subnet: Callable[[], str], history_url: str
) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "reach-only.yaml").write_text(PROFILE)
    # SQLite: the default file (reports/history.sqlite beside the runs); PostgreSQL: by URL.
    given = () if history_url.startswith("sqlite") else (f"--history={history_url}",)
    url = f"sqlite:///{tmp_path / 'reports' / 'history.sqlite'}" if not given else history_url
    run_ids = []
    for i, down in enumerate(("gpu002", "gpu003")):
        model = tmp_path / f"model-{i}.yaml"
        model.write_text(yaml.safe_dump(base_model(4, faults={down: ["unreachable"]})))
        p = nodegate(tmp_path, "demo", "--model", str(model), "--dir", str(tmp_path / f"f{i}"),
                     "--subnet", subnet(), "--", "-m", "reach", "--profiles-dir=profiles",
                     "--profile=reach-only", *given)  # fmt: skip
        assert p.returncode == 1, p.stdout + p.stderr
        (line,) = [ln for ln in p.stdout.splitlines() if " recorded in " in ln]
        run_ids.append(line.split()[2])
        assert line.endswith(f"recorded in {url.replace('%2F', '/')}: 32 verdicts, 0 measurements")
    q = nodegate(tmp_path, "history", "runs", "--json", "--history", url)
    runs = json.loads(q.stdout)
    assert [(r["run_id"], r["state"], r["admitted"], r["rejected"]) for r in runs] == [
        (run_ids[0], "complete", 3, 1), (run_ids[1], "complete", 3, 1)]  # fmt: skip
    q = nodegate(tmp_path, "history", "nodes", "--json", "--history", url)
    nodes = {n["node"]: n for n in json.loads(q.stdout)}
    assert {n: (e["state"], e["rejections"], e["last_rejected_run"]) for n, e in nodes.items()} == {
        "gpu001": ("admitted", 0, None),
        "gpu002": ("admitted", 1, run_ids[0]),  # recovered
        "gpu003": ("rejected", 1, run_ids[1]),  # the new offender
        "gpu004": ("admitted", 0, None),
    }
    assert nodes["gpu003"]["last_reason"].startswith("reach.ssh [ssh] FAIL: unreachable")
    table = nodegate(tmp_path, "history", "nodes", "--history", url).stdout
    assert "gpu002" in table and "gpu003" in table and "reach.ssh [ssh] FAIL" in table


def test_the_ab_mode_compares_with_the_last_complete_run_in_the_history(
    sim_fleet, tmp_path: Path, history_url: str
) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "reach-only.yaml").write_text(PROFILE)
    given = () if history_url.startswith("sqlite") else (f"--history={history_url}",)
    args = ("-m", "reach", f"--profiles-dir={tmp_path / 'profiles'}", "--profile=reach-only")
    missing = sim_fleet(base_model(4)).run(*args, *given, "--compare-to=history:last-complete")
    assert missing.rc == 4, missing.stdout
    assert "--compare-to history:last-complete: " in missing.stdout
    healthy = sim_fleet(base_model(4)).run(*args, *given)
    assert healthy.rc == 0, healthy.stdout
    older = sim_fleet(base_model(4, overrides={"gpu002": {"kernel": "5.15.0-91-generic"}}))
    run = older.run(*args, *given, "--compare-to=history:last-complete")
    assert run.rc == 7, run.stdout
    compare = json.loads((run.run_dir / "compare.json").read_text())
    base_id = healthy.admission["run_id"]
    assert compare["baseline"] == {"run_id": base_id, "dir": f"history:{base_id}"}
    assert {(c["scope"], c["check"], c["before"], c["after"]) for c in compare["changes"]
            if c["regression"] and c["kind"] == "fact"} == {
        ("gpu002", "reach.kernel.version", "5.15.0-105-generic", "5.15.0-91-generic")}  # fmt: skip
    assert f"compared with baseline {base_id} (history:{base_id}): 4 nodes" in run.stdout

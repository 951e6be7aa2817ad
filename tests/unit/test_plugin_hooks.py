"""The plugin as an operator runs it (pytest in a subprocess, no fleet needed): settings
errors are usage errors (exit 4), and nodegate's hooks reach plugins: a transport a plugin
builds is used, and the admission document is handed over once, on the controller."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nodegate.stages.registry import checks_by_id

REPO = Path(__file__).resolve().parents[2]
REACH_CHECKS = [
    "reach.ssh",
    "reach.os.release",
    "reach.kernel.version",
    "reach.kernel.uniform",
    "reach.driver.version",
    "reach.driver.uniform",
    "reach.ofed.version",
    "reach.ofed.uniform",
]
# generic-hgx-h100's admission policy: every check of its four stages
# The checks generic-hgx-h100's policy requires beyond reach (`roce: null`: not a RoCE SKU;
# `traffic: null`: no load criteria written for it).
OTHER_CHECKS = {c for c in checks_by_id() if not c.startswith(("roce.", "traffic."))} - set(
    REACH_CHECKS
)

INVENTORY = """\
version: 1
defaults: {profile: generic-hgx-h100}
nodes: {"n[1-2]": {}}
"""

# A site plugin: builds transport "fake" (every node unreachable) and records what it sees.
PROBE = """\
import json, os
from nodegate.core.values import NodeOutcome, Reach
from nodegate.transport.base import Transport

def _record(**event):
    with open(os.environ["NG_PROBE"], "a") as f:
        f.write(json.dumps(event, default=str) + "\\n")

class FakeTransport(Transport):
    name = "fake"

    async def _session(self, node, script_text, deadline_s):
        raise NotImplementedError

    async def run_node(self, node, stage, specs):
        out = NodeOutcome(node, Reach.UNREACHABLE, {}, "fake transport says no")
        return self.evidence.record(stage, out)

def pytest_nodegate_transport_names():
    return ["fake"]

def pytest_nodegate_make_transport(settings, nodes, evidence):
    _record(
        hook="make_transport",
        transport=settings.transport,
        fanout=settings.fanout,
        accept_new_hostkeys=settings.accept_new_hostkeys,
        nodes=[n.name for n in nodes],
    )
    if settings.transport == "fake":
        return FakeTransport(fanout=settings.fanout, evidence=evidence)
    return None

def pytest_nodegate_admission(doc, run_dir):
    _record(hook="admission", doc=doc, run_dir=str(run_dir))
"""


class Site:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.inventory = tmp / "inv.yaml"
        self.inventory.write_text(INVENTORY)
        (tmp / "ngprobe.py").write_text(PROBE)
        self.probe = tmp / "probe.jsonl"
        self.empty_bundle = tmp / "bundle"
        self.empty_bundle.mkdir()
        self.run_dir = tmp / "reports" / "r1"

    def pytest(self, *args: str, probe: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "suites"),
            f"--inventory={self.inventory}",
            f"--reports-dir={self.tmp / 'reports'}",
            "--run-id=r1",
            f"--rootdir={REPO}",
            "-p",
            "no:cacheprovider",
            "-q",
            *(["-p", "ngprobe"] if probe else []),
            *args,
        ]
        # this checkout's package, whichever one the interpreter has installed
        env = {
            "NG_PROBE": str(self.probe),
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO / "plugins"),
        }
        # 300 s: the -n 2 run usually takes 3-8 s, but was seen waiting 80-117 s with ~10 s of
        # CPU while other suites ran (cause not found yet); a deadline, not a duration goal.
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=300, cwd=self.tmp, env=env
        )

    def events(self, hook: str) -> list[dict]:
        if not self.probe.exists():
            return []
        lines = self.probe.read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["hook"] == hook]

    def admission(self) -> dict:
        return json.loads((self.run_dir / "admission.json").read_text())


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def usage_error(p: subprocess.CompletedProcess[str]) -> str:
    """The one error line pytest prints for a usage error (exit 4)."""
    assert p.returncode == 4, p.stdout + p.stderr
    return "\n".join(line for line in p.stderr.splitlines() if line.strip())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fanout", "0"], "--fanout: got '0', expected a whole number >= 1"),
        (["--fanout", "-1"], "--fanout: got '-1', expected a whole number >= 1"),
        (
            ["-o", "nodegate_fanout=abc"],
            "--fanout (from ini nodegate_fanout): got 'abc', expected a whole number >= 1",
        ),
        (
            ["-o", "nodegate_transport=bogus"],
            "--transport (from ini nodegate_transport): got 'bogus', "
            "expected one of local, replay, slurm, ssh",
        ),
        (
            ["--transport", "fake"],
            "--transport: got 'fake', expected one of local, replay, slurm, ssh",
        ),
        (
            ["--transport", "replay", "--replay", "no-such-bundle"],
            "--replay: got 'no-such-bundle', expected an existing directory "
            "(a capture bundle or a run's raw/)",
        ),
    ],
)
def test_bad_settings_are_usage_errors(site, args, message):
    p = site.pytest(*args, probe=False)
    assert usage_error(p) == f"ERROR: nodegate: {message}"
    assert not site.run_dir.exists()  # stopped before the run directory was made


def test_plugin_transport_names_are_known(site):
    p = site.pytest("--transport", "bogus")
    assert usage_error(p) == (
        "ERROR: nodegate: --transport: got 'bogus', expected one of fake, local, replay, slurm, ssh"
    )


@pytest.mark.parametrize(("ini", "expected"), [("false", False), ("Off", False), ("yes", True)])
def test_ini_accept_new_hostkeys_reaches_the_transport(site, ini, expected):
    p = site.pytest(
        "-o",
        f"nodegate_accept_new_hostkeys={ini}",
        "--transport=replay",
        f"--replay={site.empty_bundle}",
        "-m",
        "reach",
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert site.events("make_transport") == [
        {
            "hook": "make_transport",
            "transport": "replay",
            "fanout": 256,
            "accept_new_hostkeys": expected,
            "nodes": ["n1", "n2"],
        }
    ]


def test_a_plugin_transport_is_used(site):
    p = site.pytest("--transport", "fake", "--fanout", "3", "-m", "reach")
    assert p.returncode == 1, p.stdout + p.stderr
    assert site.events("make_transport") == [
        {
            "hook": "make_transport",
            "transport": "fake",
            "fanout": 3,
            "accept_new_hostkeys": False,
            "nodes": ["n1", "n2"],
        }
    ]
    doc = site.admission()
    assert doc["transport"] == "fake"
    for node in ("n1", "n2"):
        reasons = {(r["check"], r["status"], r["message"]) for r in doc["nodes"][node]["reasons"]}
        assert ("reach.ssh", "fail", "unreachable: fake transport says no") in reasons
        assert {c for c, s, _ in reasons if s != "out_of_scope"} == set(REACH_CHECKS)
        # -m reach: the profile's other checks did not run (#13: a diagnostic run)
        assert {c for c, s, _ in reasons if s == "out_of_scope"} == OTHER_CHECKS
    raw = json.loads((site.run_dir / "raw" / "n1" / "reach.json").read_text())
    assert (raw["transport"], raw["reach"], raw["detail"]) == (
        "fake",
        "unreachable",
        "fake transport says no",
    )


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_admission_hook_called_once_with_the_written_document(site, xdist):
    # -m reach is a diagnostic run: only --allow-incomplete lets it move reports/latest (#13)
    p = site.pytest(
        "--transport=replay", f"--replay={site.empty_bundle}", "-m", "reach", "--allow-incomplete",
        *xdist,
    )  # fmt: skip
    assert p.returncode == 1, p.stdout + p.stderr
    calls = site.events("admission")
    assert len(calls) == 1
    assert calls[0]["doc"] == site.admission()
    assert calls[0]["run_dir"] == str(site.run_dir.resolve())
    assert calls[0]["doc"]["checks"] == sorted(REACH_CHECKS)
    # the built-in consumers of the same hook: the terminal section and reports/latest, which
    # a replay leaves where it was (#21: it re-judges a bundle, not the fleet as it is now)
    assert "nodegate admission" in p.stdout
    assert "REPLAY run (judged from a captured bundle): reports/latest does not follow it" in (
        p.stdout
    )
    assert not (site.tmp / "reports" / "latest").exists()

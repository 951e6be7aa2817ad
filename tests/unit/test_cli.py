"""The `nodegate` command line: run passes everything to pytest, capture uses the settings and
the one transport factory (replay included), every option says what it is for."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from nodegate import cli
from nodegate.core import bundled
from nodegate.core.errors import ConfigError
from nodegate.core.settings import Settings
from nodegate.inventory import load_inventory
from nodegate.session.transports import builtin_hook, make_transport
from nodegate.transport.evidence import EvidenceWriter, open_evidence
from nodegate.transport.local import LocalTransport, ReplayTransport
from nodegate.transport.ssh import SSHTransport

INVENTORY = """\
version: 1
defaults: {profile: generic-hgx-h100}
nodes: {"n[1-2]": {}}
"""
REWRITE = ["-W", "ignore::pytest.PytestAssertRewriteWarning"]


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    p = tmp_path / "inv.yaml"
    p.write_text(INVENTORY)
    return p


def test_run_passes_every_argument_to_pytest(monkeypatch):
    seen: list[list[str]] = []
    monkeypatch.setattr(pytest, "main", lambda args: seen.append(args) or 5)
    argv = ["--inventory", "x.yaml", "-m", "reach", "--nodes", "gpu[1-2]", "-k", "not x", "--"]
    assert cli.main(["run", *argv]) == 5
    assert seen == [[*bundled.suite_args(), *REWRITE, *argv]]


def test_run_options_reach_the_plugin(inv, tmp_path):
    bundle = tmp_path / "empty"
    bundle.mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "nodegate.cli", "run", "--inventory", str(inv), "-m", "reach"]
        + ["--transport", "replay", "--replay", str(bundle), "--nodes", "n2"]
        + ["--reports-dir", str(tmp_path / "reports"), "--run-id", "r", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads((tmp_path / "reports" / "r" / "admission.json").read_text())
    assert (doc["transport"], list(doc["nodes"])) == ("replay", ["n2"])
    assert doc["stages"] == ["reach"]


def test_capture_replays_a_bundle_into_another(inv, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    common = ["capture", "--inventory", str(inv), "--stages", "reach"]
    assert cli.main([*common, "--transport", "local", "--nodes", "n1", "--out", str(first)]) == 0
    capsys.readouterr()
    rc = cli.main([*common, "--transport", "replay", "--replay", str(first), "--out", str(second)])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1  # n2 is not in the first bundle
    assert out == [
        "n1 reach: ok 4 commands ",
        f"n2 reach: error 0 commands no capture of stage 'reach' for n2 in {first}",
        f"bundle: {second}  (replay: pytest suites --inventory {inv} "
        f"--transport replay --replay {second})",
    ]
    # A bundle's documents are compressed (as a run's admitted nodes'), read by either name.
    assert sorted(p.name for p in (first / "n1").iterdir()) == ["reach.json.gz"]
    a = open_evidence(first / "n1" / "reach.json")
    b = open_evidence(second / "n1" / "reach.json")
    assert (a["transport"], b["transport"]) == ("local", "replay")
    assert b["commands"] == a["commands"]
    assert open_evidence(second / "n2" / "reach.json")["reach"] == "error"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--transport", "replay"],
            "--transport replay needs --replay DIR (a capture bundle or a run's raw/)",
        ),
        (
            ["--transport", "bogus"],
            "--transport: got 'bogus', expected one of local, replay, slurm, ssh",
        ),
        (["--fanout", "0"], "--fanout: got '0', expected a whole number >= 1"),
        (
            ["--connect-timeout", "-1"],
            "--connect-timeout: got '-1', expected a number of seconds > 0",
        ),
        (
            ["--stages", "reach,bogus"],
            "--stages: unknown stage 'bogus'; known: reach, pcie_gpu, gpu_load, hca, fabric, roce, "
            "ib_pairs, traffic, nccl",
        ),
        (["--stages", "ib_pairs"], "stage ib_pairs is active; only passive stages can be captured"),
    ],
)
def test_capture_usage_errors(inv, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    assert cli.main(["capture", "--inventory", str(inv), "--out", str(out), *args]) == 4
    assert capsys.readouterr().err == f"nodegate: {message}\n"
    assert not out.exists()


def test_every_subcommand_option_has_help():
    parser = cli._parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = [
        f"{name} {a.dest}"
        for name, p in sub.choices.items()
        for a in p._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert missing == []
    assert sorted(sub.choices) == ["capture", "demo", "fabric", "history", "run", "sim"]


def test_one_factory_builds_the_builtin_transports(inv, tmp_path):
    hook, nodes = builtin_hook(), list(load_inventory(inv).nodes)
    ev = EvidenceWriter(tmp_path / "raw", "x")
    ssh = make_transport(hook, Settings(fanout=7, connect_timeout_s=2.0), nodes, ev)
    assert isinstance(ssh, SSHTransport) and ssh.fanout == 7
    assert [t.connect_timeout_s for t in ssh.targets.values()] == [2.0, 2.0]
    local = make_transport(hook, Settings(transport="local", fanout=3), nodes, ev)
    assert type(local) is LocalTransport and local.fanout == 3 and local.evidence is ev
    replay = make_transport(hook, Settings(transport="replay", replay_dir=tmp_path), nodes, ev)
    assert isinstance(replay, ReplayTransport) and replay.bundle == tmp_path
    with pytest.raises(ConfigError) as exc:
        make_transport(hook, Settings(transport="carrier-pigeon"), nodes, ev)
    assert str(exc.value) == (
        "--transport: got 'carrier-pigeon', expected one of local, replay, slurm, ssh"
    )


class FakeFleet:
    """Stands in for a started simulated fleet (the demo's fleet calls only)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def start(self) -> None:
        pass

    def status(self) -> object:
        return argparse.Namespace(nodes=2, running=1, listening=2)

    def stop(self) -> int:
        return 1


def test_an_interrupted_demo_prints_its_own_run_directory(tmp_path, monkeypatch, capsys):
    # reports/latest stays on the last complete run when a run is interrupted: the demo
    # names the run it started, not that one.
    import nodegate.sim.fleet

    monkeypatch.chdir(tmp_path)
    reports = bundled.default_reports_dir(tmp_path)
    (reports / "old").mkdir(parents=True)
    (reports / "latest").symlink_to("old")
    this_run = (reports / "new").resolve()
    monkeypatch.setattr(nodegate.sim.fleet, "build_fleet", lambda m, root, subnet: FakeFleet(root))

    def interrupted(args: list[str], plugins: tuple[object, ...] = ()) -> int:
        for p in plugins:
            p.pytest_nodegate_admission(doc={"interrupted": "ib_pairs"}, run_dir=this_run)
        return 2

    monkeypatch.setattr(pytest, "main", interrupted)
    assert cli.main(["demo", "--dir", str(tmp_path / "fleet")]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        f"reports: {this_run}  (report.html, admission.json, junit.xml, verdicts.jsonl.gz, raw/)",
        "exit code 2: interrupted: no node admitted",
    ]


def test_run_joins_a_lone_group_to_nodes(monkeypatch):
    # pytest reads a lone `@rack02` as a file of arguments: `run` hands it over as --nodes=@rack02
    seen: list[list[str]] = []
    monkeypatch.setattr(pytest, "main", lambda args: seen.append(args) or 0)
    argv = ["--nodes", "@rack02", "-k", "kernel", "--nodes", "gpu1", "--", "--nodes", "@x"]
    assert cli.main(["run", *argv]) == 0
    assert seen == [
        [*bundled.suite_args(), *REWRITE, "--nodes=@rack02", "-k", "kernel", "--nodes", "gpu1"]
        + ["--", "--nodes", "@x"]
    ]


def test_run_selects_a_group_given_with_a_space(tmp_path):
    hosts = bundled.REPO / "inventories" / "examples" / "hosts.ini"
    p = subprocess.run(
        [sys.executable, "-m", "nodegate.cli", "run", "--inventory", str(hosts), "--nodes"]
        + ["@rack02", "-m", "reach", "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    ids = [ln for ln in p.stdout.splitlines() if "::" in ln]
    # rack02 is gpu[09-16] (hosts.ini), 8 reach checks each
    assert sorted({i.rpartition("[")[2][:-1] for i in ids}) == [f"gpu{i:02d}" for i in range(9, 17)]
    assert len(ids) == 64


def test_demo_says_what_its_exit_code_means(tmp_path, monkeypatch, capsys):
    import nodegate.sim.fleet

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(nodegate.sim.fleet, "build_fleet", lambda m, root, subnet: FakeFleet(root))
    monkeypatch.setattr(pytest, "main", lambda args, plugins=(): 1)
    assert cli.main(["demo", "--dir", str(tmp_path / "fleet")]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "exit code 1: some nodes rejected, as this demo intends: its fleet has injected faults"
    )


def test_sim_status_says_stopped_and_exits_1_and_a_missing_fleet_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#21: a stopped fleet's status was exit 3 (internal error) and a JSON dump."""
    model = tmp_path / "m.yaml"
    model.write_text("name: t\nprofile: generic-hgx-h100\nnodes: gpu[001-002]\n")
    fleet = tmp_path / "fleet"
    assert cli.main(["sim", "build", "--model", str(model), "--dir", str(fleet)]) == 0
    capsys.readouterr()
    assert cli.main(["sim", "status", "--dir", str(fleet)]) == 1
    assert capsys.readouterr().out == (
        f"stopped: 0 of 1 sshd daemon up ({fleet}); start it: nodegate sim start --dir {fleet}\n"
    )
    assert cli.main(["sim", "status", "--dir", str(tmp_path / "none")]) == 4
    assert capsys.readouterr().err == (
        f"nodegate: sim status: no fleet built at {tmp_path / 'none'} "
        "(nodegate sim build --model M --dir DIR)\n"
    )

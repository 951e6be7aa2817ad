"""SSH paths an operator relies on: ProxyJump through ssh_config, host-key policy, capture."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.integration.conftest import REPO, base_model

pytestmark = pytest.mark.integration


def test_proxyjump_through_ssh_config(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(4))
    root = fleet.fleet.root
    cfg = (root / "ssh_config").read_text()
    # Every node but the bastion is reached through it, as behind a real jump host.
    cfg = cfg.replace("Host *\n", "Host gpu* !gpu001\n  ProxyJump gpu001\n\nHost *\n")
    (tmp_path / "jump_config").write_text(cfg)
    inv = yaml.safe_load(fleet.inventory.read_text())
    inv["defaults"]["ssh"]["ssh_config"] = str(tmp_path / "jump_config")
    (tmp_path / "jump.yaml").write_text(yaml.safe_dump(inv))
    run = fleet.run(inventory=tmp_path / "jump.yaml")
    assert run.rc == 0, run.stdout
    # 4 node connections + 1 to the bastion, shared by the 3 tunnelled nodes.
    assert run.verdicts["connections"] == 5
    # the same config works for plain OpenSSH
    p = subprocess.run(
        ["ssh", "-F", str(tmp_path / "jump_config"), "gpu003", "uname -r"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.stdout.strip() == "5.15.0-105-generic", p.stderr


def test_unknown_host_key_rejected_unless_accept_new(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(3))
    kh = tmp_path / "empty_known_hosts"
    kh.write_text("")
    inv = yaml.safe_load(fleet.inventory.read_text())
    inv["defaults"]["ssh"]["known_hosts"] = str(kh)
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    strict = fleet.run(inventory=tmp_path / "inv.yaml")
    assert strict.rc == 1
    assert {
        r["observed"] for rs in strict.rejected().values() for r in rs if r["check"] == "reach.ssh"
    } == {"hostkey_mismatch"}
    assert len(strict.rejected()) == 3
    accepted = fleet.run("--accept-new-hostkeys", inventory=tmp_path / "inv.yaml")
    assert accepted.rc == 0, accepted.stdout
    assert len(kh.read_text().splitlines()) == 3  # learned, like OpenSSH accept-new
    again = fleet.run(inventory=tmp_path / "inv.yaml")  # now known: strict passes
    assert again.rc == 0


def test_capture_then_replay(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(3, overrides={"gpu003": {"kernel": "6.8.0-40-generic"}}))
    bundle = tmp_path / "bundle"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodegate.cli",
            "capture",
            "--inventory",
            str(fleet.inventory),
            "--stages",
            "reach",
            "--out",
            str(bundle),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((bundle / "gpu003" / "reach.json").read_text())["commands"]["kernel"]
    assert doc["cmd"] == "uname -r" and doc["stdout"] == "6.8.0-40-generic\n"
    fleet.fleet.stop()
    # the bundle holds the reach stage only; other stages' commands are not in it
    run = fleet.run("--transport", "replay", "--replay", str(bundle), "-m", "reach")
    assert run.rc == 1
    assert list(run.rejected()) == ["gpu003"]

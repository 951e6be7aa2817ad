"""SSH paths an operator relies on: ProxyJump through ssh_config, host-key policy, capture."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from nodegate.transport.evidence import open_evidence

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
    } == {"hostkey_unknown"}
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
    doc = open_evidence(bundle / "gpu003" / "reach.json")["commands"]["kernel"]
    assert doc["cmd"] == "uname -r" and doc["stdout"] == "6.8.0-40-generic\n"
    fleet.fleet.stop()
    # the bundle holds the reach stage only; other stages' commands are not in it
    run = fleet.run("--transport", "replay", "--replay", str(bundle), "-m", "reach")
    assert run.rc == 1
    assert list(run.rejected()) == ["gpu003"]


def _inventory_with(fleet, tmp_path, ssh_config: str, known_hosts: str, name: str):
    (tmp_path / f"{name}_config").write_text(ssh_config)
    (tmp_path / f"{name}_known_hosts").write_text(known_hosts)
    inv = yaml.safe_load(fleet.inventory.read_text())
    inv["defaults"]["ssh"]["ssh_config"] = str(tmp_path / f"{name}_config")
    inv["defaults"]["ssh"]["known_hosts"] = str(tmp_path / f"{name}_known_hosts")
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(inv))
    return tmp_path / f"{name}.yaml", tmp_path / f"{name}_known_hosts"


def _ssh_reasons(run) -> dict[str, tuple[str, str, str]]:
    return {
        n: next(
            (r["observed"], r["message"], r["remediation"]) for r in rs if r["check"] == "reach.ssh"
        )
        for n, rs in run.rejected().items()
    }


def test_unknown_and_changed_host_keys_are_told_apart(sim_fleet, tmp_path):
    fleet = sim_fleet(
        base_model(3, faults={"gpu002": ["hostkey_unknown"], "gpu003": ["hostkey_changed"]})
    )
    addr = {d["name"]: d["address"] for d in fleet.model()["nodes"]}
    kh = fleet.fleet.root / "known_hosts"
    strict = fleet.run("-m", "reach")
    where = {n: f"root@{addr[n]}:2222" for n in ("gpu002", "gpu003")}
    assert _ssh_reasons(strict) == {
        "gpu002": (
            "hostkey_unknown",
            f"hostkey_unknown: host key of {where['gpu002']} is not in {kh} (as {addr['gpu002']}):"
            " verify it and add it, or run with --accept-new-hostkeys",
            "verify the node's host key out of band and add it to known_hosts (or run once with"
            " --accept-new-hostkeys)",
        ),
        "gpu003": (
            "hostkey_changed",
            f"hostkey_changed: host key of {where['gpu003']} differs from the one in {kh} for "
            f"{addr['gpu003']}: re-imaged node or an attack; verify it, then replace the entry "
            "(ssh-keygen -R); no option accepts a changed key",
            "find out why the node's host key changed (re-imaged, or someone in the path); verify"
            " the new key, then replace its known_hosts entry (ssh-keygen -R)",
        ),
    }
    before = kh.read_text()
    accept = fleet.run("-m", "reach", "--accept-new-hostkeys")
    assert list(_ssh_reasons(accept)) == ["gpu003"]  # the unknown one is learned, never the other
    added = kh.read_text()[len(before) :].splitlines()
    assert len(added) == 1 and added[0].startswith(f"[{addr['gpu002']}]:2222 ssh-ed25519 ")


def test_host_key_alias_is_honoured_and_a_changed_key_never_accepted(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(2))
    root = fleet.fleet.root
    cfg = (root / "ssh_config").read_text()
    for n in ("gpu001", "gpu002"):  # HostKeyAlias takes no %-tokens (ssh_config(5))
        cfg = cfg.replace(f"Host {n}\n", f"Host {n}\n  HostKeyAlias {n}.hosts.example\n")
    # known_hosts keyed only by the alias, as `ssh -o HostKeyAlias=...` would have recorded it
    keys = {line.split()[0].split(",")[0].strip("[]").split("]")[0]: line.split(None, 1)[1]
            for line in (root / "known_hosts").read_text().splitlines()}  # fmt: skip
    aliased = "".join(f"{n}.hosts.example {k}\n" for n, k in keys.items())
    inv, kh = _inventory_with(fleet, tmp_path, cfg, aliased, "alias")
    strict = fleet.run("-m", "reach", inventory=inv)
    # A -m reach run rejects nobody here: exit 6, its nodes not qualified (a diagnostic run).
    assert (strict.rc, strict.rejected()) == (6, {}), strict.stdout
    imposter = (root / "keys" / "imposter.pub").read_text().split()[:2]
    # (one sshd serves 16 nodes with one host key: change only gpu002's line)
    changed = aliased.replace(f"gpu002.hosts.example {keys['gpu002']}",
                              f"gpu002.hosts.example {' '.join(imposter)}")  # fmt: skip
    inv, kh = _inventory_with(fleet, tmp_path, cfg, changed, "alias_changed")
    run = fleet.run("-m", "reach", "--accept-new-hostkeys", inventory=inv)
    assert {n: r[0] for n, r in _ssh_reasons(run).items()} == {"gpu002": "hostkey_changed"}
    assert kh.read_text() == changed  # nothing appended


def test_hash_known_hosts_writes_hashed_names_that_verify(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(2))
    cfg = (
        (fleet.fleet.root / "ssh_config")
        .read_text()
        .replace("Host *\n", "Host *\n  HashKnownHosts yes\n")
    )
    inv, kh = _inventory_with(fleet, tmp_path, cfg, "", "hashed")
    assert fleet.run("-m", "reach", "--accept-new-hostkeys", inventory=inv).rc == 6  # none rejected
    lines = kh.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("|1|") for line in lines)
    assert fleet.run("-m", "reach", inventory=inv).rc == 6  # strict: the hashed entries match


def test_dead_jump_host_is_named_once(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(4, faults={"gpu001": ["unreachable"]}))
    root = fleet.fleet.root
    bastion = next(d["address"] for d in fleet.model()["nodes"] if d["name"] == "gpu001")
    cfg = (root / "ssh_config").read_text()
    cfg = cfg.replace("Host *\n", "Host gpu* !gpu001\n  ProxyJump gpu001\n\nHost *\n")
    inv, _ = _inventory_with(fleet, tmp_path, cfg, (root / "known_hosts").read_text(), "jump")
    run = fleet.run("-m", "reach", inventory=inv)
    why = f"connection to root@{bastion}:2222 refused"
    assert _ssh_reasons(run) == {
        "gpu001": ("unreachable", f"unreachable: {why}", REMEDY),
        **{
            n: (
                "unreachable",
                f"unreachable: unreachable via jump host root@{bastion}:2222: {why}",
                REMEDY,
            )  # fmt: skip
            for n in ("gpu002", "gpu003", "gpu004")
        },
    }


REMEDY = "check the node's power, network and sshd; then requalify"

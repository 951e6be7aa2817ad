"""accept-new: a learned key is trusted for the rest of the run without re-reading known_hosts
(one read per file, whatever the number of new nodes), plain and hashed."""

from __future__ import annotations

from pathlib import Path

import asyncssh
import pytest
from nodegate.inventory.loader import load_inventory
from nodegate.transport.ssh import SSHTransport


@pytest.mark.parametrize("hashed", [False, True])
def test_learned_keys_are_trusted_in_this_run_and_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hashed: bool
) -> None:
    kh = tmp_path / "known_hosts"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host *\n  UserKnownHostsFile {kh}\n  HashKnownHosts {'yes' if hashed else 'no'}\n"
    )
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "version: 1\ndefaults:\n  profile: generic-hgx-h100\n"
        f"  ssh: {{user: root, ssh_config: {cfg}}}\n"
        "nodes:\n  gpu001: {ssh: {host: 127.0.0.1, port: 2201}}\n"
        "  gpu002: {ssh: {host: 127.0.0.2}}\n"
    )
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    kh.write_text(f"gpu999 {other}")  # someone else's line: the file is read, once
    t = SSHTransport(load_inventory(inv).nodes)
    reads: list[object] = []
    real = asyncssh.read_known_hosts
    monkeypatch.setattr(asyncssh, "read_known_hosts", lambda p: reads.append(p) or real(p))
    a, b = t.targets["gpu001"], t.targets["gpu002"]
    ka = asyncssh.generate_private_key("ssh-ed25519")
    kb = asyncssh.generate_private_key("ssh-ed25519")
    assert not t.known_entries(a, "127.0.0.1")  # the one read
    t.learn_hostkey(a, ka)
    assert not t.known_entries(b, "127.0.0.2")
    t.learn_hostkey(b, kb)
    got_a = t.trusted_keys(a, "127.0.0.1")[0]
    got_b = t.trusted_keys(b, "127.0.0.2")[0]
    assert [k.public_data for k in got_a] == [ka.public_data]
    assert [k.public_data for k in got_b] == [kb.public_data]
    assert len(reads) == 1
    lines = kh.read_text().splitlines()[1:]
    assert len(lines) == 2
    names = [line.split()[0] for line in lines]
    if hashed:
        assert all(n.startswith("|1|") for n in names)
    else:
        assert names == ["[127.0.0.1]:2201", "127.0.0.2"]
    # what a new run reads: the same trust
    again = SSHTransport(load_inventory(inv).nodes)
    assert [k.public_data for k in again.trusted_keys(again.targets["gpu001"], "127.0.0.1")[0]] \
        == [ka.public_data]  # fmt: skip

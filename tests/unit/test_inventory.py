"""nodegate YAML inventories: examples, precedence, merging, groups, errors, format detection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError
from nodegate.inventory import FrozenMap, Inventory, Node, SSHSettings, load_inventory, natural_key

EXAMPLES = Path(__file__).resolve().parents[2] / "inventories" / "examples"


def write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load_text(tmp_path: Path, text: str, name: str = "inv.yaml") -> Inventory:
    return load_inventory(write(tmp_path, text, name))


def fails(tmp_path: Path, text: str, *needles: str, name: str = "inv.yaml") -> str:
    """Load must raise ConfigError naming the file and containing every needle."""
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text, name)
    message = str(info.value)
    assert message.startswith(str(tmp_path / name)), message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


# --- the shipped example ----------------------------------------------------------------------


def test_example_nodegate_inventory() -> None:
    inv = load_inventory(EXAMPLES / "h100-racks.yaml")
    assert inv.format == "nodegate"
    assert inv.names() == tuple(f"gpu{i:03d}" for i in range(1, 33))
    assert set(inv.groups) == {
        "all", "canary", "h100", "leaf01", "leaf02", "leaf03", "leaf04", "rack01", "rack02"
    }  # fmt: skip
    assert inv.groups["rack02"] == tuple(f"gpu{i:03d}" for i in range(17, 33))
    assert inv.groups["all"] == inv.names()
    n1 = inv.node("gpu001")
    assert n1.groups == ("all", "canary", "h100", "leaf01", "rack01")
    assert dict(n1.labels) == {"rack": "r01", "leaf": "leaf01", "rail_group": "rg1"}
    assert n1.profile == "nd-h100-v5"  # group h100 overrides defaults.profile
    assert n1.ssh == SSHSettings(
        host=None,
        user="root",
        port=22,
        identity_file=str(Path("~/.ssh/id_ed25519").expanduser()),
        ssh_config=str(EXAMPLES / "ssh_config"),
        known_hosts=str(EXAMPLES / "known_hosts"),
        connect_timeout_s=10.0,
        proxy_jump="bastion",
    )
    n17 = inv.node("gpu017")
    assert (n17.ssh.host, n17.ssh.port, n17.ssh.user) == ("10.0.0.17", 2222, "root")
    assert dict(n17.labels) == {
        "leaf": "leaf03", "note": "replaced-board", "rack": "r02", "rail_group": "rg2"
    }  # fmt: skip


def test_nodes_are_frozen_and_hashable() -> None:
    inv = load_inventory(EXAMPLES / "h100-racks.yaml")
    node = inv.node("gpu005")
    assert isinstance(node, Node) and isinstance(node.labels, FrozenMap)
    assert len({node, inv.node("gpu005"), inv.node("gpu006")}) == 2
    with pytest.raises(TypeError):
        node.labels["rack"] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        node.name = "x"  # type: ignore[misc]
    assert load_inventory(EXAMPLES / "h100-racks.yaml") == inv


def test_node_lookup_error_names_node_and_file() -> None:
    inv = load_inventory(EXAMPLES / "h100-racks.yaml")
    with pytest.raises(ConfigError, match=r"h100-racks\.yaml: node 'gpu999' is not in"):
        inv.node("gpu999")


# --- merging and precedence ------------------------------------------------------------------

BASE = """\
version: 1
defaults:
  profile: generic
  labels: {site: s1}
  ssh: {user: root, port: 22, connect_timeout: 5}
nodes:
  "n[1-4]":
  n2: {ssh: {port: 2222}}
  n3: {profile: special, labels: {note: x}}
groups:
  a: {nodes: "n[1-2]", labels: {rack: r1}, ssh: {user: ops}}
  b: {nodes: "n[3-4]", labels: {rack: r2}, profile: from-b}
"""


def test_precedence_defaults_groups_nodes(tmp_path: Path) -> None:
    inv = load_text(tmp_path, BASE)
    n1, n2, n3, n4 = inv.nodes
    assert (n1.ssh.user, n1.ssh.port, n1.ssh.connect_timeout_s) == ("ops", 22, 5.0)
    assert (n2.ssh.user, n2.ssh.port) == ("ops", 2222)  # ssh merges key by key
    assert (n3.profile, n4.profile, n1.profile) == ("special", "from-b", "generic")
    assert dict(n3.labels) == {"note": "x", "rack": "r2", "site": "s1"}
    assert n1.groups == ("a", "all")


def test_natural_order(tmp_path: Path) -> None:
    inv = load_text(tmp_path, 'version: 1\nnodes:\n  "gpu[9-11]": {}\n  gpu2: {}\n  a1: {}\n')
    assert inv.names() == ("a1", "gpu2", "gpu9", "gpu10", "gpu11")
    assert sorted(["gpu10", "gpu2"], key=natural_key) == ["gpu2", "gpu10"]


def test_node_in_two_entries_agreeing_is_fine(tmp_path: Path) -> None:
    inv = load_text(
        tmp_path,
        'version: 1\nnodes:\n  "n[1-2]": {ssh: {port: 2}}\n  n1: {ssh: {port: 2, user: u}}\n',
    )
    assert (inv.node("n1").ssh.port, inv.node("n1").ssh.user) == (2, "u")


def test_node_defined_twice_conflicting(tmp_path: Path) -> None:
    fails(
        tmp_path,
        'version: 1\nnodes:\n  "n[1-2]": {ssh: {port: 22}}\n  n1: {ssh: {port: 2222}}\n',
        "nodes.n1.ssh.port",
        "node n1",
        "nodes.n[1-2]",
        "2222",
    )


def test_two_groups_conflicting_profile_names_both(tmp_path: Path) -> None:
    fails(
        tmp_path,
        "version: 1\nnodes: {n1: {}}\n"
        "groups:\n  a100: {nodes: n1, profile: p-a}\n  h100: {nodes: n1, profile: p-h}\n",
        "groups.a100",
        "groups.h100",
        "profile",
    )


def test_two_groups_conflicting_label_names_both(tmp_path: Path) -> None:
    fails(
        tmp_path,
        "version: 1\nnodes: {n1: {}}\n"
        "groups:\n  r1: {nodes: n1, labels: {rack: r1}}\n  r2: {nodes: n1, labels: {rack: r2}}\n",
        "groups.r1",
        "groups.r2",
        "labels.rack",
    )


def test_group_references_and_operators(tmp_path: Path) -> None:
    inv = load_text(
        tmp_path,
        'version: 1\nnodes: {"n[1-6]": }\ngroups:\n'
        '  r1: {nodes: "n[1-3]"}\n  r2: {nodes: "n[4-6]"}\n'
        '  both: {nodes: "@r1,@r2!n5"}\n  rest: {nodes: "@all!@both"}\n'
        '  odd: {nodes: "n[1-6/2]"}\n',
    )
    assert inv.groups["both"] == ("n1", "n2", "n3", "n4", "n6")
    assert inv.groups["rest"] == ("n5",)
    assert inv.groups["odd"] == ("n1", "n3", "n5")


@pytest.mark.parametrize(
    ("groups", "needles"),
    [
        ('  g: {nodes: "n[1-3]"}', ("groups.g.nodes", "n3", "not defined under nodes")),
        ('  g: {nodes: "@nope"}', ("groups.g.nodes", "unknown group '@nope'")),
        ('  g: {nodes: "@h"}\n  h: {nodes: "@g"}', ("group membership loop", "g -> h -> g")),
        ("  all: {nodes: n1}", ("groups.all", "implicit")),
        ('  g: {nodes: "n[1-"}', ("groups.g.nodes", "bad nodeset expression")),
        ("  g: {}", ("groups.g", "missing required key 'nodes'")),
        ("  bad name: {nodes: n1}", ("groups", "invalid name 'bad name'")),
    ],
    ids=[
        "unknown-node",
        "unknown-group",
        "loop",
        "all-reserved",
        "bad-expression",
        "no-nodes-key",
        "bad-name",
    ],
)
def test_group_errors(tmp_path: Path, groups: str, needles: tuple[str, ...]) -> None:
    fails(tmp_path, f'version: 1\nnodes: {{"n[1-2]": }}\ngroups:\n{groups}\n', *needles)


def test_paths_resolved_against_inventory_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cfg").write_text("Host *\n  User u\n")
    inv = load_text(
        tmp_path,
        "version: 1\ndefaults:\n  ssh: {identity_file: ~/.ssh/k, ssh_config: sub/cfg,"
        " known_hosts: ../kh}\nnodes: {n1: }\n",
    )
    ssh = inv.node("n1").ssh
    assert ssh.identity_file == str(tmp_path / "home" / ".ssh" / "k")
    assert ssh.ssh_config == str(tmp_path / "sub" / "cfg")
    assert ssh.known_hosts == str(tmp_path.parent / "kh")


def test_proxy_jump_none_overrides_default(tmp_path: Path) -> None:
    inv = load_text(
        tmp_path,
        "version: 1\ndefaults: {ssh: {proxy_jump: 'ops@bastion:2222,hop2'}}\n"
        "nodes:\n  n1:\n  bastion: {ssh: {proxy_jump: none}}\n",
    )
    assert inv.node("n1").ssh.proxy_jump == "ops@bastion:2222,hop2"
    assert inv.node("bastion").ssh.proxy_jump == "none"


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            'version: 1\nnodes:\n  "gpu[001-004]": {ssh: {port: 70000}}\n',
            ("nodes.gpu[001-004].ssh.port", "70000 out of range", "1..65535"),
        ),
        (
            'version: 1\nnodes:\n  "gpu[001-004]": {ssh: {port: "22"}}\n',
            ("nodes.gpu[001-004].ssh.port", "expected an integer", "'22'"),
        ),
        ("version: 1\nnodes: {n1: {ssh: {prot: 22}}}\n", ("nodes.n1.ssh.prot", "unknown key")),
        ("version: 1\nnodez: {}\nnodes: {n1: }\n", ("nodez", "unknown key", "expected one of")),
        ("version: 1\nnodes: {n1: {labels: {rack: 1}}}\n", ("labels.rack", "quote it")),
        (
            "version: 1\nnodes: {n1: {ssh: {connect_timeout: 0}}}\n",
            ("connect_timeout", "greater than 0"),
        ),
        ("version: 2\nnodes: {n1: }\n", ("version", "unsupported value 2")),
        ("nodes: {n1: }\n", ("missing required key 'version'",)),
        ("version: 1\nnodes: {}\n", ("nodes", "empty inventory")),
        ("version: 1\nnodes: {n1: {ssh: {user: '-oProxyCommand=x'}}}\n", ("ssh.user", "one word")),
        ("version: 1\nnodes: {n1: {ssh: {proxy_jump: 'a b'}}}\n", ("ssh.proxy_jump",)),
        ("version: 1\nnodes: {n1: {ssh: {port: true}}}\n", ("ssh.port", "a boolean")),
        ("version: 1\nnodes:\n  01: {}\n", ("nodes.1", "is a number", "quote it")),
        ("version: 1\nnodes:\n  n1: {}\n  n1: {}\n", ("line 4", "duplicate key 'n1'", "line 3")),
        ("version: 1\nnodes:\n  n1: {ssh: [\n", ("line 4", "YAML syntax error")),
        ('version: 1\nnodes:\n  "gpu[1-": {}\n', ("nodes.gpu[1-", "bad nodeset expression")),
        ('version: 1\nnodes:\n  "gpu[01:32]": {}\n', ("gpu[01:32]", "Ansible syntax")),
        ('version: 1\nnodes:\n  "gpu/1": {}\n', ("nodes.gpu/1", "invalid node name")),
        ('version: 1\nnodes:\n  "@rack": {}\n', ("nodes.@rack", "put @groups under groups")),
    ],
    ids=[
        "port-range",
        "port-string",
        "unknown-ssh-key",
        "unknown-top-key",
        "label-number",
        "timeout-zero",
        "version-2",
        "no-version",
        "no-nodes",
        "user-option",
        "proxy-jump",
        "port-bool",
        "int-key",
        "duplicate-key",
        "yaml-syntax",
        "bad-hostlist",
        "ansible-range",
        "bad-node-name",
        "group-as-node",
    ],
)
def test_errors_name_file_and_key_path(tmp_path: Path, text: str, needles: tuple[str, ...]) -> None:
    fails(tmp_path, text, *needles)


def test_schema_error_count_is_reported(tmp_path: Path) -> None:
    message = fails(tmp_path, "version: 1\nnodes: {n1: {ssh: {port: 0, user: 3}}}\n")
    assert re.search(r"and 1 more problem\)$", message), message


def test_missing_empty_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="inventory file not found"):
        load_inventory(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_inventory(tmp_path)
    fails(tmp_path, "  \n", "empty inventory")
    fails(tmp_path, "# only a comment\n", "not an inventory")


def test_ssh_config_missing_or_bad_is_an_error(tmp_path: Path) -> None:
    fails(
        tmp_path,
        "version: 1\ndefaults: {ssh: {ssh_config: ./nope}}\nnodes: {n1: }\n",
        "defaults.ssh.ssh_config",
        "ssh_config not found",
    )
    (tmp_path / "bad_config").write_text("Match exec true\n  User x\n")
    fails(
        tmp_path,
        "version: 1\nnodes: {n1: {ssh: {ssh_config: bad_config}}}\n",
        "nodes.n1.ssh.ssh_config",
        "bad_config:1: Match criterion 'exec'",
    )


def test_format_detection_errors(tmp_path: Path) -> None:
    fails(tmp_path, "hosts: [a, b]\nfoo: 1\n", "cannot tell the inventory format", "foo, hosts")
    fails(tmp_path, "just some words\n", "not an inventory")
    fails(tmp_path, "a: [\n", "line 2", "YAML syntax error")

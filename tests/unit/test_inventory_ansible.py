"""Ansible inventories (INI and YAML): ranges, variable mapping, precedence, conflicts, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError
from nodegate.inventory import Inventory, load_inventory
from nodegate.inventory.ansible import expand_host_pattern

EXAMPLES = Path(__file__).resolve().parents[2] / "inventories" / "examples"


def load_text(tmp_path: Path, text: str, name: str = "hosts.ini") -> Inventory:
    path = tmp_path / name
    path.write_text(text)
    return load_inventory(path)


def fails(tmp_path: Path, text: str, *needles: str, name: str = "hosts.ini") -> str:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text, name)
    message = str(info.value)
    assert message.startswith(str(tmp_path / name)), message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


# --- host patterns ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "names", "port"),
    [
        pytest.param("gpu01", ["gpu01"], None, id="plain"),
        pytest.param("gpu[01:03]", ["gpu01", "gpu02", "gpu03"], None, id="padded"),
        pytest.param("gpu[8:10]", ["gpu8", "gpu9", "gpu10"], None, id="unpadded"),
        pytest.param("n[1:10:4]", ["n1", "n5", "n9"], None, id="step"),
        pytest.param("spare-[a:c]", ["spare-a", "spare-b", "spare-c"], None, id="alpha"),
        pytest.param("r[1:2]n[a:b]", ["r1na", "r1nb", "r2na", "r2nb"], None, id="two-ranges"),
        pytest.param("n[:2]", ["n0", "n1", "n2"], None, id="empty-begin"),
        pytest.param("10.0.0.5:2222", ["10.0.0.5"], 2222, id="address-port"),
        pytest.param("gpu[1:2]:22", ["gpu1", "gpu2"], 22, id="range-port"),
    ],
)
def test_expand_host_pattern(pattern: str, names: list[str], port: int | None) -> None:
    assert expand_host_pattern(pattern) == (names, port)


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        pytest.param("gpu[01-04]", "must be [begin:end]", id="clustershell-syntax"),
        pytest.param("gpu[01:100]", "same width", id="width"),
        pytest.param("gpu[5:1]", "begin > end", id="reversed"),
        pytest.param("gpu[c:a]", "begin > end", id="reversed-alpha"),
        pytest.param("gpu[1:]", "needs an end", id="no-end"),
        pytest.param("gpu[1:4:0]", "step >= 1", id="zero-step"),
        pytest.param("gpu[1:4", "missing ']'", id="unclosed"),
        pytest.param("gpu[aa:b]", "numeric", id="multi-letter"),
    ],
)
def test_bad_host_patterns(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        expand_host_pattern(pattern)


# --- the shipped examples ---------------------------------------------------------------------


def test_example_ini() -> None:
    inv = load_inventory(EXAMPLES / "hosts.ini")
    assert inv.format == "ansible-ini"
    assert inv.names() == (*(f"gpu{i:02d}" for i in range(1, 17)), "spare-a", "spare-b", "spare-c")
    assert set(inv.groups) == {"all", "h100", "odd", "rack01", "rack02", "spares"}
    assert inv.groups["odd"] == (
        "gpu01",
        "gpu03",
        "gpu05",
        "gpu07",
        "gpu09",
        "gpu11",
        "gpu13",
        "gpu15",
    )
    g12 = inv.node("gpu12")
    assert g12.groups == ("all", "h100", "rack02")
    assert (g12.ssh.host, g12.ssh.port, g12.ssh.user) == ("10.0.2.12", 2222, "root")
    assert g12.ssh.identity_file == str(Path("~/.ssh/id_ed25519").expanduser())
    assert g12.ssh.proxy_jump == "admin@bastion.example.net:2222"
    assert dict(g12.labels) == {"leaf": "leaf02", "note": "replaced-board", "rack": "r02"}
    assert g12.profile == "nd-h100-v5"  # [h100:vars] (child of all) overrides [all:vars]
    spare = inv.node("spare-b")
    assert (spare.profile, dict(spare.labels)) == ("generic-hgx-h100", {"state": "spare"})
    assert spare.ssh.port is None


def test_example_yaml_matches_ini() -> None:
    ini = load_inventory(EXAMPLES / "hosts.ini")
    yml = load_inventory(EXAMPLES / "hosts.yaml")
    assert yml.format == "ansible-yaml"
    assert yml.names() == ini.names()
    for a, b in zip(ini.nodes, yml.nodes, strict=True):
        assert (a.labels, a.profile, a.ssh) == (b.labels, b.profile, b.ssh)
        assert tuple(g for g in a.groups if g != "odd") == b.groups


# --- precedence ---------------------------------------------------------------------------------

PRECEDENCE = """\
[all:vars]
ansible_user=root
rack=none
nodegate_profile=generic

[cluster:children]
rack1

[cluster:vars]
ansible_user=cluster-user
ansible_port=2200

[rack1]
n1
n2 ansible_user=n2-user rack=special

[rack1:vars]
rack=r1
"""


def test_child_overrides_parent_and_host_overrides_groups(tmp_path: Path) -> None:
    inv = load_text(tmp_path, PRECEDENCE + "[extra]\nn3\n")
    n1, n2, n3 = inv.node("n1"), inv.node("n2"), inv.node("n3")
    assert (n1.ssh.user, n1.ssh.port, n1.labels["rack"]) == ("cluster-user", 2200, "r1")
    assert (n2.ssh.user, n2.labels["rack"]) == ("n2-user", "special")
    assert (n3.ssh.user, n3.ssh.port, n3.labels["rack"], n3.profile) == (
        "root",
        None,
        "none",
        "generic",
    )
    # The line after [rack1:vars] "loose ansible_port=1" is a var line, not a host.
    assert inv.names() == ("n1", "n2", "n3")


def test_ungrouped_hosts(tmp_path: Path) -> None:
    inv = load_text(tmp_path, "lonely ansible_host=10.1.1.1\n[g]\nn1\n")
    assert inv.groups["ungrouped"] == ("lonely",)
    assert inv.node("lonely").groups == ("all", "ungrouped")
    assert inv.node("lonely").ssh.host == "10.1.1.1"


def test_unrelated_groups_conflict_names_both(tmp_path: Path) -> None:
    fails(
        tmp_path,
        "[a100]\nn1\n[a100:vars]\nnodegate_profile=p-a\n[h100]\nn1\n[h100:vars]\nnodegate_profile=p-h\n",
        "host n1",
        "group a100",
        "group h100",
        "line 8",
    )


def test_unrelated_groups_agreeing_is_fine(tmp_path: Path) -> None:
    inv = load_text(tmp_path, "[a]\nn1\n[a:vars]\nleaf=l1\n[b]\nn1\n[b:vars]\nleaf=l1\n")
    assert inv.node("n1").labels["leaf"] == "l1"


def test_host_defined_twice_with_conflicting_vars(tmp_path: Path) -> None:
    fails(
        tmp_path,
        "[a]\nn1 ansible_port=22\n[b]\nn1 ansible_port=2222\n",
        "line 4",
        "host n1 defined twice",
        "line 2",
    )


def test_unmapped_vars_are_ignored_even_when_conflicting(tmp_path: Path) -> None:
    inv = load_text(tmp_path, "[a]\nn1 ansible_become=yes foo=1\n[b]\nn1 foo=2\n")
    assert inv.node("n1").labels == {}


# --- variable mapping -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param("-o ProxyJump=ops@jump:2222", "ops@jump:2222", id="o-equals"),
        pytest.param("-oProxyJump=jump", "jump", id="o-attached"),
        pytest.param("-o 'ProxyJump jump'", "jump", id="o-space"),
        pytest.param("-J a@b,c:2022", "a@b,c:2022", id="J"),
        pytest.param("-Jjump -o ProxyJump=later", "jump", id="first-wins"),
        pytest.param("-o StrictHostKeyChecking=no", None, id="none"),
    ],
)
def test_proxy_jump_from_common_args(tmp_path: Path, args: str, expected: str | None) -> None:
    inv = load_text(tmp_path, f'[g]\nn1\n[g:vars]\nansible_ssh_common_args="{args}"\n')
    assert inv.node("n1").ssh.proxy_jump == expected


def test_other_ssh_args_and_aliases(tmp_path: Path) -> None:
    (tmp_path / "cfg").write_text("Host *\n  User x\n")
    inv = load_text(
        tmp_path,
        "[g]\nn1 ansible_ssh_host=10.0.0.1 ansible_ssh_user=u ansible_ssh_port=2022"
        " ansible_private_key_file=keys/id"
        " ansible_ssh_extra_args='-F cfg -o UserKnownHostsFile=kh -o ConnectTimeout=7'\n",
    )
    ssh = inv.node("n1").ssh
    assert (ssh.host, ssh.user, ssh.port) == ("10.0.0.1", "u", 2022)
    assert ssh.identity_file == str(tmp_path / "keys" / "id")
    assert (ssh.ssh_config, ssh.known_hosts) == (str(tmp_path / "cfg"), str(tmp_path / "kh"))
    assert ssh.connect_timeout_s == 7.0


def test_host_port_syntax(tmp_path: Path) -> None:
    assert load_text(tmp_path, "[g]\nn1:2201\n").node("n1").ssh.port == 2201


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        pytest.param(
            "[g]\nn1 ansible_port=abc\n", ("line 2", "ansible_port must be an integer"), id="port"
        ),
        pytest.param("[g]\nn1 ansible_port=70000\n", ("line 2", "out of range"), id="port-range"),
        pytest.param(
            "[g]\nn1 ansible_ssh_common_args='-o ProxyCommand=\"nc %h %p\"'\n",
            ("line 2", "ProxyCommand is not supported"),
            id="proxycommand",
        ),
        pytest.param("[g]\nn1 oops\n", ("line 2", "expected key=value"), id="bare-token"),
        pytest.param("[g:weird]\n", ("line 1", "bad section header"), id="section"),
        pytest.param("[g]\ngpu[01-04]\n", ("line 2", "bad host pattern"), id="range"),
        pytest.param("[g]\nn1\n[g:vars]\nnovalue\n", ("line 4", "expected name=value"), id="vars"),
        pytest.param(
            "[g:vars]\nloose ansible_port=1\n", ("line 2", "expected name=value"), id="host-in-vars"
        ),
        pytest.param("[a:children]\nb\n[b:children]\na\n", ("children loop",), id="loop"),
        pytest.param("[g]\nn1 'unclosed\n", ("line 2", "cannot split"), id="quote"),
        pytest.param("[g]\nbad/name\n", ("line 2", "invalid host name"), id="name"),
        pytest.param("[g]\n", ("empty inventory",), id="empty"),
        pytest.param("[g]\nn1 nodegate_profile='a b'\n", ("line 2", "profile"), id="profile"),
    ],
)
def test_ini_errors(tmp_path: Path, text: str, needles: tuple[str, ...]) -> None:
    fails(tmp_path, text, *needles)


# --- YAML -------------------------------------------------------------------------------------


def test_yaml_without_all_and_numeric_labels(tmp_path: Path) -> None:
    inv = load_text(
        tmp_path,
        "gpus:\n  hosts:\n    gpu[1:2]:\n  vars:\n    rack: 7\n    nodegate_label_rail_group: 2\n"
        "    ansible_port: '2022'\n",
        name="hosts.yaml",
    )
    assert inv.format == "ansible-yaml"
    assert dict(inv.node("gpu2").labels) == {"rack": "7", "rail_group": "2"}
    assert inv.node("gpu2").ssh.port == 2022


def test_group_listed_in_two_places_merges(tmp_path: Path) -> None:
    inv = load_text(
        tmp_path,
        "all:\n  children:\n    a:\n      children:\n        shared:\n          hosts: {n1: }\n"
        "    b:\n      children:\n        shared:\n          hosts: {n2: }\n"
        "          vars: {leaf: l9}\n",
        name="hosts.yaml",
    )
    assert inv.groups["shared"] == ("n1", "n2")
    assert inv.groups["a"] == ("n1", "n2") == inv.groups["b"]
    assert inv.node("n1").labels["leaf"] == "l9"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        pytest.param("all:\n  hostz: {}\n", ("all.hostz", "unknown key"), id="key"),
        pytest.param("all:\n  hosts: [a, b]\n", ("all.hosts", "expected a mapping"), id="list"),
        pytest.param(
            "all:\n  hosts:\n    n1: {ansible_port: [1]}\n",
            ("all.hosts.n1.ansible_port", "must be an integer"),
            id="port",
        ),
        pytest.param(
            "all:\n  hosts:\n    n1: {rack: {a: 1}}\n",
            ("all.hosts.n1.rack", "string or a number"),
            id="label",
        ),
        pytest.param("all:\n  hosts:\n    n1: 5\n", ("host vars must be a mapping",), id="vars"),
        pytest.param("all:\n  hosts:\n    01: {}\n", ("all.hosts.1", "quote it"), id="int-key"),
        pytest.param("all:\n  hosts: {}\n", ("empty inventory",), id="empty"),
    ],
)
def test_yaml_errors(tmp_path: Path, text: str, needles: tuple[str, ...]) -> None:
    fails(tmp_path, text, *needles, name="hosts.yaml")

"""Names are validated once, the same way everywhere (nodegate YAML, Ansible INI and YAML, node
selection, the simulated fleet); hostlist expressions are counted before they are expanded;
YAML nesting is bounded. Every refusal is a ConfigError naming the file and the key or line."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate import cli
from nodegate.core.errors import ConfigError
from nodegate.core.names import MAX_NODES, is_name
from nodegate.inventory import load_inventory
from nodegate.sim.fleet import Fleet
from nodegate.sim.fleet_model import FleetModel, SimNode

RULE = "(ASCII letters, digits, '_', '.', '-'; not starting with '.' or '-')"
EXPR = "(a node expression is printable ASCII without spaces)"
FULLWIDTH = "gpu\uff10\uff10\uff11"  # gpu００１: ClusterShell would read it as gpu1


def refused(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    return str(info.value).removeprefix(f"{tmp_path}/")


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("gpu001", True),
        ("gpu-1.rack_2", True),
        ("gpu001\n", False),
        ("gpu001\r", False),
        ("../x", False),
        ("-gpu", False),
        (".gpu", False),
        ("gpu 1", False),
        (FULLWIDTH, False),
        ("", False),
    ],
)
def test_one_name_rule(name: str, ok: bool) -> None:
    assert is_name(name) is ok


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        pytest.param(
            "inv.yaml",
            'all:\n  hosts:\n    "gpu001\\n": {}\n    gpu002: {}\n',
            f"inv.yaml: all.hosts: character '\\n' in 'gpu001\\n' {EXPR}",
            id="ansible-yaml-newline",
        ),
        pytest.param(
            "inv.yaml",
            f'version: 1\nnodes:\n  "{FULLWIDTH}": {{}}\n',
            f"inv.yaml: nodes: character '\uff10' in '{FULLWIDTH}' {EXPR}",
            id="nodegate-fullwidth",
        ),
        pytest.param(
            "hosts.ini",
            f"[g]\n{FULLWIDTH}\n",
            f"hosts.ini: line 2: character '\uff10' in '{FULLWIDTH}' {EXPR}",
            id="ini-fullwidth",
        ),
        pytest.param(
            "inv.yaml",
            'version: 1\nnodes:\n  gpu001: {ssh: {host: "h1\\n"}}\n',
            "inv.yaml: nodes.gpu001.ssh.host: host 'h1\\n' must be one word, not starting with '-'",
            id="host-trailing-newline",
        ),
        pytest.param(
            "inv.yaml",
            'version: 1\nnodes:\n  gpu001: {ssh: {user: "root\\n"}}\n',
            "inv.yaml: nodes.gpu001.ssh.user: user 'root\\n' must be one word, "
            "not starting with '-'",
            id="user-trailing-newline",
        ),
        pytest.param(
            "inv.yaml",
            'version: 1\nnodes:\n  gpu001: {}\ngroups:\n  "r1\\n": {nodes: gpu001}\n',
            f"inv.yaml: groups: invalid group name 'r1\\n' {RULE}",
            id="group-trailing-newline",
        ),
        pytest.param(
            "inv.yaml",
            'version: 1\nnodes:\n  gpu001: {profile: "p1\\n"}\n',
            f"inv.yaml: nodes.gpu001.profile: invalid profile name 'p1\\n' {RULE}",
            id="profile-trailing-newline",
        ),
    ],
)
def test_bad_names_are_refused_in_every_format(
    tmp_path: Path, file: str, text: str, message: str
) -> None:
    assert refused(tmp_path, file, text) == message


def test_selection_refuses_fullwidth_digits(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("version: 1\nnodes:\n  gpu1: {}\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(path).select(FULLWIDTH)
    assert str(info.value) == (
        f"{path}: node selection '{FULLWIDTH}': character '\uff10' in '{FULLWIDTH}' {EXPR}"
    )


# --- bounded expansion ------------------------------------------------------------------------

TOO_MANY = "expands to 99,999,999 {what}, more than 100,000: refused before expanding"
LEFT = (
    "expands to 60,000 {what}, more than 40,000 (the 100,000 of one inventory, less those "
    "above): refused before expanding"
)


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        pytest.param(
            "inv.yaml",
            'version: 1\nnodes:\n  "gpu[1-99999999]": {}\n',
            "inv.yaml: nodes.gpu[1-99999999]: 'gpu[1-99999999]' " + TOO_MANY.format(what="nodes"),
            id="nodegate",
        ),
        pytest.param(
            "hosts.ini",
            "[g]\ngpu[1:99999999]\n",
            "hosts.ini: line 2: bad host pattern 'gpu[1:99999999]': "
            + TOO_MANY.format(what="hosts"),
            id="ini",
        ),
        pytest.param(
            "inv.yaml",
            'all:\n  hosts:\n    "gpu[1:99999999]": {}\n',
            "inv.yaml: all.hosts.gpu[1:99999999]: bad host pattern 'gpu[1:99999999]': "
            + TOO_MANY.format(what="hosts"),
            id="ansible-yaml",
        ),
        pytest.param(
            "inv.yaml",
            'version: 1\nnodes:\n  "gpu[1-60000]": {}\n  "cpu[1-60000]": {}\n',
            "inv.yaml: nodes.cpu[1-60000]: 'cpu[1-60000]' " + LEFT.format(what="nodes"),
            id="nodegate-keys-together",
        ),
        pytest.param(
            "hosts.ini",
            "[g]\ngpu[1:60000]\ncpu[1:60000]\n",
            "hosts.ini: line 3: bad host pattern 'cpu[1:60000]': " + LEFT.format(what="hosts"),
            id="ini-patterns-together",
        ),
    ],
)
def test_huge_expansions_are_refused_before_expanding(
    tmp_path: Path, file: str, text: str, message: str
) -> None:
    # Expanded in full, gpu[1-99999999] took 355 s and 21.7 GB: this must return at once.
    assert refused(tmp_path, file, text) == message


def test_the_limit_itself_loads(tmp_path: Path) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(f"[g]\ngpu[1:{MAX_NODES}]\n")
    assert len(load_inventory(path).nodes) == MAX_NODES


def test_selection_is_bounded_too(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("version: 1\nnodes:\n  gpu1: {}\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(path).select("gpu[1-99999999]")
    assert str(info.value) == (
        f"{path}: node selection 'gpu[1-99999999]': 'gpu[1-99999999]' "
        + TOO_MANY.format(what="nodes")
    )


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("version: 1\nnodes:\n  n1: " + "[" * 5000 + "]" * 5000 + "\n", "line 3, column 105"),
        (
            "version: 1\nnodes:\n  n1:\n" + "".join(f"{'  ' * (i + 2)}k:\n" for i in range(5000)),
            "line 101, column 199",
        ),
    ],
    ids=["flow", "block"],
)
def test_deep_yaml_is_a_usage_error(tmp_path: Path, text: str, where: str) -> None:
    assert refused(tmp_path, "inv.yaml", text) == (
        f"inv.yaml: {where}: YAML syntax error: nested deeper than 100 levels"
    )


# --- the simulated fleet ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        pytest.param(
            '"gpu001\\n  ProxyCommand touch PWNED"',
            "character '\\n' in 'gpu001\\n  ProxyCommand touch PWNED' " + EXPR,
            id="newline",
        ),
        pytest.param('"../../escape"', f"invalid node name '../../escape' {RULE}", id="dotdot"),
        pytest.param(f'"{FULLWIDTH}"', f"character '\uff10' in '{FULLWIDTH}' {EXPR}", id="fw"),
        pytest.param(
            "gpu[1-99999999]",
            "'gpu[1-99999999]' " + TOO_MANY.format(what="nodes"),
            id="huge",
        ),
    ],
)
def test_sim_build_refuses_bad_node_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: str, message: str
) -> None:
    model = tmp_path / "m.yaml"
    model.write_text(f"name: t\nprofile: generic-hgx-h100\nnodes: {nodes}\n", encoding="utf-8")
    fleet = tmp_path / "a" / "fleet"
    argv = ["sim", "build", "--model", str(model), "--dir", str(fleet), "--subnet", "127.250"]
    assert cli.main(argv) == 4
    assert capsys.readouterr().err == f"nodegate: {model}: nodes: {message}\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["m.yaml"]  # nothing written


@pytest.mark.parametrize(
    ("profile", "shown"),
    [
        pytest.param('"h100\\n  ProxyCommand x"', "'h100\\n  ProxyCommand x'", id="multi-line"),
        pytest.param('"../profiles/x"', "'../profiles/x'", id="path"),
        pytest.param("[a, b]", "['a', 'b']", id="list"),
    ],
)
def test_sim_build_refuses_a_profile_that_is_no_plain_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], profile: str, shown: str
) -> None:
    model = tmp_path / "m.yaml"
    model.write_text(f"name: t\nprofile: {profile}\nnodes: gpu001\n", encoding="utf-8")
    fleet = tmp_path / "a" / "fleet"
    argv = ["sim", "build", "--model", str(model), "--dir", str(fleet), "--subnet", "127.250"]
    assert cli.main(argv) == 4
    want = f"nodegate: {model}: profile: invalid profile name {shown} {RULE}\n"
    assert capsys.readouterr().err == want
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["m.yaml"]  # nothing written


def test_fleet_build_checks_names_of_a_model_built_in_code(tmp_path: Path) -> None:
    bad = SimNode("../x", 0, "127.250.0.1", {"rack": "r01", "leaf": "leaf01"}, {})
    model = FleetModel("t", "generic-hgx-h100", "code", (bad,))
    with pytest.raises(ConfigError) as info:
        Fleet(tmp_path / "fleet").build(model)
    assert str(info.value) == f"code: nodes: invalid node name '../x' {RULE}"
    assert list(tmp_path.iterdir()) == []
    good = SimNode("gpu001", 0, "127.250.0.1", {"rack": "r01", "leaf": "leaf01"}, {})
    with pytest.raises(ConfigError) as info:
        Fleet(tmp_path / "fleet").build(FleetModel("t", "a\nb", "code", (good,)))
    assert str(info.value) == f"code: profile: invalid profile name 'a\\nb' {RULE}"
    assert list(tmp_path.iterdir()) == []


def test_a_usage_error_shows_no_control_character_it_quotes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = tmp_path / "inv.yaml"  # the key path quotes the Ansible variable as written
    inv.write_text('all:\n  hosts:\n    gpu1: {"nodegate_label_r\\e[2J": x}\n')
    assert cli.main(["capture", "--inventory", str(inv), "--out", str(tmp_path / "b")]) == 4
    assert capsys.readouterr().err == (
        f"nodegate: {inv}: all.hosts.gpu1.nodegate_label_r\\x1b[2J: "
        f"invalid label name 'r\\x1b[2J' {RULE}\n"
    )

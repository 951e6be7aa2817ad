"""Quoting in one place: a command is its parts (`CommandSpec.argv`, a spawn's command), quoted
once by `nodegate.transport.script.command_line`. No other module of the package quotes, and a
hostile inventory or profile value (spaces, `;`, `$()`, quotes, newlines, globs) reaches the
node's program as one argument, run by the real rendered script."""

from __future__ import annotations

import ast
import asyncio
import copy
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from nodegate.core.values import CommandSpec, Part, Shell
from nodegate.profiles import Profile, ProfileLibrary
from nodegate.stages.hca import STAGE as HCA
from nodegate.stages.ib_pairs.perftest import client_command, server_script
from nodegate.stages.ib_pairs.profile import ib_pairs_profile, profile_rails
from nodegate.stages.nccl.launch import job_env, mpirun_script
from nodegate.stages.nccl.profile import nccl_profile
from nodegate.stages.roce import STAGE as ROCE
from nodegate.transport.local import LocalTransport
from nodegate.transport.script import LAUNCHER, build_script, command_line, parse_frames

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "plugins" / "nodegate"
# The one module that quotes: it renders stage scripts, results' `cmd` and spawned commands.
RENDERING = {"transport/script.py"}
# The simulator writes the scripts of its own fake tools (and quotes what goes in them); it
# renders no command of nodegate's, so it is not held to this.
EXEMPT = ("sim/",)

HOSTILE = [
    "sp ace",
    "semi;colon",
    "$(touch CANARY)",
    "`touch CANARY`",
    "quo'te\"s",
    "new\nline",
    "*",
    "",
    "-dash",
    "back\\slash",
    "tab\tand $HOME",
]


def _quoting_calls(path: Path, root: Path = PACKAGE) -> list[str]:
    """`shlex.quote`/`shlex.join` uses in one file (attribute access or imported names)."""
    found = []
    rel = path.relative_to(root).as_posix()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("quote", "join")
            and isinstance(node.value, ast.Name)
            and node.value.id == "shlex"
        ):
            found.append(f"{rel}:{node.lineno}: shlex.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "shlex":
            names = [a.name for a in node.names if a.name in ("quote", "join", "*")]
            found += [f"{rel}:{node.lineno}: from shlex import {n}" for n in names]
    return found


def test_only_the_rendering_module_quotes() -> None:
    uses = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in RENDERING or rel.startswith(EXEMPT):
            continue
        uses += _quoting_calls(path)
    assert uses == []


def test_the_scan_sees_each_way_of_quoting(tmp_path: Path) -> None:
    src = (
        "import shlex\nfrom shlex import join, split\nx = shlex.quote('a')\ny = shlex.split('a')\n"
    )
    (tmp_path / "m.py").write_text(src)
    assert _quoting_calls(tmp_path / "m.py", tmp_path) == [
        "m.py:2: from shlex import join",
        "m.py:3: shlex.quote",
    ]
    # The rendering module itself does quote (the scan would see it there).
    assert _quoting_calls(PACKAGE / "transport" / "script.py") != []


def _fake_bin(tmp_path: Path, tools: list[str]) -> Path:
    """Programs that print each argument as `<arg>` on its own line (nothing else)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        p = bin_dir / tool
        p.write_text("#!/bin/sh\nprintf '<%s>\\n' \"$@\"\n")
        p.chmod(0o755)
    return bin_dir


def _shown(argv: list[str]) -> str:
    return "".join(f"<{a}>\n" for a in argv)


def _run_specs(specs: list[CommandSpec], bin_dir: Path, cwd: Path) -> dict[str, str]:
    script = build_script(specs)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    p = subprocess.run(
        ["bash", "-c", LAUNCHER],
        input=script.text.encode(),
        capture_output=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )
    frames = parse_frames(script, p.stdout)
    assert frames.done and frames.problem is None, p.stderr
    return {cid: r.stdout for cid, r in frames.results.items()}


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_is_one_argument_in_a_stage_script(tmp_path: Path, value: str) -> None:
    got = _run_specs([CommandSpec("x", ("printf", "<%s>\\n", value, "after"))], Path("/"), tmp_path)
    assert got["x"] == _shown([value, "after"])
    assert not (tmp_path / "CANARY").exists()


def _hostile_profile(name: str) -> Profile:
    """A shipped profile whose rail devices and netdevs are hostile (past the schema)."""
    prof = ProfileLibrary([REPO / "inventories" / "profiles"]).get(name)
    data = copy.deepcopy(dict(prof.data))
    for i, r in enumerate(data["hca"]["rails"]):
        r["device"] = HOSTILE[i % len(HOSTILE)]
    for i, r in enumerate((data.get("roce") or {}).get("rails", [])):
        r["device"] = HOSTILE[i % len(HOSTILE)] + "-d"
        r["netdev"] = HOSTILE[(i + 3) % len(HOSTILE)] + "-n"
    return Profile(name=prof.name, source="hostile", data=data)


def test_hostile_rail_names_reach_mlxlink_ethtool_mlnx_qos_ibv_devinfo_whole(
    tmp_path: Path,
) -> None:
    tools = ["mlxlink", "ethtool", "mlnx_qos", "ibv_devinfo"]
    bin_dir = _fake_bin(tmp_path, tools)
    prof = _hostile_profile("hgx-h100-roce")
    specs = [
        s
        for s in HCA.commands(None, prof) + ROCE.commands(None, prof)  # type: ignore[arg-type]
        if s.argv[0] in tools
    ]
    assert len(specs) == 8 + 8 * 5  # mlxlink per rail; ethtool, -S twice, mlnx_qos, ibv_devinfo
    got = _run_specs(specs, bin_dir, tmp_path)
    assert {s.id: got[s.id] for s in specs} == {s.id: _shown(list(s.argv[1:])) for s in specs}  # type: ignore[arg-type]
    assert not (tmp_path / "CANARY").exists()


def _spawned(command: Sequence[Part], bin_dir: Path, mp: pytest.MonkeyPatch, cwd: Path) -> str:
    """What `command` printed, spawned by the local transport with `bin_dir` first on PATH."""

    async def go() -> str:
        p = await LocalTransport().spawn("n1", command, 30)
        return (await p.wait()).stdout

    mp.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    mp.chdir(cwd)
    return asyncio.run(go())


@pytest.mark.parametrize("value", HOSTILE[:6])
def test_hostile_device_and_address_reach_ib_write_bw_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    bin_dir = _fake_bin(tmp_path, ["ib_write_bw", "numactl"])
    prof = _hostile_profile("generic-hgx-h100")
    ib = ib_pairs_profile(prof)
    rail = next(r for r in profile_rails(prof) if r.device == value)
    client = client_command(rail, ib, value + " addr")
    assert _spawned(client, bin_dir, monkeypatch, tmp_path) == _shown(list(client[1:]))  # type: ignore[arg-type]
    assert client[-1] == value + " addr" and (rail.device in client)
    server = server_script(rail, ib)
    argv = [a for a in server if isinstance(a, str)]
    assert _spawned(server, bin_dir, monkeypatch, tmp_path) == _shown(argv[1:])
    assert not (tmp_path / "CANARY").exists()


def test_hostile_addresses_and_env_values_reach_mpirun_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").write_text(
        '#!/bin/sh\ncat "$2"\nprintf \'[%s]\\n\' "$NCCL_HOSTILE" "$NCCL_COMM_ID"\n'
    )
    (bin_dir / "mpirun").chmod(0o755)
    prof = ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100")
    nc = nccl_profile(prof)
    addrs = ["10.0.0.1", *HOSTILE[:5]]
    env = {**job_env(nc, {}, "$(touch CANARY):1"), "NCCL_HOSTILE": "v a'l;$(touch CANARY)\n"}
    script = mpirun_script(nc, addrs, env)
    out = _spawned(script, bin_dir, monkeypatch, tmp_path)
    hosts = "".join(f"{a} slots={nc.ranks_per_node}\n" for a in addrs)
    assert out == hosts + "[v a'l;$(touch CANARY)\n]\n[$(touch CANARY):1]\n"
    assert not (tmp_path / "CANARY").exists()


def test_a_shell_part_is_placed_as_written_and_arguments_are_quoted() -> None:
    parts = ("grep", "-H", "a b", Shell(" /sys/*/x 2>/dev/null | "), "wc", "-l")
    assert command_line(parts) == "grep -H 'a b' /sys/*/x 2>/dev/null | wc -l"
    assert command_line(("printf", "%s", "it's")) == "printf %s 'it'\"'\"'s'"
    with pytest.raises(TypeError):
        command_line("uname -r")
    with pytest.raises(TypeError):
        CommandSpec("k", "uname -r")  # type: ignore[arg-type]


def test_an_env_name_that_is_not_a_name_never_reaches_the_mpirun_script() -> None:
    nc = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    with pytest.raises(ValueError, match="not an environment variable name"):
        mpirun_script(nc, ["10.0.0.1"], {"NCCL_X;touch CANARY": "1"})

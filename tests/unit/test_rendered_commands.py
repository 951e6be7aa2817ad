"""What runs on a node does not change with how commands are written: every passive stage's
script, each result's `cmd`, the spawned command lines (ib_write_bw, mpirun, srun) and the
stray check render byte for byte as the commit before commands became argv parts did
(tests/fixtures/rendered/initial.json, written by the old code: capture_initial.py.txt),
hostile profile and address values included. The gpu_load stage came after that commit: its
command lines per shipped profile and level (tests/fixtures/rendered/gpu_load.json, written by
the code of the commit that added it and read through by hand) are pinned the same way."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.settings import LEVELS
from nodegate.core.values import CommandSpec, Shell
from nodegate.framework.active.ledger import stray_script
from nodegate.profiles import Profile, ProfileLibrary, at_level
from nodegate.stages.gpu_load import commands as gpu_load_commands
from nodegate.stages.gpu_load.profile import gpu_load_profile
from nodegate.stages.gpu_load.run import KERNEL_LOG_TIMEOUT_S, TOPOLOGY_TIMEOUT_S
from nodegate.stages.hca import STAGE as HCA
from nodegate.stages.ib_pairs.perftest import client_command, server_script
from nodegate.stages.ib_pairs.profile import ib_pairs_profile, profile_rails
from nodegate.stages.nccl.launch import job_env, mpirun_script, srun_argv
from nodegate.stages.nccl.profile import nccl_profile, roce_settings
from nodegate.stages.pcie_gpu import STAGE as PCIE
from nodegate.stages.reach import STAGE as REACH
from nodegate.stages.roce import STAGE as ROCE
from nodegate.transport.process import wrap
from nodegate.transport.script import (
    StageScript,
    build_script,
    command_line,
    parse_frames,
    session_tag,
)

REPO = Path(__file__).resolve().parents[2]
INITIAL = REPO / "tests" / "fixtures" / "rendered" / "initial.json"
GPU_LOAD = REPO / "tests" / "fixtures" / "rendered" / "gpu_load.json"
N = "0" * 32
HOSTILE = ["sp ace", "semi;colon", "$(reboot)", "quo'te\"s", "new\nline", "`id`", "*", ""]


def _results_cmd(script: StageScript) -> list[str]:
    """Each command's `CommandResult.cmd`, from a frame per command as a node sends it."""
    out = b"".join(f"@@{N} F {s.id} 0 1 2 0 0 -\n".encode() for s in script.specs)
    fr = parse_frames(script, out + f"@@{N} DONE\n".encode())
    return [fr.results[s.id].cmd for s in script.specs]


def _passive(specs: list[CommandSpec]) -> dict[str, Any]:
    script = build_script(specs, N)
    return {
        "text": script.text,
        "ids": [s.id for s in specs],
        "timeouts": [s.timeout_s for s in specs],
        "cmds": _results_cmd(script),
    }


def _hostile_profile(prof: Profile, i: int) -> Profile:
    """`prof` with hostile rail device and netdev names (past the schema, which refuses them)."""
    data = copy.deepcopy(dict(prof.data))
    for r in data["hca"]["rails"]:
        r["device"] = HOSTILE[(r["rail"] + i) % len(HOSTILE)] + f"_{r['rail']}"
    if data.get("roce"):
        for r in data["roce"]["rails"]:
            r["device"] = HOSTILE[(r["rail"] + i) % len(HOSTILE)] + f"d{r['rail']}"
            r["netdev"] = HOSTILE[(r["rail"] + i + 1) % len(HOSTILE)] + f"n{r['rail']}"
    return Profile(name=prof.name + f"-hostile{i}", source="hostile", data=data)


def _spawned(prof: Profile, out: dict[str, Any]) -> None:
    ib = ib_pairs_profile(prof)
    for r in profile_rails(prof)[:3]:
        key = f"spawn/ib_pairs/{prof.name}/rail{r.rail}"
        s = command_line(server_script(r, ib))
        out[key + "/server"] = s
        out[key + "/server_wrapped"] = wrap(s, ib.timeout_s + ib.ready_timeout_s, "@@00-pid")
        for addr in ("10.1.0.2", "fe80::1%ib0", "bad addr;$(x)"):
            c = command_line(client_command(r, ib, addr))
            out[key + f"/client/{addr}"] = c
            out[key + f"/client_wrapped/{addr}"] = wrap(c, ib.timeout_s, "@@01-pid")
    if prof.source == "hostile":
        return
    # As the fixture's code rendered them: without nccl.transport's NCCL_DEBUG variables and
    # output filter (new since, pinned in test_nccl_transport and test_nccl_launch_slurm).
    nc = dataclasses.replace(nccl_profile(prof), transport=None)
    for addrs in (["10.0.0.1", "10.0.0.2"], ["10.0.0.1", "h'o st;$(x)", "a\nb"]):
        env = job_env(nc, roce_settings(prof), f"{addrs[0]}:{nc.bootstrap_port}")
        m = command_line(mpirun_script(nc, addrs, env))
        key = f"spawn/nccl/{prof.name}/{len(addrs)}"
        out[key + "/mpirun"] = m
        out[key + "/mpirun_wrapped"] = wrap(m, 900, "@@02-pid")
        env2 = {**env, "NCCL_HOSTILE": "v a'l;$(x)\n"}
        out[key + "/mpirun_hostile_env"] = command_line(mpirun_script(nc, addrs, env2))
    argv = srun_argv(nc, ["gpu001", "gpu002"], 600, "nodegate-nccl-0123456789abcdef")
    out[f"spawn/nccl/{prof.name}/srun"] = command_line(argv)


def rendered() -> dict[str, Any]:
    """Everything the fixture pins, rendered by the code as it is now."""
    out: dict[str, Any] = {}
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    profiles = [lib.get(n) for n in lib.available()]
    profiles += [_hostile_profile(lib.get("hgx-h100-roce"), i) for i in range(2)]
    profiles += [_hostile_profile(lib.get("generic-hgx-h100"), 3)]
    for prof in profiles:
        for stage in (REACH, PCIE, HCA, ROCE):
            if stage is ROCE and prof.data.get("roce") is None:
                continue
            specs = stage.commands(None, prof)  # type: ignore[arg-type]
            out[f"passive/{stage.name}/{prof.name}"] = _passive(specs)
        _spawned(prof, out)
    for tags in ([], ["@@0123456789abcdef-pid"], ["@@b-pid", "@@a-srun", "@@b-pid"]):
        s = stray_script(tags)
        out[f"stray/{len(tags)}"] = command_line(s)
        out[f"stray_script/{len(tags)}"] = _passive([CommandSpec("stray", s, 15.0)])
        del out[f"stray_script/{len(tags)}"]["ids"], out[f"stray_script/{len(tags)}"]["timeouts"]
    sites = ["nvidia-smi -q", "cat /etc/hostname | tr a-z A-Z", "echo $HOME", "ls -d /sys/*"]
    for i, site in enumerate([*sites, "printf 'x\\n'", " uname  -r "]):
        out[f"site/{i}"] = _passive([CommandSpec("cmd", (Shell(site),), 30.0)])
        del out[f"site/{i}"]["ids"], out[f"site/{i}"]["timeouts"]
    return out


@pytest.fixture(scope="module")
def now() -> dict[str, Any]:
    return rendered()


# The framing the fixture was written with -> the framing now (issue 26: a fresh private
# directory instead of files named from the nonce, inherited descriptors closed, `exit 0`).
# Only the framing: every command line stays byte for byte the fixture's.
ZERO_TAG = session_tag("0" * 32)  # the pinned scripts' nonce is all zeros
REFRAMED = (
    (
        """_nf_p="$_nf_t/.nodegate-$_nf_n-$$"\n""",
        f"""_nf_p=$(mktemp -d "$_nf_t/.nodegate.{ZERO_TAG}.XXXXXXXXXX") || exit 70\n""",
    ),
    ("""trap 'rm -f -- "$_nf_p".*' EXIT\n""", """trap 'rm -rf -- "$_nf_p"' EXIT\n"""),
    ('"$_nf_p.', '"$_nf_p/'),
    (
        "\n_nf_t=/dev/shm;",
        '\nfor _nf_d in /proc/$$/fd/*; do _nf_d=${_nf_d##*/}; [ "$_nf_d" -gt 2 ] 2>/dev/null &&'
        ' eval "exec $_nf_d>&-"; done\n_nf_t=/dev/shm;',
    ),
    ("""printf '@@%s DONE\\n' "$_nf_n"\n""", """printf '@@%s DONE\\n' "$_nf_n"\nexit 0\n"""),
)


def _reframed(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    for case in out.values():
        if isinstance(case, dict) and "text" in case:
            for old, new in REFRAMED:
                assert old in case["text"], old
                case["text"] = case["text"].replace(old, new)
    return out


INITIAL_DOC: dict[str, Any] = _reframed(json.loads(INITIAL.read_text(encoding="utf-8")))


def test_the_same_cases_are_rendered(now: dict[str, Any]) -> None:
    assert sorted(now) == sorted(INITIAL_DOC)


@pytest.mark.parametrize("key", sorted(INITIAL_DOC))
def test_rendered_byte_for_byte_as_before(now: dict[str, Any], key: str) -> None:
    assert now[key] == INITIAL_DOC[key]


def gpu_load_rendered() -> dict[str, str]:
    """gpu_load's spawned command lines, bare and wrapped, per shipped profile and level; the
    kernel log's `--since` is the first sample's timestamp a node printed (hostile ones too)."""
    c = gpu_load_commands
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    out: dict[str, str] = {}
    for name in lib.available():
        for level in LEVELS:
            g = gpu_load_profile(at_level(lib.get(name), level))
            key = f"spawn/gpu_load/{name}/{level}"
            argvs = [("sampler", c.sampler_argv(g), g.timeout_s),
                     ("nvbandwidth", c.nvbandwidth_argv(g), g.nvbandwidth_timeout_s)]  # fmt: skip
            if g.run.dcgm_level is not None:
                argvs.append(("dcgmi", c.dcgm_argv(g), g.dcgm_timeout_s))
            for role, argv, timeout in argvs:
                out[f"{key}/{role}"] = command_line(argv)
                out[f"{key}/{role}_wrapped"] = wrap(command_line(argv), timeout, "@@03-pid")
    topo = command_line(c.topology_argv())
    out["spawn/gpu_load/topology"] = topo
    out["spawn/gpu_load/topology_wrapped"] = wrap(topo, TOPOLOGY_TIMEOUT_S, "@@04-pid")
    for i, since in enumerate(["2026-12-01 18:40:01", "x'; reboot; '", "$(id) `id` \n"]):
        k = command_line(c.kernel_log_argv(since))
        out[f"spawn/gpu_load/kernel_log/{i}"] = k
        out[f"spawn/gpu_load/kernel_log_wrapped/{i}"] = wrap(k, KERNEL_LOG_TIMEOUT_S, "@@05-pid")
    return out


def test_gpu_load_rendered_byte_for_byte_as_pinned() -> None:
    pinned = json.loads(GPU_LOAD.read_text(encoding="utf-8"))
    now = gpu_load_rendered()
    assert sorted(now) == sorted(pinned)
    for key in sorted(pinned):
        assert now[key] == pinned[key], key

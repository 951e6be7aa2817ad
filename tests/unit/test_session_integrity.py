"""A session is only as good as its end (issue 26): a command that takes over its shell's
stdout (/proc/<pid>/fd/1), writes frames and DONE and then kills the shell gets its node an
ERROR, never a pass; so do frames out of order, bytes after DONE, a shell that did not exit 0."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from nodegate.core.values import CommandSpec, Reach, Shell
from nodegate.sim.fleet_model import Fault, SimNode
from nodegate.sim.tools.hijack import FORGED, hijacker
from nodegate.transport.base import NOT_REPORTED, Session
from nodegate.transport.local import LocalTransport
from nodegate.transport.script import build_script
from nodegate.transport.srun_output import LabelledStream


def _specs(tmp_path: Path, end: str) -> list[CommandSpec]:
    node = SimNode("n1", 1, "127.0.0.1", {}, {}, (Fault("hijack_end", end),))
    tool = tmp_path / "cat"
    tool.write_text("#!/bin/sh\n" + hijacker(node) + "\n")
    tool.chmod(0o755)
    cmds = {"os_release": (str(tool), "/etc/os-release"), "kernel": ("echo", "4.0-wrong")}
    cmds |= {"nvidia_driver": (Shell("exit 1"),), "ofed": (Shell("exit 127"),)}
    return [CommandSpec(cid, cmds[cid], 10.0) for cid, _ in FORGED]


@pytest.mark.parametrize(
    ("end", "why"),
    [
        ("kill", "session integrity: shell killed by SIGKILL after its last frame"),
        ("term", "session integrity: shell killed by SIGTERM after its last frame"),
    ],
)
def test_a_command_that_forges_frames_and_kills_its_shell_is_an_error(tmp_path, end, why):
    out = asyncio.run(LocalTransport().run_node("n1", "reach", _specs(tmp_path, end)))
    # The forged frames were well formed and complete: only the shell's end gives them away.
    assert (out.reach, out.detail) == (Reach.ERROR, why)
    assert out.results["kernel"].stdout == "5.15.0-105-generic\n"  # forged, and not trusted


def test_the_shell_going_on_after_a_forged_done_is_an_error(tmp_path):
    out = asyncio.run(LocalTransport().run_node("n1", "reach", _specs(tmp_path, "more")))
    assert out.reach is Reach.ERROR
    assert out.detail.startswith("session integrity: bytes after DONE at offset ")


def test_a_command_cannot_learn_the_nonce_from_its_files(tmp_path):
    spec = CommandSpec("me", ("readlink", "/proc/self/fd/1", "/proc/self/fd/2"))
    out = asyncio.run(LocalTransport().run_node("n1", "s", [spec]))
    paths = out.results["me"].stdout.split()
    assert out.reach is Reach.OK and [Path(p).name for p in paths] == ["me.o", "me.e"]
    d = Path(paths[0]).parent
    assert d.name.startswith(".nodegate.") and not d.exists()  # removed at the end
    assert d == Path(paths[1]).parent


def test_commands_inherit_no_descriptor_of_the_shell(tmp_path):
    spec = CommandSpec("fds", (Shell("ls /proc/self/fd"),))
    script = build_script([spec])
    import subprocess

    from nodegate.transport.script import LAUNCHER, parse_frames

    with open(tmp_path / "x", "w") as extra:
        p = subprocess.run(
            ["bash", "-c", LAUNCHER],
            input=script.text.encode(),
            capture_output=True,
            pass_fds=(extra.fileno(),),
            check=True,
        )
    # 0-2 (/dev/null and its two files) and ls's own directory descriptor
    assert parse_frames(script, p.stdout).results["fds"].stdout.split() == ["0", "1", "2", "3"]


def _outcome(stdout: bytes, ended: str | None, specs: list[CommandSpec] | None = None):
    specs = specs or [CommandSpec("a", ("true",)), CommandSpec("b", ("true",))]
    script = build_script(specs, "f" * 32)
    s = Session(Reach.OK, stdout, b"", ended=ended)
    return asyncio.run(LocalTransport().outcome("n1", "s", script, s, time.monotonic()))


N = "f" * 32
A = f"@@{N} B a 1\n@@{N} F a 0 1 2 0 0 -\n".encode()
B = f"@@{N} B b 1\n@@{N} F b 0 1 2 0 0 -\n".encode()
DONE = f"@@{N} DONE\n".encode()


@pytest.mark.parametrize(
    ("stdout", "ended", "detail"),
    [
        (A + B + DONE, None, ""),
        (A + B + DONE, "exited 3", "session integrity: shell exited 3 after its last frame"),
        (
            A + B + DONE,
            "closed without an exit status",
            "session integrity: shell closed without an exit status after its last frame",
        ),
        (
            A + B + DONE,
            NOT_REPORTED,
            f"session integrity: shell {NOT_REPORTED} after its last frame",
        ),
        (
            A + B + DONE + B,
            None,
            f"session integrity: bytes after DONE at offset {len(A + B + DONE)}: " + repr(B[:40]),
        ),
        (
            B + A + DONE,
            None,
            "session integrity: frame of b out of order at offset 0 (next due: a)",
        ),
        (
            A + A + B + DONE,
            None,
            f"session integrity: frame of a out of order at offset {len(A)} (next due: b)",
        ),
        (A + DONE, None, f"session integrity: DONE at offset {len(A)} before the frame of b"),
        (
            A,
            "killed by SIGKILL",
            "session integrity: session ended before every command reported "
            "(shell killed by SIGKILL)",
        ),
    ],
)
def test_only_an_honest_end_vouches_for_the_frames(stdout, ended, detail):
    out = _outcome(stdout, ended)
    assert (out.reach, out.detail) == (Reach.OK if not detail else Reach.ERROR, detail)


def test_srun_reports_which_tasks_did_not_exit_0():
    err = LabelledStream(6, 1000)
    err.feed(
        b"srun: error: gpu006: task 5: Exited with exit code 137\n"
        b"srun: error: gpu[001-002]: tasks 0-1,3: Killed\n0: mine\n"
    )
    assert err.exits == {5: "Exited with exit code 137", 0: "Killed", 1: "Killed", 3: "Killed"}
    assert err.of(0) == b"mine\n"

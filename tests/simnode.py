"""Run commands on a built (not started) simulated fleet's node through its sshd ForceCommand,
the dispatcher, exactly as a session would: `. dispatch` with the SSH_* variables sshd sets."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from nodegate.core.values import CommandSpec, Part, Shell
from nodegate.sim.fleet import Fleet, build_fleet
from nodegate.transport.script import LAUNCHER, build_script, parse_frames


@dataclass(frozen=True)
class Out:
    rc: int | None
    stdout: str
    stderr: str


def build(tmp: Path, model: dict[str, Any]) -> Fleet:
    path = tmp / "model.yaml"
    path.write_text(yaml.safe_dump(model))
    return build_fleet(path, tmp / "fleet", subnet="127.254")


def address(fleet: Fleet, node: str) -> str:
    nodes: list[dict[str, Any]] = fleet.model()["nodes"]  # type: ignore[assignment]
    return str(next(n["address"] for n in nodes if n["name"] == node))


def _env(fleet: Fleet, node: str, original: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SSH_CONNECTION"] = f"127.0.0.1 40000 {address(fleet, node)} 2222"
    env["SSH_ORIGINAL_COMMAND"] = original
    return env


def _session(
    fleet: Fleet, node: str, original: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f". {fleet.root / 'dispatch'}"],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(fleet, node, original),
        timeout=60,
    )


def run(fleet: Fleet, node: str, cmd: str) -> Out:
    """`ssh node CMD`: the command evaluated by the node's login shell (PATH stubs)."""
    p = _session(fleet, node, cmd)
    return Out(p.returncode, p.stdout, p.stderr)


def run_script(fleet: Fleet, node: str, cmds: Sequence[str | Sequence[Part]]) -> list[Out]:
    """A stage script of `cmds` (the transport's own framing, the fast path), per command: a
    str is a shell line, anything else a command's parts."""
    specs = [
        CommandSpec(f"c{i}", (Shell(c),) if isinstance(c, str) else tuple(c), 20.0)
        for i, c in enumerate(cmds)
    ]
    script = build_script(specs)
    p = subprocess.run(
        ["bash", "-c", f". {fleet.root / 'dispatch'}"],
        input=script.text.encode(),
        capture_output=True,
        env=_env(fleet, node, LAUNCHER),
        timeout=60,
    )
    frames = parse_frames(script, p.stdout)
    assert frames.done and frames.problem is None, p.stdout[-2000:] + p.stderr[-2000:]
    return [
        Out(frames.results[s.id].rc, frames.results[s.id].stdout, frames.results[s.id].stderr)
        for s in specs
    ]

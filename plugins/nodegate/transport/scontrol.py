"""The `scontrol` program as a client: node states and reasons (`scontrol show node -o`) and
updates (argument lists, no shell). The Slurm transport reads node states through it; the
Slurm action (`--act slurm`) drains and resumes through it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SLURM_NAME_LABEL = "slurm_node"  # inventory label: the node's Slurm name (docs/inventory.md)
SCONTROL_TIMEOUT_S = 30.0
_STATE = re.compile(r"(?:^|\s)State=(\S+)")
# `Reason=<text> [<user>@<time>]`: scontrol appends who set it and when, so the reason is
# what comes before that; without it (never seen), up to the next field.
_REASON_SET = re.compile(r"(?:^|\s)Reason=(.*)\s\[([^\[\]\s@]+)@[^\[\]\s]+\]")
_REASON_BARE = re.compile(r"(?:^|\s)Reason=(.*?)(?=\s+[A-Za-z]+=|$)")


class SlurmError(Exception):
    """scontrol could not be run or did not answer."""


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: str  # IDLE+DRAIN, DOWN+NOT_RESPONDING, ...
    reason: str | None
    # who set the reason (scontrol's `[user@time]`): who, not what state, so not compared
    by: str | None = field(default=None, compare=False)

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(self.state.upper().replace("*", "").split("+"))

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def out(self) -> bool:
        """Out of service: drained, draining or down."""
        return self.drained or "DOWN" in self.flags

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "reason": self.reason}


def parse_show_node(text: str) -> dict[str, SlurmNode]:
    """`scontrol show node -o` (one node per line) -> nodes by name; SlurmError if a line
    is not understood."""
    out: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = re.match(r"NodeName=(\S+)", line)
        st = _STATE.search(line)
        if m is None or st is None:
            raise SlurmError(f"scontrol show node: line not understood: {line[:120]!r}")
        r = _REASON_SET.search(line)
        by = r.group(2) if r else None
        r = r or _REASON_BARE.search(line)
        reason = r.group(1).strip() if r else None
        out[m.group(1)] = SlurmNode(m.group(1), st.group(1), reason or None, by)
    return out


class Scontrol:
    """The `scontrol` program, with the environment that names the cluster (SLURM_CONF)."""

    def __init__(self, env: Mapping[str, str] | None = None, exe: str = "scontrol") -> None:
        self.env = dict(env if env is not None else os.environ)
        self.exe = exe

    def _run(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        path = shutil.which(self.exe, path=self.env.get("PATH"))
        if path is None:
            raise SlurmError(f"{self.exe} not found on PATH (install slurm-client)")
        try:
            return subprocess.run(
                [path, *args],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=SCONTROL_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"{self.exe} {' '.join(args[:2])}: {exc}") from None

    def nodes(self) -> dict[str, SlurmNode]:
        conf = self.env.get("SLURM_CONF")
        if conf is not None and not Path(conf).is_file():
            # scontrol itself retries a missing slurm.conf for 60 s before it says so
            raise SlurmError(f"SLURM_CONF={conf}: no such file")
        p = self._run(["show", "node", "-o"])
        if p.returncode != 0:
            conf = self.env.get("SLURM_CONF", "default slurm.conf")
            why = (p.stderr.strip().splitlines() or ["no message"])[0]
            raise SlurmError(f"scontrol show node exited {p.returncode} (SLURM_CONF={conf}): {why}")
        return parse_show_node(p.stdout)

    def update(self, name: str, *settings: str) -> str | None:
        """`scontrol update NodeName=<name> <settings>`; the error text, or None."""
        p = self._run(["update", f"NodeName={name}", *settings])
        if p.returncode == 0:
            return None
        return (p.stderr.strip() or p.stdout.strip() or f"exited {p.returncode}")[:500]

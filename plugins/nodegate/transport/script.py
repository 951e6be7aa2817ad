"""One round trip per node per stage: a generated bash script that frames each command's output.

Each command runs under its own `timeout`. Its stdout streams back on the session's stdout and
its stderr on the session's stderr, each between nonce-tagged marker lines; the closing stdout
marker carries the rc and timestamps. Nothing is written on the node, and nothing is spawned
beyond `timeout` and the command itself: on a simulated fleet of 1,024 nodes every extra process
is ~1-2 ms of the shared 2 cores. The nonce is random per session, so tool output cannot forge
a marker.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from nodegate.model import CommandResult, CommandSpec

# Characters that need a shell to interpret; a command without any runs as a plain argv.
_SHELL_META = re.compile(r"[|&;<>()$`\\\"'*?\[\]{}~#=\n!]")
# SIGTERM at the deadline, SIGKILL 2 s later if the command ignores TERM.
KILL_AFTER_S = 2.0
# rc values `timeout` uses for a command stopped at its deadline (TERM, then KILL).
TIMEOUT_RCS = frozenset({124, 137})

LAUNCHER = "exec bash --noprofile --norc -s"


@dataclass(frozen=True, slots=True)
class StageScript:
    """A script to feed on stdin of `LAUNCHER`, and the nonce its frames carry."""

    nonce: str
    text: str
    specs: tuple[CommandSpec, ...]

    @property
    def deadline_s(self) -> float:
        """Upper bound for the whole session: every command's deadline plus slack."""
        return sum(s.timeout_s + KILL_AFTER_S for s in self.specs) + 5.0


@lru_cache(maxsize=4096)
def _invocation_of(cmd: str, timeout_s: float) -> str:
    t = f"{timeout_s:g}"
    if _SHELL_META.search(cmd) is None and cmd.strip():
        argv = shlex.split(cmd)
        return f"timeout -k {KILL_AFTER_S:g} {t} " + " ".join(shlex.quote(a) for a in argv)
    return f"timeout -k {KILL_AFTER_S:g} {t} sh -c {shlex.quote(cmd)}"


def _invocation(spec: CommandSpec) -> str:
    return _invocation_of(spec.cmd, spec.timeout_s)


def build_script(specs: Sequence[CommandSpec], nonce: str | None = None) -> StageScript:
    """Render the stage script for `specs` (command ids must be unique and simple)."""
    n = nonce or secrets.token_hex(16)
    seen: set[str] = set()
    now = '"${EPOCHREALTIME:-$SECONDS}"'
    lines = ["set +e +u", "export LC_ALL=C"]
    for spec in specs:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", spec.id) or spec.id in seen:
            raise ValueError(f"command id {spec.id!r} must be unique and [A-Za-z0-9_.:-]+")
        seen.add(spec.id)
        lines += [
            f"printf '@@{n} B %s %s\\n' {spec.id} {now}; printf '@@{n} B %s\\n' {spec.id} >&2",
            f"{_invocation(spec)} </dev/null; ng_rc=$?",
            f"printf '\\n@@{n} E %s %s %s\\n' {spec.id} \"$ng_rc\" {now}; "
            f"printf '\\n@@{n} E %s\\n' {spec.id} >&2",
        ]
    lines.append(f"printf '@@{n} DONE\\n'")
    return StageScript(nonce=n, text="\n".join(lines) + "\n", specs=tuple(specs))


def _seconds(stamp: str) -> float | None:
    try:
        return float(stamp)
    except ValueError:
        return None


@dataclass
class _Frame:
    id: str
    start: float | None
    out: list[str]
    rc: int | None = None
    end: float | None = None
    closed: bool = False


def _split(text: str, marker: str, ids: set[str]) -> tuple[dict[str, _Frame], bool]:
    """Frames of one stream: text between `B id` and `E id` markers."""
    frames: dict[str, _Frame] = {}
    cur: _Frame | None = None
    done = False
    for line in text.splitlines(keepends=True):
        if line.startswith(marker):
            parts = line[len(marker) :].split()
            kind = parts[0] if parts else ""
            if kind == "B" and len(parts) >= 2 and parts[1] in ids:
                cur = frames[parts[1]] = _Frame(
                    parts[1], _seconds(parts[2]) if len(parts) > 2 else None, []
                )
                continue
            if kind == "E" and cur is not None and len(parts) >= 2 and parts[1] == cur.id:
                if len(parts) >= 3:
                    cur.rc = int(parts[2]) if parts[2].lstrip("-").isdigit() else None
                cur.end = _seconds(parts[3]) if len(parts) > 3 else None
                cur.closed = True
                # Each frame adds exactly one newline before its E marker.
                if cur.out and cur.out[-1].endswith("\n"):
                    cur.out[-1] = cur.out[-1][:-1]
                cur = None
                continue
            if kind == "DONE":
                done = True
                continue
        if cur is not None:
            cur.out.append(line)
    return frames, done


def parse_frames(
    script: StageScript, stdout: str, stderr: str = ""
) -> tuple[dict[str, CommandResult], bool]:
    """Split a session's output into per-command results; returns (results, completed).

    A command whose frame never closed (the session was cut off) comes back with rc None and
    whatever output it had produced; commands that never started are absent.
    """
    marker = f"@@{script.nonce} "
    by_id = {s.id: s for s in script.specs}
    out_frames, done = _split(stdout, marker, set(by_id))
    err_frames, _ = _split(stderr, marker, set(by_id))
    results: dict[str, CommandResult] = {}
    for cid, f in out_frames.items():
        ef = err_frames.get(cid)
        complete = f.closed and (f.rc is not None)
        dur = f.end - f.start if complete and f.start is not None and f.end is not None else None
        results[cid] = CommandResult(
            id=cid,
            cmd=by_id[cid].cmd,
            rc=f.rc if complete else None,
            stdout="".join(f.out),
            stderr="".join(ef.out) if ef is not None else "",
            duration_s=round(dur, 6) if dur is not None else None,
            timed_out=(not complete) or (f.rc in TIMEOUT_RCS),
        )
    return results, done

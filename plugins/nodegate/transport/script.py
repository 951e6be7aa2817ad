"""One round trip per node per stage: a generated bash script that frames each command's output.

Each command runs under its own `timeout`; its stdout streams back between nonce-tagged marker
lines, its stderr is kept in a temp file and read back with a builtin (no fork), and the rc and
timestamps close the frame. The nonce is random per session, so tool output cannot forge a
marker. The script avoids forks beyond `timeout` and the command itself: on a simulated fleet of
1,024 nodes every extra process is ~1 ms of the shared 2 cores.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

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


def _invocation(spec: CommandSpec) -> str:
    t = f"{spec.timeout_s:g}"
    if _SHELL_META.search(spec.cmd) is None and spec.cmd.strip():
        argv = shlex.split(spec.cmd)
        return f"timeout -k {KILL_AFTER_S:g} {t} " + " ".join(shlex.quote(a) for a in argv)
    return f"timeout -k {KILL_AFTER_S:g} {t} sh -c {shlex.quote(spec.cmd)}"


def build_script(specs: Sequence[CommandSpec], nonce: str | None = None) -> StageScript:
    """Render the stage script for `specs` (command ids must be unique and simple)."""
    n = nonce or secrets.token_hex(16)
    seen: set[str] = set()
    lines = [
        "set +e +u",
        "export LC_ALL=C",
        'ng_e="${TMPDIR:-/tmp}/.nodegate.$$.err"',
        "trap 'rm -f \"$ng_e\"' EXIT",
    ]
    for spec in specs:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", spec.id) or spec.id in seen:
            raise ValueError(f"command id {spec.id!r} must be unique and [A-Za-z0-9_.:-]+")
        seen.add(spec.id)
        lines += [
            f"printf '@@{n} B %s %s\\n' {spec.id} \"${{EPOCHREALTIME:-$SECONDS}}\"",
            f'{_invocation(spec)} </dev/null 2>"$ng_e"; ng_rc=$?',
            f'printf \'\\n@@{n} E %s %s %s\\n\' {spec.id} "$ng_rc" "${{EPOCHREALTIME:-$SECONDS}}"',
            'ng_err=; IFS= read -r -d "" ng_err <"$ng_e"',
            "printf '%s' \"$ng_err\"",
            f"printf '\\n@@{n} Z %s\\n' {spec.id}",
        ]
    lines.append(f"printf '@@{n} DONE\\n'")
    return StageScript(nonce=n, text="\n".join(lines) + "\n", specs=tuple(specs))


def _seconds(stamp: str) -> float | None:
    try:
        return float(stamp)
    except ValueError:
        return None


def parse_frames(script: StageScript, stdout: str) -> tuple[dict[str, CommandResult], bool]:
    """Split a session's stdout into per-command results; returns (results, completed).

    A command whose frame never closed (the session was cut off) comes back with rc None and
    whatever output it had produced; commands that never started are absent.
    """
    marker = f"@@{script.nonce} "
    by_id = {s.id: s for s in script.specs}
    results: dict[str, CommandResult] = {}
    done = False
    cur: str | None = None
    phase = ""
    t0: float | None = None
    rc: int | None = None
    t1: float | None = None
    out: list[str] = []
    err: list[str] = []

    def close(complete: bool) -> None:
        assert cur is not None
        spec = by_id[cur]
        o = "".join(out)
        e = "".join(err)
        # Each frame adds exactly one newline before the E and Z markers.
        if complete:
            o = o[:-1] if o.endswith("\n") else o
            e = e[:-1] if e.endswith("\n") else e
        dur = (t1 - t0) if (complete and t0 is not None and t1 is not None) else None
        results[cur] = CommandResult(
            id=cur,
            cmd=spec.cmd,
            rc=rc if complete else None,
            stdout=o,
            stderr=e,
            duration_s=round(dur, 6) if dur is not None else None,
            timed_out=(not complete) or (rc in TIMEOUT_RCS),
        )

    for line in stdout.splitlines(keepends=True):
        if line.startswith(marker):
            parts = line[len(marker) :].split()
            kind = parts[0] if parts else ""
            if kind == "B" and len(parts) >= 2 and parts[1] in by_id:
                if cur is not None:
                    close(False)
                cur, phase, out, err = parts[1], "out", [], []
                t0, rc, t1 = _seconds(parts[2]) if len(parts) > 2 else None, None, None
                continue
            if kind == "E" and cur is not None and len(parts) >= 3 and parts[1] == cur:
                rc = int(parts[2]) if parts[2].lstrip("-").isdigit() else None
                t1 = _seconds(parts[3]) if len(parts) > 3 else None
                phase = "err"
                continue
            if kind == "Z" and cur is not None and len(parts) >= 2 and parts[1] == cur:
                close(True)
                cur, phase = None, ""
                continue
            if kind == "DONE":
                done = True
                continue
        if phase == "out":
            out.append(line)
        elif phase == "err":
            err.append(line)
    if cur is not None:
        close(False)
    return results, done

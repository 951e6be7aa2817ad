"""One round trip per node per stage: a generated bash script that frames each command's output.

What a node prints cannot forge a result:
- The launcher reads the whole script before the first command runs and then points its stdin
  at /dev/null, so no command can read the rest of the script (nor the nonce) from the session.
- Each command runs under its own `timeout`, with stdin from /dev/null and its stdout and stderr
  in two private files (never the session's descriptors): a process it leaves behind holds only
  those files, so it neither stalls the session nor writes into another command's output.
- After the command exits, the script (not the command) writes a frame: a nonce-tagged header
  with the rc, timestamps and the byte length of each stream, then exactly those bytes. The
  controller reads frames by length, so a command's bytes are never taken for a frame.
- Output is bounded on the node: `ulimit -f` caps each file (`max_bytes`); a command cut there
  is marked truncated (and judged ERROR), and the controller caps what it reads per session.
- The files live in a fresh directory (`mktemp -d`, mode 0700) whose name says nothing of the
  nonce (a one-way tag of it and random characters), and the shell closes every descriptor it
  inherited beyond 0-2 first.
- A command can still reach the shell's stdout through /proc/<pid>/fd (and the node's root can
  read the nonce out of the shell's memory), so frames are not the session's proof: they must
  come in the script's order, nothing may follow DONE, and the shell must then exit 0 (each
  transport reports how it ended: `Session.ended`). Otherwise the session is an ERROR, every
  command of it (docs/threat-model.md).

Nothing is forked per command beyond `timeout` and the command: the files are read back with
bash's no-fork `$(<file)`; one `mktemp` makes their directory, one `rm` clears it at the end.
On a simulated fleet of 1,024 nodes every extra process is ~1-2 ms of the shared 2 cores.

Quoting happens here and nowhere else: a command is its parts (`CommandSpec.argv`, a spawn's
command), each argument quoted once by `command_line`, which is also the text results and
evidence show.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from nodegate.core.values import CommandResult, CommandSpec, Part, Shell

# Characters that need a shell to interpret; a command without any runs as a plain argv.
_SHELL_META = re.compile(r"[|&;<>()$`\\\"'*?\[\]{}~#=\n!]")
# SIGTERM at the deadline, SIGKILL 2 s later if the command ignores TERM.
KILL_AFTER_S = 2.0
SESSION_SLACK_S = 5.0  # a session's deadline: every command's, plus this
# rc values `timeout` uses for a command stopped at its deadline (TERM, then KILL).
TIMEOUT_RCS = frozenset({124, 137})
# Bytes one command may write to each of its streams before it is cut (8 MiB: `lspci -vvv` of
# an 8-GPU node is ~0.2 MiB, `nvidia-smi -q` ~0.1 MiB, a day of kernel log a few MiB).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024

# Read the whole script, then stdin is /dev/null: the running script is only in bash's memory.
LAUNCHER = "exec bash --noprofile --norc -c " + shlex.quote(
    '_nf_s=$(</dev/stdin); exec </dev/null; eval "$_nf_s"'
)

# The frame writer, defined once per script: `_nf_f ID RC T0 T1` (its names start `_nf_`,
# kept apart from any a node's shell functions use). A sentinel byte appended to
# each file survives `$(<file)` (which drops trailing newlines); flags say what went wrong:
# o/e the sentinel could not be appended (the file is at its cap), O/E NUL bytes were dropped.
_FRAME_FN = r"""_nf_f() {
  local o e fl=
  printf x >>"$_nf_p/$1.o" 2>/dev/null || fl+=o
  printf x >>"$_nf_p/$1.e" 2>/dev/null || fl+=e
  { o=$(<"$_nf_p/$1.o"); } 2>|"$_nf_p/w"; [ -s "$_nf_p/w" ] && fl+=O
  { e=$(<"$_nf_p/$1.e"); } 2>|"$_nf_p/w"; [ -s "$_nf_p/w" ] && fl+=E
  printf '@@%s F %s %s %s %s %d %d %s\n%s%s' "$_nf_n" "$1" "$2" "$3" "$4" "${#o}" "${#e}" \
    "${fl:--}" "$o" "$e"
}"""
# Close what the shell inherited beyond stdin, stdout and stderr (no fork: a glob of its own
# descriptors), so that no command inherits a descriptor of the session's.
# (No redirection on the loop: bash would keep a copy of stderr among the descriptors it closes.)
_CLOSE_FDS = (
    'for _nf_d in /proc/$$/fd/*; do _nf_d=${_nf_d##*/}; [ "$_nf_d" -gt 2 ] 2>/dev/null &&'
    ' eval "exec $_nf_d>&-"; done'
)


@dataclass(frozen=True, slots=True)
class StageScript:
    """A script to feed on stdin of `LAUNCHER`, the nonce its frames carry, its output cap."""

    nonce: str
    text: str
    specs: tuple[CommandSpec, ...]
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def deadline_s(self) -> float:
        """Upper bound for the whole session: every command's deadline plus slack."""
        return sum(s.timeout_s + KILL_AFTER_S for s in self.specs) + SESSION_SLACK_S

    @property
    def max_session_bytes(self) -> int:
        """What an honest node can send at most: two capped streams per command, framing."""
        return len(self.specs) * (2 * (self.max_bytes + 1024) + 256) + 65536


def session_tag(nonce: str) -> str:
    """The session's name on the node: a one-way tag of its nonce (a command that reads the
    tag from its own file paths learns nothing of the nonce its frames would need)."""
    return hashlib.sha256(b"nodegate session " + nonce.encode()).hexdigest()[:16]


def command_line(argv: Sequence[Part]) -> str:
    """A command's line: each `str` part one argument (quoted), `Shell` parts as written.

    Two arguments in a row are separated by one space; `Shell` text brings its own spaces.

    >>> command_line(("grep", "-H", "a b;c", Shell(" /sys/*/x 2>/dev/null")))
    "grep -H 'a b;c' /sys/*/x 2>/dev/null"
    """
    if isinstance(argv, (str, Shell)):
        raise TypeError(f"a command is a sequence of parts, not {argv!r}")
    return _line(tuple(argv))


@lru_cache(maxsize=4096)
def _line(argv: tuple[Part, ...]) -> str:
    out: list[str] = []
    after_arg = False
    for part in argv:
        if isinstance(part, Shell):
            out.append(part.text)
            after_arg = False
        elif isinstance(part, str):
            out.append((" " if after_arg else "") + shlex.quote(part))
            after_arg = True
        else:
            raise TypeError(f"a command part is a str or a Shell, not {part!r}")
    return "".join(out)


def in_sh_under_timeout(cmd: str, timeout_s: float) -> str:
    """A rendered line run by `sh -c` under `timeout` (a spawned command's, `process.wrap`).

    >>> in_sh_under_timeout("ls /sys/* | wc -l", 5)
    "timeout -k 2 5 sh -c 'ls /sys/* | wc -l'"
    """
    return f"timeout -k {KILL_AFTER_S:g} {timeout_s:g} sh -c {shlex.quote(cmd)}"


@lru_cache(maxsize=4096)
def _invocation_of(cmd: str, timeout_s: float) -> str:
    """`cmd` under `timeout`: a plain line runs as its argv, one with shell syntax in `sh -c`."""
    t = f"{timeout_s:g}"
    if _SHELL_META.search(cmd) is None and cmd.strip():
        argv = shlex.split(cmd)
        return f"timeout -k {KILL_AFTER_S:g} {t} " + " ".join(shlex.quote(a) for a in argv)
    return in_sh_under_timeout(cmd, timeout_s)


def build_script(
    specs: Sequence[CommandSpec], nonce: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> StageScript:
    """Render the stage script for `specs` (command ids must be unique and simple)."""
    n = nonce or secrets.token_hex(16)
    seen: set[str] = set()
    now = '"${EPOCHREALTIME:-$SECONDS}"'
    blocks = max_bytes // 1024 + 1  # ulimit -f counts 1 KiB blocks in bash
    lines = [
        "set +e +u",
        "export LC_ALL=C",
        "umask 077",
        "trap '' XFSZ",  # a capped write fails (EFBIG) instead of killing the writer
        f"ulimit -f {blocks} 2>/dev/null",
        f"_nf_n={n}",
        _CLOSE_FDS,
        '_nf_t=/dev/shm; { [ -d "$_nf_t" ] && [ -w "$_nf_t" ]; } || _nf_t=${TMPDIR:-/tmp}',
        # A fresh private directory per session (tasks of one srun step share the nonce and
        # may share a machine); its name is a one-way tag of the nonce (what an interrupted
        # run's hang-up finds the session by: transport.hangup) and random characters.
        f'_nf_p=$(mktemp -d "$_nf_t/.nodegate.{session_tag(n)}.XXXXXXXXXX") || exit 70',
        """trap 'rm -rf -- "$_nf_p"' EXIT""",
        _FRAME_FN,
    ]
    for spec in specs:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", spec.id) or spec.id in seen:
            raise ValueError(f"command id {spec.id!r} must be unique and [A-Za-z0-9_.:-]+")
        seen.add(spec.id)
        run = _invocation_of(command_line(spec.argv), spec.timeout_s)
        lines += [
            f'_nf_0={now}; printf \'@@%s B %s %s\\n\' "$_nf_n" {spec.id} "$_nf_0"',
            f'{run} </dev/null >"$_nf_p/{spec.id}.o" 2>"$_nf_p/{spec.id}.e"; _nf_rc=$?',
            f'_nf_f {spec.id} "$_nf_rc" "$_nf_0" {now}',
        ]
    lines += ["printf '@@%s DONE\\n' \"$_nf_n\"", "exit 0"]
    text = "\n".join(lines) + "\n"
    return StageScript(nonce=n, text=text, specs=tuple(specs), max_bytes=max_bytes)


def _seconds(stamp: str) -> float | None:
    try:
        return float(stamp)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Frames:
    """What a session's stdout held: results by command id, and how the stream ended."""

    results: dict[str, CommandResult]
    done: bool  # the script reached its end
    problem: str | None  # bytes that are not a frame: what and where (the rest is not read)


def _header(data: bytes, pos: int, marker: bytes) -> tuple[list[str], int] | None:
    """The header at `pos` (fields after the marker) and where its payload starts."""
    if not data.startswith(marker, pos):
        return None
    end = data.find(b"\n", pos, pos + 512)
    if end < 0:
        return None
    try:
        fields = data[pos + len(marker) : end].decode("ascii").split()
    except UnicodeDecodeError:
        return None
    return (fields, end + 1) if fields else None


def _stream(raw: bytes, appended: bool) -> tuple[str, bool]:
    """A stream's text without the sentinel; True when it was cut at the cap."""
    if appended and raw.endswith(b"x"):
        return raw[:-1].decode("utf-8", "replace"), False
    return raw.decode("utf-8", "replace"), True


def parse_frames(script: StageScript, stdout: bytes) -> Frames:
    """Split a session's output into per-command results.

    The honest script writes, per command in order, a B marker then its F frame, then DONE
    and nothing after it; any other sequence (a frame out of order or twice, DONE early,
    bytes after DONE) is a `problem`. A command that started but whose frame never came
    (the session was cut off) comes back with rc None, timed out; commands that never
    started are absent.
    """
    marker = f"@@{script.nonce} ".encode()
    specs = script.specs
    results: dict[str, CommandResult] = {}
    pos, done, problem, due = 0, False, None, 0  # due: index of the command whose frame is next
    while pos < len(stdout) and problem is None:
        head = _header(stdout, pos, marker)
        fields = head[0] if head else []
        kind, cid = fields[0] if fields else "", fields[1] if len(fields) > 1 else ""
        nxt = specs[due].id if due < len(specs) else None
        if head is not None and kind == "DONE" and len(fields) == 1:
            if nxt is not None:
                problem = f"DONE at offset {pos} before the frame of {nxt}"
            elif head[1] < len(stdout):
                problem = (
                    f"bytes after DONE at offset {head[1]}: {stdout[head[1] : head[1] + 40]!r}"
                )
            done, pos = problem is None, head[1]
            continue
        if (
            head is not None
            and kind in ("B", "F")
            and cid != nxt
            and any(cid == s.id for s in specs)
        ):
            problem = f"frame of {cid} out of order at offset {pos} (next due: {nxt or 'DONE'})"
            break
        if head is not None and kind == "B" and len(fields) == 3 and cid == nxt:
            if cid in results:
                problem = f"frame of {cid} out of order at offset {pos} (started twice)"
                break
            results[cid] = CommandResult(
                cid, command_line(specs[due].argv), None, "", "", None, timed_out=True
            )
            pos = head[1]
            continue
        if head is not None and kind == "F" and len(fields) == 8 and cid == nxt:
            _, _, rc, t0, t1, n_out, n_err, flags = fields
            if n_out.isdigit() and n_err.isdigit() and rc.lstrip("-").isdigit():
                start, mid = head[1], head[1] + int(n_out)
                stop = mid + int(n_err)
                if stop <= len(stdout):
                    out, err = stdout[start:mid], stdout[mid:stop]
                    spec = specs[due]
                    results[cid] = _result(spec, int(rc), t0, t1, flags, out, err, script.max_bytes)
                    pos, due = stop, due + 1
                    continue
                problem = f"session cut inside the output of {cid}"
                break
        problem = f"bytes that are not a frame at offset {pos}: {stdout[pos : pos + 40]!r}"
    return Frames(results, done, problem)


def _result(
    spec: CommandSpec, rc: int, t0: str, t1: str, flags: str, out: bytes, err: bytes, cap: int
) -> CommandResult:
    stdout, cut_out = _stream(out, "o" not in flags)
    stderr, cut_err = _stream(err, "e" not in flags)
    start, end = _seconds(t0), _seconds(t1)
    dur = end - start if start is not None and end is not None else None
    notes = [
        note
        for cond, note in (
            (cut_out or len(out) > cap, f"stdout cut at {cap} bytes"),
            (cut_err or len(err) > cap, f"stderr cut at {cap} bytes"),
            ("O" in flags, "NUL bytes in stdout (dropped)"),
            ("E" in flags, "NUL bytes in stderr (dropped)"),
        )
        if cond
    ]
    return CommandResult(
        id=spec.id,
        cmd=command_line(spec.argv),
        rc=rc,
        stdout=stdout,
        stderr=stderr,
        duration_s=round(dur, 6) if dur is not None else None,
        timed_out=rc in TIMEOUT_RCS,
        truncated="; ".join(notes) or None,
    )

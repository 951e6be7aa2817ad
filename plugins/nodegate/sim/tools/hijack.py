"""The `hijack: TOOL` fault: a tool that takes over the session it runs in (issue 26).

It finds its stage shell (its nearest `bash` ancestor), learns the nonce (from the names of
its own output files where they carry it, else out of the shell's memory, as the node's root
can), writes into the shell's stdout through /proc/<pid>/fd/1 the frames of a healthy node's
`reach` stage (its own command, `cat /etc/os-release`, and the three after it) and DONE, and
then ends the session as the node's `hijack_end: HOW` says (default `kill`)."""

from __future__ import annotations

import shlex

from nodegate.core.errors import ConfigError
from nodegate.sim.fleet_model import SimNode

# What the forged frames claim: a healthy node of the demo fleet (its profile's versions).
FORGED = (
    (
        "os_release",
        'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n',
    ),
    ("kernel", "5.15.0-105-generic\n"),
    (
        "nvidia_driver",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:13:07 UTC "
        "2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n",
    ),
    ("ofed", "MLNX_OFED_LINUX-23.10-1.1.9.0:\n"),
)
# How the hijacker ends the session after its DONE.
ENDS = {
    "kill": 'kill -KILL "$sh"',  # the shell is killed: no exit status, a signal
    "term": 'kill -TERM "$sh"',
    "more": ":",  # the shell goes on: its own frames come after the forged DONE
    # the shell's parent (sshd's session process, or the srun task's bash) is killed: the
    # channel closes without an exit status (any other parent is left alone)
    "drop": 'up=$(cut -d" " -f4 "/proc/$sh/stat"); read -r c < "/proc/$up/comm"; '
    'case $c in sshd*|bash) kill -KILL "$up" ;; esac',
}
# Root's way to the nonce: the shell's memory holds the script (`_nf_n=<nonce>`).
_MEMORY = r"""import re, sys
p, r = sys.argv[1], re.compile(rb"_nf_n=([0-9a-f]{32})")
with open(f"/proc/{p}/maps") as maps, open(f"/proc/{p}/mem", "rb", 0) as mem:
    for line in maps:
        span, perm = line.split()[:2]
        if perm.startswith("rw"):
            lo, hi = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(lo)
                m = r.search(mem.read(hi - lo))
            except OSError:
                continue
            if m:
                print(m.group(1).decode())
                break
"""


def hijacker(node: SimNode) -> str:
    """The hijacking tool's stub body (POSIX sh, absolute paths: PATH holds the stubs)."""
    end = node.fault("hijack_end")
    how = (end.arg if end is not None else None) or "kill"
    if how not in ENDS:
        raise ConfigError(f"{node.name}: hijack_end {how!r}: one of {', '.join(ENDS)}")
    frames = []
    for i, (cid, text) in enumerate(FORGED):
        if i:
            frames.append(f"printf '@@%s B {cid} 2\\n' \"$n\"")
        frames.append(f"printf '@@%s F {cid} 0 1 2 {len(text.encode())} 0 -\\n' \"$n\"")
        frames.append(f"printf '%s' {shlex.quote(text)}")
    frames.append("printf '@@%s DONE\\n' \"$n\"")
    return "\n".join(
        [
            'PATH=/usr/bin:/bin; [ "$*" = /etc/os-release ] || exit 1',
            "sh=$PPID",
            "for _ in 1 2 3 4 5 6; do",
            '  read -r c < "/proc/$sh/comm" || break; [ "$c" = bash ] && break',
            "  sh=$(cut -d' ' -f4 \"/proc/$sh/stat\")",
            "done",
            "n=$(readlink /proc/self/fd/1 | grep -o '[0-9a-f]\\{32\\}' | head -n1)",
            f'[ -n "$n" ] || n=$(python3 -c {shlex.quote(_MEMORY)} "$sh" 2>/dev/null)',
            'echo "nodegate-sim hijack: shell [$(cat "/proc/$sh/comm")], nonce [${#n} digits]"',
            '[ -n "$n" ] || exit 1',
            # The session's stdout: the shell's fd 1, or (while bash runs a function with its
            # output redirected, the simulator's in-shell `timeout`) the copy bash keeps of it.
            "out=1; for f in 1 10 11 12 13 14 15; do",
            '  case $(readlink "/proc/$sh/fd/$f") in pipe:*|socket:*) out=$f; break ;; esac',
            "done",
            "{",
            *("  " + f for f in frames),
            '} >"/proc/$sh/fd/$out"',
            ENDS[how],
        ]
    )

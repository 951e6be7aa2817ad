"""Ending a node's stage session at once (an interrupted run): the controller closes the
session's channel, then kills every process of the node's session by a second command.

Closing the channel alone ends only a script between commands (its next write to the session
fails); a command it waits on runs on to its own deadline (`timeout` is in its own process
group, and no tty hangs it up). The session's processes are found on the node by the script's
tag of its nonce: each command writes to a file in the session's private directory
(`.nodegate.<tag>.<random>/<id>.o`, `transport.script.session_tag`), so whatever holds one as
its stdout belongs to the session, and every process of that
process's session (the script's shell, `timeout`, the command and its children) is killed.
"""

from __future__ import annotations

import re

from nodegate.transport.script import session_tag

HANGUP_GRACE_S = 5.0  # the kill command's own bound


def session_kill_script(nonce: str) -> str:
    """`sh` text that SIGKILLs every process of the session running the script of `nonce`.

    >>> f"*/.nodegate.{session_tag('ab12')}.*/*" in session_kill_script("ab12")
    True
    """
    if not re.fullmatch(r"[0-9a-f]{1,64}", nonce):
        raise ValueError(f"not a script nonce: {nonce!r}")
    tag = session_tag(nonce)
    return (
        "s=; for p in /proc/[0-9]*; do\n"
        '  case $(readlink "$p/fd/1" 2>/dev/null) in\n'
        f"    */.nodegate.{tag}.*/*)\n"
        '      read -r st < "$p/stat" 2>/dev/null && set -- ${st##*) } && s="$s $4";;\n'
        "  esac\n"
        "done\n"
        '[ -n "$s" ] || exit 0\n'
        "for p in /proc/[0-9]*; do\n"
        '  read -r st < "$p/stat" 2>/dev/null || continue; set -- ${st##*) }\n'
        '  for x in $s; do [ "$4" = "$x" ] && kill -KILL "${p#/proc/}" 2>/dev/null; done\n'
        "done\n"
        "exit 0\n"
    )

"""OpenSSH lexical helpers: argument splitting, %-tokens, ${ENV}, time values, ProxyJump syntax."""

from __future__ import annotations

import getpass
import os
import pwd
import re

_TIME_RE = re.compile(r"(\d+)([sSmMhHdDwW]?)")
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_HOP_RE = re.compile(
    r"^(?:(?P<user>[^\s@,:/\-][^\s@,]*)@)?(?P<host>[A-Za-z0-9_.][A-Za-z0-9_.-]*)(?::(?P<port>\d+))?$"
)
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def split_args(text: str) -> list[str]:
    """Split like OpenSSH's argv_split(): quotes, backslash escapes, '#' starts a comment.

    >>> split_args('"/my keys/id" # comment')
    ['/my keys/id']
    """
    args: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t":
            i += 1
            continue
        if text[i] == "#":
            break
        arg: list[str] = []
        quote = ""
        while i < n:
            c = text[i]
            nxt = text[i + 1] if i + 1 < n else ""
            if c == "\\" and (nxt in ("'", '"', "\\") or (not quote and nxt == " ")):
                arg.append(nxt)
                i += 2
                continue
            if not quote and c in " \t":
                break
            if not quote and c in "'\"":
                quote = c
            elif quote and c == quote:
                quote = ""
            else:
                arg.append(c)
            i += 1
        if quote:
            raise ValueError(f"unterminated {quote} quote")
        args.append("".join(arg))
    return args


def expand_tokens(value: str, tokens: dict[str, str]) -> str:
    """Replace %x tokens from `tokens` and %% with %; an unknown token is a ValueError.

    >>> expand_tokens("%h.example.com:%%", {"h": "gpu1"})
    'gpu1.example.com:%'
    """
    out: list[str] = []
    i = 0
    while i < len(value):
        c = value[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        key = value[i + 1 : i + 2]
        if key == "%":
            out.append("%")
        elif key in tokens:
            out.append(tokens[key])
        else:
            raise ValueError(f"token %{key} is not supported here" if key else "trailing '%'")
        i += 2
    return "".join(out)


def expand_env(value: str) -> str:
    """Replace ${NAME} with the environment variable (OpenSSH does for file options)."""

    def repl(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise ValueError(f"environment variable {m.group(1)} is not set")
        return os.environ[m.group(1)]

    return _ENV_RE.sub(repl, value)


def convtime(value: str) -> int | None:
    """Seconds from an OpenSSH time value ('90', '1m30s'); None if malformed."""
    pos, total = 0, 0
    while pos < len(value):
        m = _TIME_RE.match(value, pos)
        if m is None:
            return None
        total += int(m.group(1)) * _TIME_UNITS[m.group(2).lower()]
        pos = m.end()
    return total if value else None


def local_user() -> str:
    """The local user name, as OpenSSH takes it (passwd entry of the uid)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return getpass.getuser()


def check_proxy_jump(value: str) -> str | None:
    """Why `value` is not a '[user@]host[:port]' list (or 'none'); None when it is fine.

    >>> check_proxy_jump("admin@bastion:2222,jump2") is None
    True
    """
    if value.lower() == "none":
        return None
    for hop in value.split(","):
        m = _HOP_RE.match(hop)
        if m is None:
            return f"hop {hop!r} is not [user@]host[:port]"
        if m.group("port") is not None and not 1 <= int(m.group("port")) <= 65535:
            return f"port in hop {hop!r} out of range (expected 1..65535)"
    return None

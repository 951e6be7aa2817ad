"""OpenSSH client config (ssh_config) parsed once per file and resolved per host alias.

Lookups go through an index of blocks whose Host patterns are all literal names, so resolving
every host of a 1,024-host file touches each host's own block plus the wildcard/Match blocks,
not all 1,024 blocks per host (the per-host full scan cost ~18 s in total with paramiko).
"""

from __future__ import annotations

import functools
import glob
import heapq
import os
import re
import socket
from dataclasses import dataclass

from nodegate.core.errors import ConfigError
from nodegate.inventory.sshtokens import (
    check_proxy_jump,
    convtime,
    expand_env,
    expand_tokens,
    local_user,
    split_args,
)

_MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
_ONE_ARG = frozenset(
    {"hostname", "user", "port", "identityfile", "proxyjump", "connecttimeout", "hostkeyalias",
     "checkhostip", "hashknownhosts"}
)  # fmt: skip
_KEYWORDS = _ONE_ARG | {"host", "match", "include", "stricthostkeychecking", "proxycommand"}
_YES_NO = {"yes": True, "true": True, "no": False, "false": False}
_STRICT = {
    "yes": "yes", "true": "yes", "no": "no", "false": "no", "off": "no",
    "ask": "ask", "accept-new": "accept-new",
}  # fmt: skip
_LINE_RE = re.compile(
    r"^\s*([^\s=]+)\s*(?:=\s*)?(.*)$"
)  # OpenSSH strdelim: `Key Value`, `Key=Value`


@dataclass(frozen=True, slots=True)
class ResolvedHost:
    """Effective client settings for one alias; None/() = not set in the file (client default)."""

    alias: str
    hostname: str
    user: str | None
    port: int | None
    identity_files: tuple[str, ...]
    proxy_jump: str | None
    user_known_hosts_files: tuple[str, ...]
    strict_host_key_checking: str | None  # "yes" | "no" | "ask" | "accept-new"
    connect_timeout_s: float | None
    host_key_alias: str | None = None  # known_hosts name instead of the host name (and port)
    check_host_ip: bool | None = None  # OpenSSH default no (since 8.5)
    hash_known_hosts: bool | None = None  # write learned names hashed (`|1|salt|hash`)


@dataclass(frozen=True, slots=True)
class _Cond:
    kind: str  # "host" (Host line), "all", "mhost" (Match host), "morig" (Match originalhost)
    patterns: tuple[str, ...] = ()
    negate: bool = False


@dataclass(frozen=True, slots=True)
class _Option:
    key: str
    args: tuple[str, ...]
    where: str  # "file:line"


@dataclass(frozen=True, slots=True)
class _Block:
    conds: tuple[_Cond, ...]  # all must hold: conditions of enclosing Include lines + own header
    options: tuple[_Option, ...]


@functools.lru_cache(maxsize=4096)
def _pattern(pattern: str) -> re.Pattern[str]:
    # OpenSSH match_pattern(): only '*' and '?' are special.
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body + r"\Z", re.DOTALL)


def _host_line_matches(alias: str, patterns: tuple[str, ...]) -> bool:
    """Host line: any negated match vetoes, else any positive match (case-sensitive)."""
    positive = False
    for p in patterns:
        negated = p.startswith("!")
        if _pattern(p[1:] if negated else p).match(alias):
            if negated:
                return False
            positive = True
    return positive


def _pattern_list_matches(value: str, patterns: tuple[str, ...]) -> bool:
    """Match criterion list (comma-separated), compared lowercased like match_hostname()."""
    value, positive = value.lower(), False
    for p in patterns:
        negated = p.startswith("!")
        if _pattern((p[1:] if negated else p).lower()).match(value):
            if negated:
                return False
            positive = True
    return positive


def _is_literal(pattern: str) -> bool:
    return not pattern.startswith("!") and "*" not in pattern and "?" not in pattern


def _check_option(key: str, args: tuple[str, ...], where: str) -> None:
    """Validate the options we use, at load time, as OpenSSH would (bad value = error)."""
    if key in _ONE_ARG and len(args) != 1:
        raise ConfigError(f"{where}: {key} takes one argument, got {len(args)}")
    value = args[0]
    if key == "port" and _port(value) is None:
        raise ConfigError(f"{where}: bad Port {value!r} (expected 1..65535)")
    if key == "connecttimeout" and convtime(value) is None:
        raise ConfigError(f"{where}: bad ConnectTimeout {value!r} (expected seconds, e.g. 10)")
    if key == "stricthostkeychecking" and value.lower() not in _STRICT:
        raise ConfigError(f"{where}: bad StrictHostKeyChecking {value!r}")
    if key in ("checkhostip", "hashknownhosts") and value.lower() not in _YES_NO:
        name = {"checkhostip": "CheckHostIP", "hashknownhosts": "HashKnownHosts"}[key]
        raise ConfigError(f"{where}: bad {name} {value!r} (expected yes or no)")
    if key == "proxyjump" and "%" not in value and (problem := check_proxy_jump(value)):
        raise ConfigError(f"{where}: bad ProxyJump: {problem}")


def _yes_no(opt: _Option | None) -> bool | None:
    return None if opt is None else _YES_NO[opt.args[0].lower()]


def _port(value: str) -> int | None:
    if value.isdigit():
        port = int(value)
    else:
        try:  # a2port() also accepts service names ("Port ssh")
            port = socket.getservbyname(value, "tcp")
        except OSError:
            return None
    return port if 1 <= port <= 65535 else None


def _match_conds(args: tuple[str, ...], where: str) -> tuple[_Cond, ...]:
    conds: list[_Cond] = []
    i = 0
    while i < len(args):
        negate = args[i].startswith("!")
        criterion = args[i][1:].lower() if negate else args[i].lower()
        if criterion == "all":
            if negate or len(args) != 1:
                raise ConfigError(f"{where}: 'Match all' cannot be combined or negated here")
            conds.append(_Cond("all"))
            i += 1
        elif criterion in ("host", "originalhost"):
            if i + 1 >= len(args):
                raise ConfigError(f"{where}: Match {criterion} needs a pattern list")
            kind = "mhost" if criterion == "host" else "morig"
            conds.append(_Cond(kind, tuple(args[i + 1].split(",")), negate))
            i += 2
        else:
            raise ConfigError(
                f"{where}: Match criterion {criterion!r} is not supported "
                "(supported: all, host, originalhost)"
            )
    if not conds:
        raise ConfigError(f"{where}: Match needs a criterion")
    return tuple(conds)


def _checked_line(key: str, keyword: str, rest: str, where: str) -> tuple[str, ...]:
    """One line's arguments, checked as OpenSSH would (a bad value is an error)."""
    try:
        args = tuple(split_args(rest))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if not args:
        raise ConfigError(f"{where}: no argument after keyword {keyword!r}")
    if key == "match":
        _match_conds(args, where)
    elif key == "include":
        if token := next((a for a in args if "%" in a), None):
            raise ConfigError(f"{where}: tokens in Include are not supported: {token!r}")
    elif key != "host":
        _check_option(key, args, where)
    return args


class _Parser:
    """Flattens a config and its Includes into blocks in file order."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = []

    def parse_file(self, path: str, outer: tuple[_Cond, ...], depth: int) -> None:
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                lines = fh.read().splitlines()
        except FileNotFoundError:
            raise ConfigError(f"{path}: ssh_config not found") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read ssh_config: {exc.strerror}") from None
        conds: tuple[_Cond, ...] = outer
        opts: list[_Option] = []
        for lineno, raw in enumerate(lines, 1):
            where = f"{path}:{lineno}"
            m = _LINE_RE.match(raw)
            if m is None or m.group(1).startswith("#"):
                continue
            key = m.group(1).lower()
            try:
                args = _checked_line(key, m.group(1), m.group(2), where)
            except ConfigError:
                if depth == 0:
                    raise
                # An Include may name any file (a key, /etc/shadow): never echo its lines.
                what = f"bad {m.group(1)} line" if key in _KEYWORDS else "not an ssh_config line"
                raise ConfigError(f"{where}: {what} (Included file: content not shown)") from None
            if key in ("host", "match", "include") and opts:
                self.blocks.append(_Block(conds, tuple(opts)))
                opts = []
            if key == "host":
                conds = (*outer, _Cond("host", args))
            elif key == "match":
                conds = (*outer, *_match_conds(args, where))
            elif key == "include":
                self._include(args, conds, depth, where)
            else:
                opts.append(_Option(key, args, where))
        if opts:
            self.blocks.append(_Block(conds, tuple(opts)))

    def _include(
        self, args: tuple[str, ...], conds: tuple[_Cond, ...], depth: int, where: str
    ) -> None:
        if depth >= _MAX_INCLUDE_DEPTH:
            raise ConfigError(f"{where}: Include nested too deeply (a loop?)")
        for arg in args:
            path = os.path.expanduser(arg)
            if not os.path.isabs(path):  # relative to ~/.ssh, as for a user config
                path = os.path.join(os.path.expanduser("~/.ssh"), path)
            # OpenSSH globs and silently skips patterns matching nothing.
            for found in sorted(glob.glob(path)):
                if os.path.isdir(found):
                    raise ConfigError(f"{where}: Include {found!r} is a directory")
                self.parse_file(found, conds, depth + 1)


class SSHConfig:
    """A parsed ssh_config: `SSHConfig.load(path).resolve("gpu017")`."""

    def __init__(self, path: str, blocks: list[_Block]) -> None:
        self.path = path
        self._blocks = blocks
        self._index: dict[str, list[int]] = {}
        self._always: list[int] = []  # wildcard, negated, Match and unconditional blocks
        for pos, block in enumerate(blocks):
            conds = block.conds
            if (
                len(conds) == 1
                and conds[0].kind == "host"
                and all(map(_is_literal, conds[0].patterns))
            ):
                for name in dict.fromkeys(conds[0].patterns):
                    self._index.setdefault(name, []).append(pos)
            else:
                self._always.append(pos)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SSHConfig:
        """Parse `path` and its Includes once."""
        parser = _Parser()
        parser.parse_file(os.fspath(path), (), 0)
        return cls(os.fspath(path), parser.blocks)

    def candidates(self, alias: str) -> tuple[int, ...]:
        """Positions of the blocks a lookup of `alias` evaluates, in file order."""
        return tuple(heapq.merge(self._index.get(alias, ()), self._always))

    def _applies(self, block: _Block, alias: str, hostname: str) -> bool:
        for c in block.conds:
            if c.kind == "host":
                ok = _host_line_matches(alias, c.patterns)
            elif c.kind == "all":
                ok = True
            else:
                ok = _pattern_list_matches(hostname if c.kind == "mhost" else alias, c.patterns)
                ok = ok != c.negate
            if not ok:
                return False
        return True

    def resolve(self, alias: str) -> ResolvedHost:
        """Effective settings for `alias`: blocks in file order, first obtained value wins."""
        first: dict[str, _Option] = {}
        identity: list[_Option] = []
        hostname = alias  # what `Match host` compares: HostName so far, else the alias
        for pos in self.candidates(alias):
            block = self._blocks[pos]
            if not self._applies(block, alias, hostname):
                continue
            for opt in block.options:
                if opt.key == "identityfile":
                    identity.append(opt)
                elif opt.key == "proxyjump":
                    # ProxyJump is taken unless a ProxyCommand (even "none") came first.
                    if "proxycommand" not in first:
                        first.setdefault("proxyjump", opt)
                elif opt.key == "proxycommand":
                    jump = first.get("proxyjump")
                    if jump is None or jump.args[0] == "none":
                        first.setdefault("proxycommand", opt)
                elif opt.key not in first:
                    first[opt.key] = opt
                    if opt.key == "hostname":
                        hostname = self._hostname(opt, alias)
        return self._finish(alias, first, identity)

    @staticmethod
    def _hostname(opt: _Option, alias: str) -> str:
        try:
            return expand_tokens(opt.args[0], {"h": alias})
        except ValueError as exc:
            raise ConfigError(f"{opt.where}: HostName: {exc}") from None

    def _finish(
        self, alias: str, first: dict[str, _Option], identity: list[_Option]
    ) -> ResolvedHost:
        hostname = self._hostname(first["hostname"], alias) if "hostname" in first else alias
        hostname = hostname.lower()  # ssh lowercases the final host name (see `ssh -G`)
        user = first["user"].args[0] if "user" in first else None
        port = _port(first["port"].args[0]) if "port" in first else None
        command = first.get("proxycommand")
        if command is not None and command.args[0].lower() != "none":
            raise ConfigError(
                f"{command.where}: ProxyCommand (used for {alias}) is not supported; use ProxyJump"
            )
        jump_opt = first.get("proxyjump")
        jump = jump_opt.args[0] if jump_opt and jump_opt.args[0].lower() != "none" else None
        local = local_user()
        alias_opt = first.get("hostkeyalias")
        host_key_alias = alias_opt.args[0] if alias_opt else None
        key_alias = host_key_alias or alias
        tokens = {
            "h": hostname, "n": alias, "p": str(port or 22), "r": user or local, "u": local,
            "d": os.path.expanduser("~"), "i": str(os.getuid()), "l": socket.gethostname(),
            "L": socket.gethostname().split(".")[0], "k": key_alias,
        }  # fmt: skip
        if jump is not None and jump_opt is not None:
            try:
                jump = expand_tokens(jump, {k: tokens[k] for k in "hnpr"})
            except ValueError as exc:
                raise ConfigError(f"{jump_opt.where}: ProxyJump: {exc}") from None
            if problem := check_proxy_jump(jump):
                raise ConfigError(f"{jump_opt.where}: bad ProxyJump for {alias}: {problem}")
        tokens["j"] = jump or ""
        files = [self._file(o, a, tokens) for o in identity for a in o.args]
        known = first.get("userknownhostsfile")
        timeout = convtime(first["connecttimeout"].args[0]) if "connecttimeout" in first else None
        strict = first.get("stricthostkeychecking")
        return ResolvedHost(
            alias=alias,
            hostname=hostname,
            user=user,
            port=port,
            identity_files=tuple(dict.fromkeys(files)),  # OpenSSH skips duplicate identities
            proxy_jump=jump,
            user_known_hosts_files=tuple(self._file(known, a, tokens) for a in known.args)
            if known
            else (),
            strict_host_key_checking=_STRICT[strict.args[0].lower()] if strict else None,
            connect_timeout_s=float(timeout) if timeout else None,  # 0 = no timeout
            host_key_alias=host_key_alias,
            check_host_ip=_yes_no(first.get("checkhostip")),
            hash_known_hosts=_yes_no(first.get("hashknownhosts")),
        )

    @staticmethod
    def _file(opt: _Option, value: str, tokens: dict[str, str]) -> str:
        """~, ${ENV} and %-tokens expanded, in OpenSSH's order."""
        try:
            value = expand_env(os.path.expanduser(value))
            return expand_tokens(value, tokens)
        except ValueError as exc:
            raise ConfigError(f"{opt.where}: {opt.key}: {exc}") from None

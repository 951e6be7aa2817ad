"""Where and how to reach each node over SSH, resolved once per run from inventory + ssh_config.

Inventory settings override ssh_config, which overrides OpenSSH defaults (like `ssh -o`). Each
ssh_config file is parsed once and indexed (a per-host scan of a 1,024-host file costs ~18 s in
paramiko); a ProxyJump alias is resolved through the same file.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from nodegate.core.errors import ConfigError
from nodegate.inventory import Node, SSHConfig
from nodegate.inventory.sshconfig import ResolvedHost

DEFAULT_CONNECT_TIMEOUT_S = 10.0
MAX_JUMP_HOPS = 4


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how to reach one node, resolved once from inventory + ssh_config."""

    node: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    known_hosts: tuple[str, ...]
    proxy_jump: Target | None
    connect_timeout_s: float
    host_key_alias: str | None = None
    check_host_ip: bool = False
    hash_known_hosts: bool = False

    @property
    def where(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


@dataclass(frozen=True, slots=True)
class _Given:
    """What the inventory says for one host (None: let ssh_config or the default decide)."""

    name: str
    alias: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    connect_timeout_s: float | None = None


class _Resolver:
    def __init__(self, connect_timeout_s: float | None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.me = getpass.getuser()
        self.configs: dict[str, SSHConfig] = {}

    def config(self, path: str | None) -> SSHConfig | None:
        if not path:
            return None
        cfg = self.configs.get(path)
        if cfg is None:
            cfg = self.configs[path] = SSHConfig.load(path)
        return cfg

    def target(self, g: _Given, cfg: SSHConfig | None, depth: int = 0) -> Target:
        r = cfg.resolve(g.alias) if cfg is not None else None
        t = Target(
            node=g.name,
            hostname=r.hostname if r else g.alias,
            port=g.port or (r.port if r else None) or 22,
            user=g.user or (r.user if r else None) or self.me,
            identity_files=(g.identity_file,) if g.identity_file else _ids(r),
            known_hosts=(g.known_hosts,) if g.known_hosts else _known(r),
            proxy_jump=None,
            connect_timeout_s=self.connect_timeout_s
            or g.connect_timeout_s
            or (r.connect_timeout_s if r else None)
            or DEFAULT_CONNECT_TIMEOUT_S,
            host_key_alias=r.host_key_alias if r else None,
            check_host_ip=bool(r and r.check_host_ip),
            hash_known_hosts=bool(r and r.hash_known_hosts),
        )
        jump = g.proxy_jump or (r.proxy_jump if r else None)
        if not jump or jump.lower() == "none":
            return t
        return replace(t, proxy_jump=self.jump(g, jump, cfg, t, depth))

    def jump(self, g: _Given, spec: str, cfg: SSHConfig | None, t: Target, depth: int) -> Target:
        if depth >= MAX_JUMP_HOPS:
            raise ConfigError(
                f"{g.name}: ProxyJump chain deeper than {MAX_JUMP_HOPS} hops ({spec})"
            )
        # Like OpenSSH, the last hop of a chain is the one next to the target.
        *before, last = [h.strip() for h in spec.split(",")]
        j_user, _, hostport = last.rpartition("@")
        j_host, _, j_port = hostport.partition(":")
        hop = _Given(
            name=f"jump:{last}",
            alias=j_host,
            user=j_user or None,
            port=int(j_port) if j_port else None,
            known_hosts=g.known_hosts,
            proxy_jump=",".join(before) or None,
            connect_timeout_s=g.connect_timeout_s,
        )
        jt = self.target(hop, cfg, depth + 1)
        # The jump host's identity defaults to the node's if its config names none.
        return jt if jt.identity_files else replace(jt, identity_files=t.identity_files)


def _ids(r: ResolvedHost | None) -> tuple[str, ...]:
    return tuple(r.identity_files) if r else ()


def _known(r: ResolvedHost | None) -> tuple[str, ...]:
    return (tuple(r.user_known_hosts_files) if r else ()) or (
        os.path.expanduser("~/.ssh/known_hosts"),
    )


def resolve_targets(nodes: Sequence[Node], connect_timeout_s: float | None) -> dict[str, Target]:
    """Every node's Target (see the module docstring for precedence)."""
    res = _Resolver(connect_timeout_s)
    default_cfg = os.path.expanduser("~/.ssh/config")
    out: dict[str, Target] = {}
    for node in nodes:
        s = node.ssh
        cfg = res.config(s.ssh_config or (default_cfg if os.path.exists(default_cfg) else None))
        given = _Given(
            node.name,
            s.host or node.name,
            s.user,
            s.port,
            s.identity_file,
            s.known_hosts,
            s.proxy_jump,
            s.connect_timeout_s,
        )
        out[node.name] = res.target(given, cfg)
    return out

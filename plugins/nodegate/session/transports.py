"""Transports by name: the built-in ones as a plugin of nodegate's hooks, and the one factory.

`make_transport(hook, settings, nodes, evidence)` is how the pytest plugin and the `nodegate`
CLI get a transport: the first `pytest_nodegate_make_transport` implementation that knows
`settings.transport` builds it. This module implements the hooks for ssh, slurm, local and replay
(`trylast`, so a site plugin may replace one of them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import pluggy
import pytest

from nodegate.core.errors import ConfigError
from nodegate.core.settings import Settings
from nodegate.inventory import Node
from nodegate.session import hookspecs
from nodegate.transport.base import Transport
from nodegate.transport.evidence import EvidenceWriter


def _ssh(settings: Settings, nodes: Sequence[Node], evidence: EvidenceWriter) -> Transport:
    from nodegate.transport.ssh import SSHTransport

    return SSHTransport(
        nodes,
        fanout=settings.fanout,
        connect_timeout_s=settings.connect_timeout_s,
        accept_new_hostkeys=settings.accept_new_hostkeys,
        evidence=evidence,
    )


def _local(settings: Settings, nodes: Sequence[Node], evidence: EvidenceWriter) -> Transport:
    from nodegate.transport.local import LocalTransport

    return LocalTransport(fanout=settings.fanout, evidence=evidence)


def _replay(settings: Settings, nodes: Sequence[Node], evidence: EvidenceWriter) -> Transport:
    from nodegate.transport.local import ReplayTransport

    if settings.replay_dir is None:  # settings validation refuses this; a direct caller may not
        raise ConfigError("--transport replay needs --replay DIR")
    return ReplayTransport(settings.replay_dir, evidence=evidence)


def _slurm(settings: Settings, nodes: Sequence[Node], evidence: EvidenceWriter) -> Transport:
    from nodegate.transport.slurm import SlurmTransport

    job = f"nodegate-{settings.run_id}" if settings.run_id else "nodegate"
    # Nodes Slurm holds (drained, set down) run over SSH: requalification after maintenance.
    return SlurmTransport(
        nodes,
        fanout=settings.fanout,
        evidence=evidence,
        job_name=job,
        fallback=lambda: _ssh(settings, nodes, evidence),
    )


Builder = Callable[[Settings, Sequence[Node], EvidenceWriter], Transport]
BUILTIN: dict[str, Builder] = {"ssh": _ssh, "local": _local, "replay": _replay, "slurm": _slurm}


@pytest.hookimpl(trylast=True)
def pytest_nodegate_transport_names() -> list[str]:
    return sorted(BUILTIN)


@pytest.hookimpl(trylast=True)
def pytest_nodegate_make_transport(
    settings: Settings, nodes: Sequence[Node], evidence: EvidenceWriter
) -> Transport | None:
    build = BUILTIN.get(settings.transport)
    return build(settings, nodes, evidence) if build is not None else None


def known_transports(hook: pluggy.HookRelay) -> set[str]:
    """Every transport name some registered plugin builds."""
    return {name for names in hook.pytest_nodegate_transport_names() for name in names}


def make_transport(
    hook: pluggy.HookRelay, settings: Settings, nodes: Sequence[Node], evidence: EvidenceWriter
) -> Transport:
    """The transport `settings.transport` names, built by the first plugin that knows it.

    `hook`: pytest's `config.hook`, or `builtin_hook()` outside pytest.
    """
    transport: Transport | None = hook.pytest_nodegate_make_transport(
        settings=settings, nodes=nodes, evidence=evidence
    )
    if transport is None:
        known = ", ".join(sorted(known_transports(hook)))
        raise ConfigError(f"--transport: got {settings.transport!r}, expected one of {known}")
    return transport


def builtin_hook() -> pluggy.HookRelay:
    """nodegate's hooks with only the built-in transports registered (the CLI's)."""
    pm = pluggy.PluginManager("pytest")
    pm.add_hookspecs(hookspecs)
    pm.register(sys.modules[__name__], "nodegate.session.transports")
    return pm.hook

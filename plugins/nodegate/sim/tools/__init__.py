"""Simulated node tools: per-node outputs rendered at fleet build time, served by tiny sh stubs.

Each provider module (one per stage) turns a node's model into tools and files. Outputs are
precomputed so a simulated command costs one `sh` and one `cat`, not a Python start: at 1,024
nodes the 2 cores are shared with every sshd.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from nodegate.sim.model import SimNode
from nodegate.sim.nodefs import Entry


@dataclass(frozen=True, slots=True)
class Response:
    stdout: str = ""
    stderr: str = ""
    rc: int = 0


@dataclass(frozen=True, slots=True)
class SimTool:
    """A tool's answers keyed by its exact argument string (`"$*"`), plus a fallback."""

    name: str
    answers: Mapping[str, Response]
    fallback: Response | None = None


@dataclass(frozen=True, slots=True)
class Provider:
    """What one stage adds to a simulated node: tools, files under its fake root, faults."""

    name: str
    tools: Callable[[SimNode], Iterable[SimTool]]
    # Files under its fake root, by absolute path (read by the node's cat and grep).
    files: Callable[[SimNode], Mapping[str, Entry]] = field(default=lambda n: {})
    faults: Mapping[str, str] = field(default_factory=dict)
    # Tools that must run for real (servers, clients): name -> stub script, no fast path.
    scripts: Callable[[SimNode], Mapping[str, str]] = field(default=lambda n: {})


GARBAGE = "\x1b[31m#!%@ segfault?? 0xdeadbeef\n\x00\x01 ~~~ :: ::\n<<<<<<<< unexpected\n"


def unsupported(tool: str) -> Response:
    return Response(stderr=f"{tool}: simulated tool does not support these arguments\n", rc=2)


def _faulty(tool: str, node: SimNode) -> bool:
    return any(node.faulty_tool(k, tool) for k in ("missing", "hang", "garbage"))


def _case(tool: SimTool, end: str) -> list[str]:
    """`case "$*"` over the tool's answers; `end` is `exit` (script) or `return` (function)."""
    lines = ['case "$*" in']
    for args, resp in sorted(tool.answers.items()):
        lines.append(f"{shlex.quote(args)}) {_emit(resp, end)};;")
    lines.append(f"*) {_emit(tool.fallback or unsupported(tool.name), end)};;")
    lines.append("esac")
    return lines


def render_tool(tool: SimTool, node: SimNode) -> str:
    """The tool's stub script, first on the simulated node's PATH (faults live here)."""
    lines = ["#!/bin/sh"]
    if node.faulty_tool("missing", tool.name):
        lines.append(f"echo 'sh: 1: {tool.name}: not found' >&2; exit 127")
    elif node.faulty_tool("hang", tool.name):
        lines.append("exec sleep 86400")
    elif node.faulty_tool("garbage", tool.name):
        lines.append(f"printf '%s' {shlex.quote(GARBAGE)}")
    else:
        lines += _case(tool, "exit")
    return "\n".join(lines) + "\n"


def render_function(tool: SimTool, node: SimNode) -> str | None:
    """The same answers as a shell function for the in-shell fast path; None for a faulty
    tool, which must go through the real `timeout` and its stub script."""
    if _faulty(tool.name, node):
        return None
    body = "\n".join("  " + ln for ln in _case(tool, "return"))
    return f"ngsim_{tool.name.replace('-', '_')}() {{\n{body}\n}}\n"


def _emit(r: Response, end: str) -> str:
    # Outputs are embedded and printed by the builtin printf: no exec per simulated command.
    parts = []
    if r.stdout:
        parts.append(f"printf '%s' {shlex.quote(r.stdout)}")
    if r.stderr:
        parts.append(f"printf '%s' {shlex.quote(r.stderr)} >&2")
    parts.append(f"{end} {r.rc}")
    return "; ".join(parts)


def providers() -> list[Provider]:
    """Every stage's provider, in stage order (explicit registry, no discovery magic)."""
    from nodegate.sim.tools import hca, ib_pairs, pcie_gpu, reach

    return [reach.PROVIDER, pcie_gpu.PROVIDER, hca.PROVIDER, ib_pairs.PROVIDER]


def node_tools(node: SimNode) -> list[SimTool]:
    """Every provider's tools for `node`; a tool two stages simulate (`nvidia-smi` answers
    `-q -x` for pcie_gpu and `topo -m` for hca) gets the union of their answers (the earlier
    stage wins on the same arguments)."""
    merged: dict[str, SimTool] = {}
    for p in providers():
        for t in p.tools(node):
            prev = merged.get(t.name)
            if prev is None:
                merged[t.name] = t
                continue
            answers = {**t.answers, **prev.answers}
            merged[t.name] = SimTool(t.name, answers, prev.fallback or t.fallback)
    return list(merged.values())


def known_faults() -> dict[str, str]:
    from nodegate.sim.model import TRANSPORT_FAULTS

    out = dict(TRANSPORT_FAULTS)
    for p in providers():
        out.update(p.faults)
    return out

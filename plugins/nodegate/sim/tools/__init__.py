"""Simulated node tools: per-node outputs rendered at fleet build time, served by tiny sh stubs.

Each provider module (one per stage) turns a node's model into tools and files. Outputs are
precomputed so a simulated command costs one `sh` and one `cat`, not a Python start: at 1,024
nodes the 2 cores are shared with every sshd.

A tool answers its *arguments* the way the real tool would, never a stage's command line: the
answers are keyed by the real tool's argument forms (`nvidia-smi -q`); a `prelude` parses what
the real tool accepts in other spellings or orders (`--query`, options in any order, `--opt=v`)
into that form, or fails as the real tool fails on a bad option. Arguments it has no answer
for print the tool's own bad-arguments answer (`usage`, rc non-zero; `<tool>: invalid
arguments` where the corpus does not hold the tool's wording), plus a `nodegate-sim:` line on
stderr naming what it does answer: never a healthy output for something else. Files are no
tool's answers: a node's `cat` and `grep` read its own tree (sim/nodefs.py).
"""

from __future__ import annotations

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools.base import (
    FLOOD_BYTES,
    FLOOD_LINE,
    FORGER,
    GARBAGE,
    NVIDIA_SMI_USAGE,
    Provider,
    Response,
    SimTool,
    answer,
    bad_arguments,
    function_name,
    getopt_error,
    render_function,
    render_tool,
)

__all__ = [
    "FLOOD_BYTES",
    "FLOOD_LINE",
    "FORGER",
    "GARBAGE",
    "NVIDIA_SMI_USAGE",
    "Provider",
    "Response",
    "SimTool",
    "answer",
    "bad_arguments",
    "function_name",
    "getopt_error",
    "render_function",
    "render_tool",
]


def providers() -> list[Provider]:
    """Every stage's provider, in stage order (explicit registry, no discovery magic)."""
    from nodegate.sim.tools import (
        fabric,
        gpu_load,
        hca,
        ib_pairs,
        nccl,
        pcie_gpu,
        reach,
        roce,
        traffic,
    )

    return [
        reach.PROVIDER,
        pcie_gpu.PROVIDER,
        gpu_load.PROVIDER,
        hca.PROVIDER,
        fabric.PROVIDER,
        roce.PROVIDER,
        ib_pairs.PROVIDER,
        traffic.PROVIDER,
        nccl.PROVIDER,
    ]


def node_tools(node: SimNode) -> list[SimTool]:
    """Every provider's tools for `node`; a tool two stages simulate (`nvidia-smi` answers
    `-q` for pcie_gpu and `topo -m` for hca) gets the union of their answers and preludes
    (the earlier stage wins on the same arguments)."""
    merged: dict[str, SimTool] = {}
    for p in providers():
        for t in p.tools(node):
            prev = merged.get(t.name)
            if prev is None:
                merged[t.name] = t
                continue
            preludes = [prev.prelude] + ([t.prelude] if t.prelude != prev.prelude else [])
            merged[t.name] = SimTool(
                t.name,
                {**t.answers, **prev.answers},
                prev.fallback or t.fallback,
                "\n".join(x for x in preludes if x),
                prev.usage or t.usage,
            )
    return list(merged.values())


def known_faults() -> dict[str, str]:
    from nodegate.sim.fleet_model import TRANSPORT_FAULTS

    out = dict(TRANSPORT_FAULTS)
    for p in providers():
        out.update(p.faults)
    return out

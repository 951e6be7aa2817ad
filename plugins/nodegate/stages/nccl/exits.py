"""Which rank of a job ended it early, as its launcher reports it: Open MPI's `mpirun noticed
that process rank R with PID P on node H exited on signal N (Name).` or `The first process to
do so was: Process name: [[J,1],R] Exit code: N`, Slurm's `srun: error: NODE: task R: Exited
with exit code N` or `...: Killed`. A rank that died is named with its node, its exit status
and its own stderr line, not the job's deadline.

>>> text = "gpu002 pid 41: rank 2: fatal\\n" + (
...     "mpirun noticed that process rank 2 with PID 41 on node 10.0.0.2 exited on signal 9 "
...     "(Killed).\\n")
>>> rank_exit(text, ("gpu001", "gpu002"), 4, {"10.0.0.2": "gpu002"})
'rank 2 on gpu002 killed by signal 9 (Killed); its stderr: gpu002 pid 41: rank 2: fatal'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from nodegate.parsers.nccl_tests import untagged_lines

_SIGNALED = re.compile(
    r"mpirun noticed that process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node "
    r"(?P<host>\S+) exited on signal (?P<sig>\d+)(?: \((?P<name>[^)]*)\))?"
)
_EXITED = re.compile(
    r"The first process to do so was:\s+Process name:\s+\[\[\d+,\d+\],(?P<rank>\d+)\]\s+"
    r"Exit code:\s+(?P<rc>\d+)"
)
_SRUN = re.compile(
    r"^srun: error: (?P<host>[^\s:]+): tasks? (?P<rank>\d+)[\d,-]*: "
    r"(?:Exited with exit code (?P<rc>\d+)|(?P<name>[A-Z][\w ]*))\s*$",
    re.M,
)

_LAUNCHER = ("srun:", "mpirun", "Process name:")  # the launcher's own report, not the rank's


def rank_exit(
    text: str,
    nodes: Sequence[str],
    ranks: int,
    hosts: Mapping[str, str] | None = None,
    *,
    srun: bool = True,
) -> str | None:
    """The first rank the launcher says ended the job (its node, exit code or signal, its last
    stderr line), or None when it names none. `nodes`: the job's nodes in rank order, `ranks`
    their ranks in all (ranks fill one node after the other); `hosts`: node of each address
    the launcher knows the nodes by; `srun`: srun's task lines name ranks (False for mpirun,
    whose srun inside an allocation starts its daemons, not ranks: a task there is a daemon)."""
    per_node = max(1, ranks // max(1, len(nodes)))

    def node_of(rank: int, host: str | None) -> str:
        if host is not None:
            return (hosts or {}).get(host, host)
        return nodes[rank // per_node] if rank // per_node < len(nodes) else "?"

    pid: str | None = None
    if m := _SIGNALED.search(text):
        rank, pid, node = int(m["rank"]), m["pid"], node_of(int(m["rank"]), m["host"])
        how = f"killed by signal {m['sig']}" + (f" ({m['name']})" if m["name"] else "")
    elif m := _EXITED.search(text):
        rank = int(m["rank"])
        node, how = node_of(rank, None), f"exited {m['rc']}"
    elif srun and (m := _SRUN.search(text)):
        rank, node = int(m["rank"]), node_of(int(m["rank"]), m["host"])
        how = f"exited {m['rc']}" if m["rc"] else f"killed ({m['name']})"
    else:
        return None
    said = _own_line(text, node, pid)
    return f"rank {rank} on {node} {how}" + (f"; its stderr: {said[:200]}" if said else "")


def _own_line(text: str, node: str, pid: str | None) -> str | None:
    """The rank's own stderr line: the last carrying its PID when the launcher gave it, else
    the node's first (its peers' complaints about it come after)."""
    lines = [
        x for x in untagged_lines(text)
        if re.search(rf"\b{re.escape(node)}\b", x) and not x.startswith(_LAUNCHER)
    ]  # fmt: skip
    if pid is not None:
        mine = [x for x in lines if re.search(rf"\b{pid}\b", x)]
        return mine[-1] if mine else None
    return lines[0] if lines else None

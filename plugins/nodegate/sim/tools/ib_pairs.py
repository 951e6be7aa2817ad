"""Simulated tools of the `ib_pairs` stage: a real `ib_write_bw` server and client
(sim/perftest_sim.py, over loopback between the nodes' own addresses; its options parsed as
perftest's, an unknown flag fails as perftest fails) and `numactl` (see NUMACTL).

`ss`, `pgrep` and `kill` are the host's own: a simulated node sees every socket and process of
the host, its peers' included (the stage waits on its own server's PID in `ss`; a stray
`ib_write_bw` left on one node shows in every node's `pgrep`).

On a RoCE node (sim/tools/roce.py) both sides must be given `-x <the rail's RoCE v2 GID
index>` and `--tclass 106`, as the node is configured; otherwise the QPs fail to connect.

Hardware key `ib_pairs` (all optional): `rails` (number of rails, default 8, devices mlx5_0..),
`rate_gbps` (default 400). Ports that the hca provider degrades (HDR, 2X) run at their rate.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterable
from importlib import resources

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools.base import Provider, SimTool

MODEL_PATH = "/var/lib/nodegate-sim/perftest.json"
SLOW_FACTOR = 0.6  # a "slow rail": a flaky cable or a port with errors, ~60 % of line rate

FAULTS = {
    "slow_rail": "rail ARG runs at 60 % of line rate (ARG 'RAIL' or 'RAIL:FACTOR')",
    "slow_node": "every rail of the node runs at 60 % (ARG: factor)",
    "server_hang": "ib_write_bw servers on this node never exit after the test",
    "client_refused": "ib_write_bw clients on this node cannot connect (connection refused)",
    "qp_error": "QPs on this node fail to move to RTR",
    "bad_link": "traffic between this node's leaf and leaf ARG runs at half rate",
}

# numactl 2.x: getopt_long with "+" (the command starts at the first non-option); the policy
# options take node lists, checked against the board's NUMA nodes (0-1, topo -m); the query
# options (--hardware, --show) are not simulated. Bad usage: its message and usage, rc 1.
NUMACTL = """#!/bin/sh
# simulated numactl: parse the policy options as numactl does, then run the command
usage() {
  cat >&2 <<'EOF'
usage: numactl [--all | -a] [--balancing | -b] [--interleave= | -i <nodes>]
               [--preferred= | -p <node>] [--physcpubind= | -C <cpus>]
               [--cpunodebind= | -N <nodes>] [--membind= | -m <nodes>]
               [--localalloc | -l] command args ...
EOF
  exit 1
}
nodes() {
  case $1 in
    0|1|0,1|1,0|0-1|all) ;;
    *) printf 'libnuma: Warning: node argument %s is out of range\\n\\n' "$1" >&2; usage ;;
  esac
}
while [ $# -gt 0 ]; do
  case $1 in
    --cpunodebind=*|--membind=*|--interleave=*|--preferred=*) nodes "${1#*=}" ;;
    --physcpubind=*) ;;
    -N|-m|-i|-p|--cpunodebind|--membind|--interleave|--preferred)
      [ $# -ge 2 ] || usage
      nodes "$2"; shift ;;
    -C|--physcpubind) [ $# -ge 2 ] || usage; shift ;;
    -N?*|-m?*|-i?*|-p?*) nodes "${1#-?}" ;;
    -C?*|-l|--localalloc|-a|--all|-b|--balancing) ;;
    -H|--hardware|-s|--show)
      echo "numactl $1: not simulated (nodegate sim)" >&2; exit 1 ;;
    --) shift; break ;;
    --*) printf "numactl: unrecognized option '%s'\\n" "$1" >&2; usage ;;
    -?*) printf "numactl: invalid option -- '%s'\\n" "${1#-}" >&2; usage ;;
    *) break ;;
  esac
  shift
done
[ $# -gt 0 ] || usage
exec "$@"
"""


def _rate(raw: str) -> float:
    try:
        return float(raw.split()[0])
    except (ValueError, IndexError):
        return 0.0


def _factor(arg: str | None, default: float = SLOW_FACTOR) -> float:
    try:
        return float(arg) if arg else default
    except ValueError:
        return default


def node_model(node: SimNode) -> dict[str, object]:
    hw = node.hw.get("ib_pairs") or {}
    n_rails = int(hw.get("rails", 8))
    rate = float(hw.get("rate_gbps", 400))
    rates = {f"mlx5_{i}": rate for i in range(n_rails)}
    try:  # the hca provider knows each port's trained rate (HDR, 2X faults)
        from nodegate.sim.tools.hca import node_hcas

        for h in node_hcas(node):
            if h.name in rates:
                rates[h.name] = _rate(h.rate)
    except ImportError:
        pass
    factors = dict.fromkeys(rates, 1.0)
    for f in node.faults:
        if f.kind == "slow_rail" and f.arg:
            rail, _, fac = f.arg.partition(":")
            if f"mlx5_{rail}" in factors:
                factors[f"mlx5_{rail}"] = _factor(fac)
    slow = node.fault("slow_node")
    from nodegate.sim.tools.roce import TCLASS, gid_index_of, node_rails

    roce = node_rails(node)  # RoCE rails: ib_write_bw must be given their GID index and tclass
    return {
        "roce": {"tclass": TCLASS, "gid_index": {r.device: gid_index_of(r) for r in roce}}
        if roce
        else None,
        "node": node.name,
        "address": node.address,
        "leaf": node.labels.get("leaf", ""),
        "lid": 0x100 + node.index,
        "node_factor": _factor(slow.arg) if slow else 1.0,
        "rails": {dev: {"rate_gbps": rates[dev], "factor": factors[dev]} for dev in rates},
        "faults": {
            k: node.fault(k) is not None for k in ("server_hang", "client_refused", "qp_error")
        },
        "bad_links": [f.arg for f in node.faults if f.kind == "bad_link" and f.arg],
    }


def files(node: SimNode) -> dict[str, str]:
    return {MODEL_PATH: json.dumps(node_model(node), indent=1) + "\n"}


def scripts(node: SimNode) -> dict[str, str]:
    sim = resources.files("nodegate").joinpath("sim/perftest_sim.py")
    py = shlex.quote(sys.executable)
    return {
        "ib_write_bw": f'#!/bin/sh\nexec {py} -I -S {shlex.quote(str(sim))} ib_write_bw "$@"\n',
        "numactl": NUMACTL,
    }


def tools(node: SimNode) -> Iterable[SimTool]:
    return ()


PROVIDER = Provider(name="ib_pairs", tools=tools, files=files, faults=FAULTS, scripts=scripts)

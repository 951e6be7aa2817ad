"""Simulated tools of the `nccl` stage: `all_reduce_perf` (and the matrix's `all_gather_perf`,
`reduce_scatter_perf`, `alltoall_perf`), one real process per rank
(sim/nccl_sim.py) that meets its job's other ranks over loopback TCP, started by the real
`mpirun` (through the fleet's sshd) or `srun` (through the fleet's slurmd).

Hardware key `nccl` (all optional): `gpus` (ranks the node can hold, default 8),
`nvlink_busbw` (GB/s one node reaches alone, default 480: ND H100 v5's 8 GiB all-reduce),
`net_busbw` (GB/s the node's rails carry in a multi-node ring, default 370), `hcas` (the
rails NCCL names, default mlx5_0.. one per GPU up to 8), `nvls` (NVLS multicast available,
default: more than one GPU, the NVSwitch board). The ib_pairs
faults `slow_node` and `slow_rail` slow the node's rails for NCCL too.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterable
from importlib import resources

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools.base import Provider, SimTool

MODEL_PATH = "/var/lib/nodegate-sim/nccl.json"
SLOW_FACTOR = 0.6
SLOW_FACTOR_FABRIC = 0.5  # spine_slow, leaf_uplink_down: half the rate between leaves
NVLINK_FACTOR = 0.8  # an NVLink fault: slower within the node, still above the network's rate
# HGX H100/H200 board: the GPUs' PCI bus ids as nccl-tests prints them ([%04x:%02x:%02x]).
BUSES = ("0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
         "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00")  # fmt: skip

FAULTS = {
    "nccl_slow": "the node's rails run slow in NCCL jobs (ARG 'all' or a rail, ':FACTOR', 0.6)",
    "nccl_nvlink": "NVLink within the node runs at FACTOR (0.8): low only in a single-node job",
    "nccl_hang": "the node's first rank hangs after connecting (ARG 'multi': only in jobs of "
    "several nodes): the whole job hangs",
    "nccl_dies": "the node dies mid-job: its first rank is killed (SIGKILL) after connecting",
    "nccl_rank_dies": "the node's first rank exits early after connecting, its last stderr line "
    "saying so (ARG its exit code, default 3, or a signal: KILL, SEGV, ABRT)",
    "nccl_ib_error": "in multi-node jobs the node's first rank gets an IB completion error (WARN)",
    "nccl_internal_error": "the node's first rank fails with NCCL 'internal error'",
    "nccl_wrong": "all-reduce results are wrong on this node (#wrong > 0, job fails)",
    "spine_slow": "NCCL flows between this node's leaf and leaf ARG ('LEAF[:FACTOR]', 0.5) "
    "run at FACTOR: a job over both leaves is slow, each leaf alone is not",
    "leaf_uplink_down": "this node's leaf keeps FACTOR (ARG, 0.5) of its uplinks: alltoall over "
    "several leaves (every byte leaves the leaf) runs at FACTOR, a ring collective (one flow "
    "each way) keeps its rate",
    "nccl_socket_fallback": "NET/IB finds no device on the node: NCCL runs over NET/Socket "
    "(its NCCL_DEBUG=INFO lines say so) at FACTOR (ARG) of the rails' rate, default 1: full "
    "bandwidth, so only the transport check can tell",
    "gdr_off": "GPU Direct RDMA Disabled for every HCA of the node (NCCL_DEBUG=INFO lines; "
    "channels without GDRDMA) at FACTOR (ARG, default 1) of the rails' rate",
}
TRANSPORT_FAULTS = ("nccl_socket_fallback", "gdr_off")


def _factor(arg: str | None, default: float) -> float:
    try:
        return float(arg) if arg else default
    except ValueError:
        return default


def _net_factor(node: SimNode) -> float:
    f = 1.0
    for fault in node.faults:
        if fault.kind == "nccl_slow":
            _, _, fac = (fault.arg or "all").partition(":")
            f = min(f, _factor(fac, SLOW_FACTOR))  # one slow rail bounds its ring
        elif fault.kind == "slow_node":
            f = min(f, _factor(fault.arg, SLOW_FACTOR))
        elif fault.kind == "slow_rail":
            f = min(f, _factor((fault.arg or "").partition(":")[2], SLOW_FACTOR))
        elif fault.kind in TRANSPORT_FAULTS:
            f = min(f, _factor(fault.arg, 1.0))
    return f


def node_model(node: SimNode) -> dict[str, object]:
    hw = node.hw.get("nccl") or {}
    name = str(node.hw.get("gpu_model") or "NVIDIA H100 80GB HBM3")
    n_gpus = int(hw.get("gpus", 8))
    nvlink = node.fault("nccl_nvlink")
    faults = {
        k.removeprefix("nccl_"): (f.arg or "")
        for k in (
            "nccl_hang",
            "nccl_dies",
            "nccl_rank_dies",
            "nccl_ib_error",
            "nccl_internal_error",
            "nccl_wrong",
        )
        if (f := node.fault(k)) is not None
    }
    faults.update({k.removeprefix("nccl_"): "" for k in TRANSPORT_FAULTS if node.fault(k)})
    return {
        "node": node.name,
        "address": node.address,
        "gpus": [{"bus": BUSES[i % len(BUSES)], "name": name} for i in range(n_gpus)],
        # the rails NCCL uses (NET/IB : Using), NVLS multicast through the NVSwitches
        "hcas": [str(h) for h in hw.get("hcas", [f"mlx5_{i}" for i in range(min(n_gpus, 8))])],
        "nvls": bool(hw.get("nvls", n_gpus > 1)),
        "nvlink_busbw": float(hw.get("nvlink_busbw", 480)),
        "nvlink_factor": _factor(nvlink.arg, NVLINK_FACTOR) if nvlink else 1.0,
        "net_busbw": float(hw.get("net_busbw", 370)),
        "net_factor": _net_factor(node),
        "leaf": str(node.labels.get("leaf", "")),
        "spine_slow": {
            leaf: _factor(fac, SLOW_FACTOR_FABRIC)
            for f in node.faults
            if f.kind == "spine_slow"
            for leaf, _, fac in [(f.arg or "").partition(":")]
        },
        "uplink_factor": _factor(up.arg, SLOW_FACTOR_FABRIC)
        if (up := node.fault("leaf_uplink_down"))
        else 1.0,
        "faults": faults,
    }


def files(node: SimNode) -> dict[str, str]:
    return {MODEL_PATH: json.dumps(node_model(node), indent=1) + "\n"}


# The node's own ssh client reaches its peers as a real node's does (its ~/.ssh/config): here
# through the fleet's ssh_config and port, found from NG_NODE (<fleet>/by-addr/<address>).
SSH = r"""#!/bin/sh
ng_root=${NG_NODE%/by-addr/*}
ng_port=$(sed -n 's/^ *"port": \([0-9]*\).*/\1/p' "$ng_root/model.json")
exec /usr/bin/ssh -F "$ng_root/ssh_config" -p "${ng_port:-2222}" "$@"
"""
# The simulated nodes run as root, and their "fabric" is loopback: Open MPI's own settings
# for that, as a site's openmpi-mca-params.conf would hold them.
MPIRUN = """#!/bin/sh
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
export OMPI_MCA_oob_tcp_if_include OMPI_MCA_btl_tcp_if_include
# Every simulated node shares this machine's few cores, where binding 8 ranks per node to a
# NUMA domain is an overload Open MPI refuses (its daemon dies); a real 8-GPU node has cores
# for every rank. The job's binding is kept, only allowed to overload here.
ng_n=$#; ng_next=
for ng_a in "$@"; do
  if [ -n "$ng_next" ]; then
    case $ng_a in *:*) ;; *) ng_a="$ng_a:overload-allowed" ;; esac
    ng_next=
  fi
  [ "$ng_a" = "--bind-to" ] && ng_next=1
  set -- "$@" "$ng_a"
done
shift "$ng_n"
# Each node has its own /tmp, where Open MPI keeps its session directory (ompi.<host>.<uid>/
# jf.<job family>); the simulated nodes share this machine's /tmp and hostname, so every
# daemon of a job would race to create, fill and remove one directory (mkdir "File exists",
# a crash writing the hwloc topology there): a job failing only under load. Each node's
# mpirun and orted keep theirs in the node's own temporary directory; --noprefix starts the
# remote daemons as `orted` (the node's, below), not /usr/bin/orted.
TMPDIR=/tmp/nodegate-sim-${NG_NODE##*/}
mkdir -p "$TMPDIR" && export TMPDIR
exec /usr/bin/mpirun --noprefix "$@"
"""
ORTED = """#!/bin/sh
# Open MPI's daemon on this node, started by mpirun over SSH: the node's own temporary
# directory (see the node's mpirun).
TMPDIR=/tmp/nodegate-sim-${NG_NODE##*/}
mkdir -p "$TMPDIR" && export TMPDIR
exec /usr/bin/orted "$@"
"""


def scripts(node: SimNode) -> dict[str, str]:
    sim = resources.files("nodegate").joinpath("sim/nccl_sim.py")
    py = shlex.quote(sys.executable)
    return {
        **{
            b: f'#!/bin/sh\nexec {py} -I -S {shlex.quote(str(sim))} {b} "$@"\n'
            for b in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")
        },
        "ssh": SSH,
        "mpirun": MPIRUN,
        "orted": ORTED,
    }


def tools(node: SimNode) -> Iterable[SimTool]:
    return ()


PROVIDER = Provider(name="nccl", tools=tools, files=files, faults=FAULTS, scripts=scripts)

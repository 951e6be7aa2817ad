"""Simulated nccl-tests rank (`all_reduce_perf`, `all_gather_perf`, `reduce_scatter_perf`,
`alltoall_perf`) for the simulated fleet (standard library only).

One process per rank, started by a real launcher (`mpirun` through the fleet's sshd, or
`srun` through the fleet's slurmd): its rank comes from the launcher's environment
(OMPI_COMM_WORLD_* or SLURM_*), its node from NG_NODE. Every rank of a job meets the root at
NCCL_COMM_ID (as NCCL's bootstrap does), then connects to its ring neighbours over loopback TCP
and passes the data around the ring: one hung or dead rank hangs or breaks the whole job, as
with NCCL. Rank 0 prints nccl-tests 2.19's format, bus bandwidth computed from the models of
every node in the job (the slowest node or rail bounds the ring); NCCL WARN lines go to stderr.
Each collective's bus bandwidth as nccl-tests doc/PERFORMANCE.md defines it (busbw = algbw x
2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and alltoall); alltoall is
bound by each node's NICs (every byte but 1/n leaves the node) at ALLTOALL_NET of their ring
rate. The other collectives' rows: redop `none` (nccl-tests prints it for a collective with
no reduction), root -1; NCCL_ALGO=Ring in the environment changes nothing here (the model is
a ring already).

    python3 -I -S nccl_sim.py all_reduce_perf -b 1M -e 8G -f 2 -g 1 -c 1 -n 20 -w 5

Node model: $NG_NODE/root/var/lib/nodegate-sim/nccl.json (written at fleet build).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from typing import Any

TESTS_VERSION = "2.19.6"
NCCL_CODE = 22807  # NCCL 2.28.7
MAX_SIM_S = 2.0  # the whole sweep is simulated in at most this long (the rank sleeps)
CONNECT_S = 30.0  # bootstrap: how long a rank retries the root (NCCL retries too)
SIZES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
VALUE = {
    "t": "nthreads", "g": "ngpus", "b": "minbytes", "e": "maxbytes", "i": "stepbytes",
    "f": "stepfactor", "o": "op", "d": "datatype", "r": "root", "n": "iters",
    "w": "warmup_iters", "m": "agg_iters", "c": "check", "z": "blocking", "G": "cudagraph",
    "a": "average", "u": "unalign", "N": "run_cycles", "p": "parallel_init",
}  # fmt: skip
LONG = {v: v for v in VALUE.values()}
# binary -> (bus factor numerator in units of (n-1)/n, redop printed)
COLLECTIVES = {
    "all_reduce_perf": (2, "sum"),
    "all_gather_perf": (1, "none"),
    "reduce_scatter_perf": (1, "sum"),
    "alltoall_perf": (1, "none"),
}
ALLTOALL_NET = 0.75  # alltoall's busbw against the ring's across nodes (no pipelining of a ring)


class Usage(Exception):
    """A bad option: getopt's message (all_reduce_perf then prints its usage, rc 1)."""


def parse_size(text: str) -> int:
    t = text.strip().upper()
    unit = t[-1] if t and t[-1] in SIZES else ""
    try:
        return int(float(t[: len(t) - len(unit)]) * SIZES[unit])
    except ValueError:
        raise Usage(f"invalid size {text!r}") from None


def parse_args(argv: list[str]) -> dict[str, str]:
    """all_reduce_perf's options (nccl-tests src/common.cu getopt_long), values kept raw."""
    opts = {"nthreads": "1", "ngpus": "1", "minbytes": "32M", "maxbytes": "32M",
            "stepfactor": "1", "iters": "20", "warmup_iters": "1", "check": "1",
            "agg_iters": "1", "cudagraph": "0", "unalign": "0"}  # fmt: skip
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name not in LONG:
                raise Usage(f"all_reduce_perf: unrecognized option '{a}'")
            if not eq:
                if i >= len(argv):
                    raise Usage(f"all_reduce_perf: option '{a}' requires an argument")
                value, i = argv[i], i + 1
            opts[LONG[name]] = value
        elif a.startswith("-") and len(a) == 2 and a[1] in VALUE:
            if i >= len(argv):
                raise Usage(f"all_reduce_perf: option requires an argument -- '{a[1]}'")
            opts[VALUE[a[1]]], i = argv[i], i + 1
        elif a.startswith("-") and len(a) > 2 and a[1] in VALUE:
            opts[VALUE[a[1]]] = a[2:]
        else:
            raise Usage(f"all_reduce_perf: invalid option -- '{a.lstrip('-')[:1]}'")
    return opts


def sizes(o: dict[str, str]) -> list[int]:
    lo, hi, f = parse_size(o["minbytes"]), parse_size(o["maxbytes"]), int(o["stepfactor"])
    out = [max(lo, 4)]
    while out[-1] * max(f, 2) <= hi and f > 1:
        out.append(out[-1] * f)
    return out


def me() -> dict[str, Any]:
    """This rank: its numbers from the launcher, its node's model from NG_NODE."""
    env = os.environ
    rank = env.get("OMPI_COMM_WORLD_RANK", env.get("SLURM_PROCID", "0"))
    size = env.get("OMPI_COMM_WORLD_SIZE", env.get("SLURM_NTASKS", "1"))
    local = env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("SLURM_LOCALID", "0"))
    path = os.path.join(env["NG_NODE"], "root/var/lib/nodegate-sim/nccl.json")
    with open(path) as f:
        model = json.load(f)
    return {"rank": int(rank), "size": int(size), "local": int(local), "pid": os.getpid(),
            "model": model}  # fmt: skip


def send(sock: socket.socket, doc: Any) -> None:
    sock.sendall(json.dumps(doc).encode() + b"\n")


def recv(f: Any) -> Any:
    line = f.readline()
    if not line:
        raise ConnectionError("peer closed")
    return json.loads(line)


def bootstrap(rank: dict[str, Any], ring: socket.socket) -> list[dict[str, Any]]:
    """Every rank's hello, through the root at NCCL_COMM_ID (rank 0 listens there)."""
    host, _, port = os.environ.get("NCCL_COMM_ID", "127.0.0.1:61000").rpartition(":")
    n = int(rank["size"])
    hello = {**rank, "ring": ring.getsockname()}
    if rank["rank"] == 0:
        root = socket.socket()
        root.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        root.bind((host, int(port)))
        root.listen(n)
        peers = [root.accept()[0] for _ in range(n - 1)]
        table = [hello] + [recv(p.makefile()) for p in peers]
        table.sort(key=lambda h: h["rank"])
        for p in peers:
            send(p, table)
            p.close()
        root.close()
        return table
    deadline = time.monotonic() + CONNECT_S
    while True:
        try:
            s = socket.create_connection((host, int(port)), timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    s.settimeout(None)
    send(s, hello)
    got: list[dict[str, Any]] = recv(s.makefile())
    s.close()
    return got


def busbw(table: list[dict[str, Any]], size: int, coll: str = "all_reduce_perf") -> float:
    """GB/s at `size`: the slowest node bounds the ring (NVLink alone within one node, the
    network across nodes), less at small sizes (a fixed latency per operation); alltoall
    across nodes at ALLTOALL_NET of the slowest node's NICs."""
    models = {h["model"]["node"]: h["model"] for h in table}
    bw = min(float(m["nvlink_busbw"]) * float(m["nvlink_factor"]) for m in models.values())
    latency_us = 15.0
    if len(models) > 1:
        bw = min(bw, *(float(m["net_busbw"]) * float(m["net_factor"]) for m in models.values()))
        latency_us = 40.0
        if coll == "alltoall_perf":
            bw *= ALLTOALL_NET
        bw *= fabric_factor(models, coll)
    n = len(table)
    moved = COLLECTIVES[coll][0] * (n - 1) / n * size
    t_us = latency_us + moved / (bw * 1e3)
    return moved / (t_us * 1e3)


def fabric_factor(models: dict[str, dict[str, Any]], coll: str) -> float:
    """The fabric's share of the rate for a job over these nodes' leaves: a slowed spine
    between two of its leaves bounds every collective's ring; a leaf short of uplinks bounds
    alltoall (every byte leaves the leaf), not a ring (one flow each way crosses it)."""
    leaves = {str(m.get("leaf", "")) for m in models.values()}
    if len(leaves) < 2:
        return 1.0
    f = 1.0
    for m in models.values():
        for other, fac in (m.get("spine_slow") or {}).items():
            if other in leaves and other != m.get("leaf"):
                f = min(f, float(fac))
        if coll == "alltoall_perf":
            f = min(f, float(m.get("uplink_factor", 1.0)))
    return f


def header(o: dict[str, str], table: list[dict[str, Any]], coll: str) -> list[str]:
    lines = [
        f"# nccl-tests version {TESTS_VERSION} nccl-headers={NCCL_CODE} nccl-library={NCCL_CODE}",
        f"# Collective test starting: {coll}",
        f"# nThread {o['nthreads']} nGpus {o['ngpus']} minBytes {parse_size(o['minbytes'])} "
        f"maxBytes {parse_size(o['maxbytes'])} step: {o['stepfactor']}(factor) warmup iters: "
        f"{o['warmup_iters']} iters: {o['iters']} agg iters: {o['agg_iters']} validation: "
        f"{o['check']} graph: {o['cudagraph']} unalign: {o['unalign']}",
        "#",
        "# Using devices",
    ]
    for h in table:
        m = h["model"]
        gpu = m["gpus"][h["local"]]
        lines.append(
            f"#  Rank {h['rank']:2d} Group  0 Pid {h['pid']:6d} on {m['node']:>10} device "
            f"{h['local']:2d} [{gpu['bus']}] {gpu['name']}"
        )
    lines += [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "     (us)  (GB/s)  (GB/s)",
    ]
    return lines


def row(size: int, bw: float, n: int, wrong: int, coll: str = "all_reduce_perf") -> str:
    factor, redop = COLLECTIVES[coll]
    moved = factor * (n - 1) / n * size if n > 1 else size
    t_us = moved / (bw * 1e3) if bw > 0 else 0.0
    alg = size / (t_us * 1e3) if t_us > 0 else 0.0
    bus = bw if n > 1 else 0.0
    half = f"{t_us:8.1f} {alg:7.2f} {bus:7.2f} {wrong:7d}"
    count = size // 4
    if coll != "all_reduce_perf":  # one rank's share, 16-byte aligned (`*GetCollByteCount`)
        count = (count // max(n, 1)) & ~3
        size = count * max(n, 1) * 4  # max(sendBytes, expectedBytes)
    return f"{size:12d}  {count:12d}     float  {redop:>6}      -1 {half} {half}"


def debug_lines(rank: dict[str, Any], table: list[dict[str, Any]]) -> list[str]:
    """This rank's NCCL_DEBUG=INFO lines (NCCL_DEBUG_SUBSYS=INIT,NET) in NCCL's format, the
    messages as NVIDIA/nccl src/ prints them (parsers/nccl_debug.py cites each): version, net
    plugin and devices, GPU Direct RDMA per HCA, NVLS, channel counts, the ring's channels that
    cross nodes and the rings' GDR. Faults: socket_fallback (NET/IB finds no device, NET/Socket
    over eth0), gdr_off (GDR Disabled on every HCA, no /GDRDMA on any channel)."""
    m = rank["model"]
    faults = m["faults"]
    local, r, n = int(rank["local"]), int(rank["rank"]), len(table)
    pre = f"{m['node']}:{rank['pid']}:{rank['pid'] + 1} [{local}] NCCL INFO "
    hcas = m.get("hcas") or ["mlx5_0"]
    socket_ = "socket_fallback" in faults
    gdr = not socket_ and "gdr_off" not in faults
    nvls = bool(m.get("nvls"))
    out = [f"NCCL version {NCCL_CODE // 10000}.{NCCL_CODE // 100 % 100}.{NCCL_CODE % 100}"
           "+cuda12.9",
           "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin."]  # fmt: skip
    if socket_:
        net = "Socket"
        out += ["NET/IB : No device found.", f"NET/Socket : Using [0]eth0:{m['address']}<0>",
                "Using network Socket"]  # fmt: skip
    else:
        net = "IB"
        devs = " ".join(f"[{i}]{h}:1/IB" for i, h in enumerate(hcas))
        out += [f"NET/IB : Using {devs} [RO]; OOB eth0:{m['address']}<0>", "Using network IB"]
        out += [f"NET/IB : GPU Direct RDMA {'Enabled' if gdr else 'Disabled'} for HCA {i} '{h}'"
                for i, h in enumerate(hcas)]  # fmt: skip
    out += [
        f"NVLS multicast support is {'' if nvls else 'not '}available on dev {local}",
        f"32 coll channels, 32 collnet channels, {16 if nvls else 0} nvls channels, "
        "32 p2p channels, 32 p2p channels per peer",
    ]
    dev = 0 if socket_ else local % len(hcas)
    via = f"via NET/{net}/{dev}{'/GDRDMA' if gdr else ''}"
    prev, nxt = table[(r - 1) % n], table[(r + 1) % n]
    crossed = False
    if prev["model"]["node"] != m["node"]:
        out.append(f"Channel 00/0 : {prev['rank']}[{prev['local']}] -> {r}[{local}] [receive] "
                   f"{via}")  # fmt: skip
        crossed = True
    if nxt["model"]["node"] != m["node"]:
        out.append(f"Channel 00/0 : {r}[{local}] -> {nxt['rank']}[{nxt['local']}] [send] {via}")
        crossed = True
    if crossed or len({h["model"]["node"] for h in table}) > 1:
        out.append(f"Connected all rings, use ring PXN 0 GDR {int(gdr)}")
    return [pre + line for line in out]


def warn(rank: dict[str, Any], text: str) -> None:
    m = rank["model"]
    sys.stderr.write(
        f"{m['node']}:{rank['pid']}:{rank['pid'] + 1} [{rank['local']}] NCCL WARN {text}\n"
    )


def failure(rank: dict[str, Any], what: str) -> int:
    m = rank["model"]
    sys.stderr.write(
        f"{m['node']}: Test NCCL failure common.cu:1279 '{what}'\n"
        f" .. {m['node']} pid {rank['pid']}: Test failure common.cu:1086\n"
    )
    sys.stderr.flush()
    return 1


def rank_dies(rank: dict[str, Any], arg: str) -> int:
    """One rank's own early end: a last line on stderr, then exit `arg` (default 3) or die
    by the signal it names."""
    m = rank["model"]
    sys.stderr.write(f"{m['node']} pid {rank['pid']}: rank {rank['rank']}: fatal: cuMemAlloc "
                     "failed: out of memory (simulated)\n")  # fmt: skip
    sys.stderr.flush()
    if not arg or arg.isdigit():
        return int(arg or 3)
    os.kill(os.getpid(), getattr(signal, "SIG" + arg.upper().removeprefix("SIG")))
    return 1


REMOTE = "remote process exited or there was a network error / "


def fault_of(rank: dict[str, Any], kind: str) -> Any:
    return rank["model"]["faults"].get(kind) if rank["local"] == 0 else None


def run(o: dict[str, str], coll: str = "all_reduce_perf") -> int:
    rank = me()
    gpus = rank["model"]["gpus"]
    if rank["local"] >= len(gpus):
        sys.stderr.write(f"{rank['model']['node']}: Test CUDA failure common.cu:1011 "
                         "'invalid device ordinal'\n")  # fmt: skip
        return 1
    ring = socket.socket()
    ring.bind((str(rank["model"]["address"]), 0))
    ring.listen(1)
    table = bootstrap(rank, ring)
    n = len(table)
    nxt = table[(int(rank["rank"]) + 1) % n]
    out = socket.create_connection(tuple(nxt["ring"]))
    inp = ring.accept()[0].makefile("rb")
    if os.environ.get("NCCL_DEBUG", "").upper() == "INFO":  # NCCL prints to stdout at init
        sys.stdout.write("\n".join(debug_lines(rank, table)) + "\n")
        sys.stdout.flush()
    hang = fault_of(rank, "hang")
    if hang is not None and (hang != "multi" or len({h["model"]["node"] for h in table}) > 1):
        signal.pause()  # a hung rank: the ring waits on it until the launcher's deadline
    if fault_of(rank, "internal_error") is not None:
        warn(rank, "Cuda failure 'an illegal memory access was encountered'")
        return failure(rank, "internal error - please report this issue to the NCCL developers / ")
    nodes = {h["model"]["node"] for h in table}
    if fault_of(rank, "ib_error") is not None and len(nodes) > 1:  # IB carries inter-node only
        peer = nxt["model"]["address"]
        warn(rank, f"NET/IB: Got completion from peer {peer}<{40000 + int(rank['rank'])}> with "
             "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129 "
             "req_type=Send hca mlx5_0")  # fmt: skip
        return failure(rank, REMOTE)
    dies = fault_of(rank, "rank_dies")
    if dies is not None:
        return rank_dies(rank, str(dies))
    if fault_of(rank, "dies") is not None:
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)  # the node dies mid-job: its ranks vanish
    steps = sizes(o)
    bws = [busbw(table, s, coll) for s in steps]
    total = sum(2 * s / (b * 1e3) for s, b in zip(steps, bws, strict=True)) * 1e-6
    pause = min(MAX_SIM_S, total * (int(o["iters"]) + int(o["warmup_iters"]))) / len(steps)
    try:
        for _ in steps:  # one pass of the ring per size
            if rank["rank"] == 0:
                time.sleep(pause)
                out.sendall(b"x")
                if not inp.read(1):
                    raise ConnectionError("closed")
            else:
                if not inp.read(1):
                    raise ConnectionError("closed")
                out.sendall(b"x")
    except OSError:
        time.sleep(0.5)  # NCCL's proxy notices a dead peer on its next poll, not at once
        warn(rank, "NET/Socket : socket closed by peer (remote process exited)")
        return failure(rank, REMOTE)
    if rank["rank"] != 0:
        return 0
    wrong = any(h["model"]["faults"].get("wrong") is not None for h in table)
    lines = header(o, table, coll)
    bad = 0
    for s, b in zip(steps, bws, strict=True):
        w = (s // 4) // 1000 + 1 if wrong else 0
        bad += w
        lines.append(row(s, b, n, w, coll))
    avg = sum(bws) / len(bws) if n > 1 else 0.0
    lines += [
        f"# {'Out of bounds values':<20} : {bad} {'FAILED' if bad else 'OK'}",
        f"# {'Avg bus bandwidth':<20} : {avg:g} ",
        "#",
        f"# Collective test concluded: {coll}",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COLLECTIVES:
        sys.stderr.write(f"usage: nccl_sim.py {'|'.join(COLLECTIVES)} [options]\n")
        return 2
    coll = argv[0]
    try:
        o = parse_args(argv[1:])
        sizes(o)
    except Usage as exc:
        sys.stderr.write(f"{exc}\nUSAGE: {coll} [-t,--nthreads <num threads>] ...\n")
        return 1
    try:
        return run(o, coll)
    except (OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"nodegate-sim {coll}: {type(exc).__name__}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

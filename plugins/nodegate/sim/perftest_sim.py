"""Simulated `ib_write_bw` for the nodegate simulated fleet (standard library only).

A real TCP server listening on the node's own loopback address and a real client connecting
to it, so orchestration, readiness and deadlines are exercised for real. The two sides swap
their node models over the socket; the bandwidth printed is computed from both (rail rate,
slow-rail and slow-node factors, a degraded leaf-to-leaf link) in perftest's own layout
(header, address lines, result table: as in the corpus captures of perftest 4.5+/24.x).

    python3 -I perftest_sim.py ib_write_bw [perftest options] [server address]

Node model: $NG_NODE/root/var/lib/nodegate-sim/perftest.json (written at fleet build).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import socket
import sys
import time
import uuid
from typing import Any

LINE = "-" * 87
REGISTRY_KEEP = 4096  # flow records kept before the ones over for an hour are dropped
EFFICIENCY = 0.965  # large-message RDMA write efficiency on an NDR/HDR link (~96-97 %)


# ib_write_bw's options (perftest 4.5 / 24.x, src/perftest_parameters.c): short ones that take
# a value, long ones that take a value (`--opt=v` or `--opt v`), and flags. Anything else fails
# as perftest's parser does (getopt's message, then its own), rc 1.
VALUE_SHORT = {
    "d": "dev", "i": "ib_port", "p": "port", "s": "size", "n": "iters", "D": "duration",
    "q": "qps", "m": "mtu", "x": "gid", "t": "tx_depth", "c": "connection", "I": "inline",
    "S": "sl", "Q": "cq_mod", "T": "tos", "u": "qp_timeout", "l": "post_list",
}  # fmt: skip
VALUE_LONG = {
    "ib-dev": "dev", "ib-port": "ib_port", "port": "port", "size": "size", "iters": "iters",
    "duration": "duration", "qp": "qps", "mtu": "mtu", "gid-index": "gid",
    "tx-depth": "tx_depth", "connection": "connection", "inline_size": "inline", "sl": "sl",
    "cq-mod": "cq_mod", "tos": "tos", "post_list": "post_list", "use_cuda": "cuda",
    "use_cuda_bus_id": "cuda_bus", "source_ip": "source_ip", "tclass": "tclass",
}  # fmt: skip
FLAG_SHORT = {"a": "all", "b": "bidir", "F": "cpu_freq", "R": "rdma_cm", "z": "com_rdma_cm",
              "N": "no_peak", "e": "events"}  # fmt: skip
FLAG_LONG = {
    "all": "all", "bidirectional": "bidir", "CPU-freq": "cpu_freq", "rdma_cm": "rdma_cm",
    "com_rdma_cm": "com_rdma_cm", "noPeak": "no_peak", "events": "events",
    "report_gbits": "gbits", "report-both": "report_both", "run_infinitely": "infinitely",
    "use_cuda_dmabuf": "cuda_dmabuf", "use_hugepages": "hugepages", "odp": "odp",
    "reversed": "reversed", "perform_warm_up": "warm_up", "ipv6": "ipv6",
    "mr_per_qp": "mr_per_qp", "disable_pcie_relaxed": "no_relaxed",
}  # fmt: skip
INTS = ("port", "size", "iters", "qps", "duration")


class BadArgs(Exception):
    """What getopt printed for a bad option (perftest's own lines follow it)."""


def parse_args(argv: list[str]) -> dict[str, object]:
    """ib_write_bw's argv -> options (`host`: the server to connect to, for a client)."""
    opts: dict[str, object] = {"port": 18515, "size": 65536, "iters": 5000, "qps": 1}
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name in FLAG_LONG and not eq:
                opts[FLAG_LONG[name]] = True
            elif name in VALUE_LONG:
                if not eq:
                    if i >= len(argv):
                        raise BadArgs(f"ib_write_bw: option '{a}' requires an argument")
                    value, i = argv[i], i + 1
                opts[VALUE_LONG[name]] = value
            else:
                raise BadArgs(f"ib_write_bw: unrecognized option '{a}'")
        elif a.startswith("-") and len(a) > 1:
            k = 1
            while k < len(a):
                c = a[k]
                k += 1
                if c in FLAG_SHORT:
                    opts[FLAG_SHORT[c]] = True
                elif c in VALUE_SHORT:
                    if k < len(a):
                        value = a[k:]
                    elif i < len(argv):
                        value, i = argv[i], i + 1
                    else:
                        raise BadArgs(f"ib_write_bw: option requires an argument -- '{c}'")
                    opts[VALUE_SHORT[c]] = value
                    break
                else:
                    raise BadArgs(f"ib_write_bw: invalid option -- '{c}'")
        else:
            opts["host"] = a
    for key in INTS:
        if key in opts:
            try:
                opts[key] = int(str(opts[key]))
            except ValueError:
                raise BadArgs(f" Invalid {key} value: {opts[key]}") from None
    return opts


def model() -> dict[str, object]:
    path = os.path.join(os.environ["NG_NODE"], "root/var/lib/nodegate-sim/perftest.json")
    with open(path) as f:
        doc: dict[str, object] = json.load(f)
    return doc


def rail_of(m: dict[str, object], dev: str) -> dict[str, object] | None:
    rails = m["rails"]
    assert isinstance(rails, dict)
    r = rails.get(dev)
    return r if isinstance(r, dict) else None


def fault(m: dict[str, object], name: str) -> bool:
    f = m.get("faults")
    return isinstance(f, dict) and bool(f.get(name))


def roce_mismatch(o: dict[str, object], me: dict[str, object], dev: str) -> str | None:
    """On a RoCE node: why the GID index or traffic class given is not the node's (None: ok)."""
    roce = me.get("roce")
    if not isinstance(roce, dict):
        return None
    gids = roce["gid_index"]
    want_gid = gids.get(dev) if isinstance(gids, dict) else None
    if want_gid is None:
        return f"{dev} has no RoCE v2 IPv4 GID"
    if o.get("gid") != str(want_gid):
        return f"-x {o.get('gid', '(not given: 0)')}, the RoCE v2 IPv4 GID of {dev} is {want_gid}"
    if o.get("tclass") != str(roce["tclass"]):
        return (
            f"--tclass {o.get('tclass', '(not given: 0)')}, the fabric's class is {roce['tclass']}"
        )
    return None


def roce_mismatch_peer(peer: dict[str, object]) -> str | None:
    """The other side's own GID/tclass problem: the QPs of both sides fail to connect."""
    why = peer.get("roce_error")
    return f"peer: {why}" if isinstance(why, str) else None


def header(dev: str, o: dict[str, object], bidir: bool) -> str:
    title = "RDMA_Write Bidirectional BW Test" if bidir else "RDMA_Write BW Test"
    return "\n".join(
        [
            LINE,
            f"                    {title}",
            f" Dual-port       : OFF\t\tDevice         : {dev}",
            f" Number of qps   : {o['qps']}\t\tTransport type : IB",
            " Connection type : RC\t\tUsing SRQ      : OFF",
            " PCIe relax order: ON",
            " ibv_wr* API     : ON",
            " TX depth        : 128",
            " CQ Moderation   : 100",
            " Mtu             : 4096[B]",
            " Link type       : IB",
            " Max inline data : 0[B]",
            " rdma_cm QPs\t : OFF",
            " Data ex. method : Ethernet",
            LINE,
        ]
    )


def addresses(me: dict[str, object], peer: dict[str, object], qps: int) -> str:
    out = []
    for q in range(qps):
        out.append(
            f" local address: LID {me['lid']:#06x} QPN {0x60 + q:#06x} PSN 0x3d5a{q:02x} "
            f"RKey 0x1fffbd VAddr 0x007f2b6ddb5000"
        )
    for q in range(qps):
        out.append(
            f" remote address: LID {peer['lid']:#06x} QPN {0x90 + q:#06x} PSN 0x5d0e{q:02x} "
            f"RKey 0x1ffeba VAddr 0x007f8f5a6f7000"
        )
    return "\n".join(out)


def table(o: dict[str, object], bw_gbps: float, server: bool) -> str:
    gbits = bool(o.get("gbits"))
    unit = "Gb/sec" if gbits else "MB/sec"
    # perftest MB/sec is 2^20 bytes per second (see parsers/perftest.py)
    val = bw_gbps if gbits else bw_gbps * 1e9 / 8 / 1048576
    size = int(str(o["size"]))
    rate_mpps = bw_gbps * 1e9 / 8 / size / 1e6
    peak = 0.0 if "duration" in o else val * 1.0002
    return "\n".join(
        [
            f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]",
            f" {size:<10d} {int(str(o['iters'])):<16d} {peak:.2f}            {val:.2f} \t\t     "
            f"{rate_mpps:.6f}",
            LINE,
        ]
    )


def bandwidth(
    a: dict[str, object], b: dict[str, object], ra: dict[str, object], rb: dict[str, object]
) -> float:
    rate = min(float(str(ra["rate_gbps"])), float(str(rb["rate_gbps"])))
    factor = min(float(str(ra["factor"])), float(str(rb["factor"])))
    factor *= min(float(str(a["node_factor"])), float(str(b["node_factor"])))
    bad_a, bad_b = a["bad_links"], b["bad_links"]
    assert isinstance(bad_a, list) and isinstance(bad_b, list)
    if b["leaf"] in bad_a or a["leaf"] in bad_b:
        factor *= 0.5
    return round(rate * EFFICIENCY * factor, 2)


def _flowmodel() -> Any:
    """sim/flowmodel.py, loaded by path (this script runs isolated: -I -S)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flowmodel.py")
    spec = importlib.util.spec_from_file_location("nodegate_sim_flowmodel", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def traffic_dir() -> str:
    """The fleet's shared traffic state: the topology and the flow registry."""
    return os.path.join(os.environ["NG_NODE"], "fabric", "traffic")


def _rail_index(dev: str) -> int:
    tail = dev.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def timed_flow(
    me: dict[str, object], peer: dict[str, object], dev: str, seconds: float
) -> tuple[float, dict[str, float], dict[str, float]]:
    """Register the flow, run it `seconds`, then its average goodput and the counters it adds
    at the sender and the receiver, from every flow that overlapped it (registry locked)."""
    fm = _flowmodel()
    d = traffic_dir()
    try:
        with open(os.path.join(d, "topology.json")) as f:
            fab = fm.Fabric(json.load(f))
    except FileNotFoundError:  # a fleet built without the flow model: the pair's own rate
        time.sleep(seconds)
        return (
            round(bandwidth(me, peer, rail_of(me, dev) or {}, rail_of(peer, dev) or {}), 2),
            {},
            {},
        )
    me_id = uuid.uuid4().hex
    rec = {"id": me_id, "src": me["node"], "dst": peer["node"], "rail": _rail_index(dev)}
    with _locked(os.path.join(d, "flows.lock")), open(os.path.join(d, "flows.jsonl"), "a") as f:
        f.write(json.dumps({**rec, "start": time.time()}) + "\n")
    time.sleep(seconds)
    with _locked(os.path.join(d, "flows.lock")):
        now = time.time()
        with open(os.path.join(d, "flows.jsonl"), "a") as f:
            f.write(json.dumps({"id": me_id, "end": now}) + "\n")
        with open(os.path.join(d, "flows.jsonl")) as f:
            docs: dict[str, dict[str, Any]] = {}
            for line in f:
                r = json.loads(line)
                if "start" in r:
                    docs[r["id"]] = r
                elif r["id"] in docs:
                    docs[r["id"]]["end"] = r["end"]
        if len(docs) > REGISTRY_KEEP:  # flows long over overlap nothing that runs now
            keep = [r for r in docs.values() if r.get("end") is None or r["end"] > now - 3600]
            with open(os.path.join(d, "flows.jsonl.new"), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in keep)
            os.replace(os.path.join(d, "flows.jsonl.new"), os.path.join(d, "flows.jsonl"))
    spans = fm.flows_of(
        r for r in docs.values()
        if r["start"] < now and (r.get("end") is None or r["end"] > docs[me_id]["start"])
    )  # fmt: skip
    bw, c, _shared = fm.flow_average(fab, me_id, spans, now)
    if c.switch:
        add_xmit_wait(os.path.join(d, "xmit_wait.tsv"), c.switch)
    return round(bw, 2), c.sender, c.receiver


def add_xmit_wait(path: str, ticks: dict[str, float]) -> None:
    """Add a flow's share of the switch ports' XmitWait to the fleet's table (LID, port,
    ticks per line; sim/tools/fabric.py's perfquery adds it to the port's counter)."""
    with _locked(os.path.join(os.path.dirname(path), "flows.lock")):
        total: dict[str, float] = {}
        try:
            with open(path) as f:
                for line in f:
                    lid, port, n = line.split("\t")
                    total[f"{lid}:{port}"] = float(n)
        except FileNotFoundError:
            pass
        for k, v in ticks.items():
            total[k] = total.get(k, 0.0) + v
        with open(path + ".new", "w") as f:
            f.writelines(f"{k.replace(':', chr(9))}\t{v:.0f}\n" for k, v in sorted(total.items()))
        os.replace(path + ".new", path)


class _locked:
    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def add_counters(dev: str, deltas: dict[str, float]) -> None:
    """Add what a flow did to this node's NIC counters (read by its ethtool -S and rdma
    statistic, sim/tools/roce_render.py): one file per counter, under the node's lock."""
    base = os.path.join(os.environ["NG_NODE"], "root/var/lib/nodegate-sim/traffic", dev)
    os.makedirs(base, exist_ok=True)
    with _locked(os.path.join(base, ".lock")):
        for name, v in deltas.items():
            path = os.path.join(base, name)
            try:
                with open(path) as f:
                    old = int(f.read().strip() or 0)
            except FileNotFoundError:
                old = 0
            with open(path + ".new", "w") as f:
                f.write(f"{old + int(round(v))}\n")
            os.replace(path + ".new", path)


def fail(*lines: str, rc: int = 1) -> int:
    sys.stdout.flush()
    for ln in lines:
        print(ln, file=sys.stderr)
    return rc


def serve(o: dict[str, object], me: dict[str, object]) -> int:
    dev = str(o.get("dev", ""))
    mine = rail_of(me, dev)
    if mine is None:
        return fail(
            f" Unable to find the Infiniband/RoCE device {dev}",
            " Couldn't get context for the device",
        )
    print("\n************************************")
    print("* Waiting for client to connect... *")
    print("************************************", flush=True)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((str(me["address"]), int(str(o["port"]))))
    s.listen(1)
    conn, _ = s.accept()
    peer = json.loads(conn.makefile().readline())
    mine_why = roce_mismatch(o, me, dev)
    conn.sendall((json.dumps(dict(me, roce_error=mine_why)) + "\n").encode())
    why = mine_why or roce_mismatch_peer(peer)
    if fault(me, "qp_error") or fault(peer, "qp_error") or why:
        conn.close()
        print(header(dev, o, bool(o.get("bidir"))))
        return fail(
            "Failed to modify QP 4455 to RTR",
            " Unable to Connect the HCA's through the link",
            *([f"nodegate-sim: {why}"] if why else []),
        )
    bw = bandwidth(me, peer, mine, peer["rail"])
    # The server measures while the client transfers; it ends when the client says done (in
    # duration mode the client brings the flow model's number and the receiver's counters).
    said = conn.makefile().readline().split(" ", 1)
    conn.close()
    if "duration" in o:
        if said[0] != "done" or len(said) < 2:
            return fail(" Failed to complete run_iter_bw function successfully")
        got = json.loads(said[1])
        bw = float(got["bw"])
        add_counters(dev, got["receiver"])
    print(header(dev, o, bool(o.get("bidir"))))
    print(addresses(me, peer, int(str(o["qps"]))))
    print(LINE)
    print(table(o, bw, True), flush=True)
    if fault(me, "server_hang"):
        time.sleep(86400)  # a hung server: only its deadline or a kill ends it
    return 0


def client(o: dict[str, object], me: dict[str, object]) -> int:
    dev = str(o.get("dev", ""))
    mine = rail_of(me, dev)
    if mine is None:
        return fail(
            f" Unable to find the Infiniband/RoCE device {dev}",
            " Couldn't get context for the device",
        )
    host, port = str(o["host"]), int(str(o["port"]))
    if fault(me, "client_refused"):
        port += 1000  # nothing listens there: a real ECONNREFUSED
    try:
        conn = socket.create_connection((host, port), timeout=10)
    except OSError:
        # perftest's own wording (corpus: ib_write_bw__fail-couldnt-connect-socket-*.txt)
        print(LINE)
        return fail(
            f"Couldn't connect to {host}:{port}",
            "Unable to open file descriptor for socket connection Unable to init the "
            "socket connection",
        )
    why = roce_mismatch(o, me, dev)
    mine_doc = dict(me, rail=mine, roce_error=why)
    conn.sendall((json.dumps(mine_doc) + "\n").encode())
    f = conn.makefile()
    peer = json.loads(f.readline())
    why = why or roce_mismatch_peer(peer)
    if fault(me, "qp_error") or fault(peer, "qp_error") or why:
        print(header(dev, o, bool(o.get("bidir"))))
        return fail(
            "Failed to modify QP 4456 to RTR",
            " Unable to Connect the HCA's through the link",
            *([f"nodegate-sim: {why}"] if why else []),
        )
    peer_rail = rail_of(peer, dev) or mine
    bw = bandwidth(me, peer, mine, peer_rail)
    size, iters = int(str(o["size"])), int(str(o["iters"]))
    if "duration" in o:
        # Duration mode: the flow runs for real seconds; its number comes from the fabric's
        # flow model over the time it overlapped every other flow (sim/flowmodel.py).
        bw, sent, received = timed_flow(me, peer, dev, float(str(o["duration"])))
        add_counters(dev, sent)
        conn.sendall(("done " + json.dumps({"bw": bw, "receiver": received}) + "\n").encode())
        o["iters"] = int(bw * 1e9 / 8 * float(str(o["duration"])) / size)
    else:
        # Real time on the wire, scaled down 1000x so tests stay fast but ordering stays real.
        time.sleep(min(size * iters * 8 / (bw * 1e9) / 1000, 2.0) if bw > 0 else 0)
        conn.sendall(b"done\n")
    conn.close()
    print(header(dev, o, bool(o.get("bidir"))))
    print(addresses(me, peer, int(str(o["qps"]))))
    print(LINE)
    print(table(o, bw, False))
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "ib_write_bw":
        return fail("usage: perftest_sim.py ib_write_bw [options] [host]", rc=2)
    try:
        o = parse_args(argv[1:])
    except BadArgs as exc:
        # perftest: getopt's line, then " Invalid Command or flag." (parser.c), exit 1
        return fail(
            str(exc),
            " Invalid Command or flag.",
            " Please check command line and run again.",
            "",
            " Parser function exited with Error",
        )
    me = model()
    return client(o, me) if "host" in o else serve(o, me)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

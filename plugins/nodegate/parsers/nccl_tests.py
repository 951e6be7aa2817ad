"""Parsers for nccl-tests `all_reduce_perf` output and NCCL_DEBUG INFO/WARN lines.

Example: ``parse_all_reduce_perf(out).avg_busbw_gbytes_s`` -> ``70.742`` for a 2-node H100 run.
A run that failed (CUDA/NCCL error, NCCL WARN, wrong values) is an `NcclTestsFailure`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.errors import ParseError
from nodegate.parsers.text import clean_lines

TOOL = "all_reduce_perf"
DEBUG_TOOL = "nccl_debug"

# The NCCL 1.x-era build prints the first header line without '#' (nccl1-era-p100-*).
_HEADER_RE = re.compile(
    r"^#?\s*nThread (?P<nthread>\d+) nGpus (?P<ngpus>\d+) minBytes (?P<min>\d+) "
    r"maxBytes (?P<max>\d+) step: (?P<step>\S+) warmup iters: (?P<warmup>\d+) "
    r"iters: (?P<iters>\d+)(?: agg iters: (?P<agg>\d+))?(?: validation: (?P<validation>\d+))?"
    r"(?: graph: (?P<graph>\d+))?"
)
# Old builds print no Group and no Pid (nccl1-era-*), and PCI ids as `[0x00]` or `[0000:04:00]`.
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?(?:\s+Pid\s+(?P<pid>\d+))?"
    r"\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<name>.+)$"
)
# Column header: `size count type redop [root] time algbw busbw error|#wrong ...` or, in
# NCCL 1.x-era builds, `bytes N type op time algbw busbw res ...`.
_COLUMNS_RE = re.compile(r"^#\s*(?P<cols>(?:size|bytes)\s+(?:count|N)\s+type\s.*)$")
_OOB_RE = re.compile(r"^# Out of bounds values : (?P<n>\d+) (?P<verdict>OK|FAILED)$")
# nccl-tests >= 2.13 prints `%g` and, with `-c`, OK/FAILED against its own check (util.cu).
_AVG_RE = re.compile(
    r"^# Avg bus bandwidth\s*: (?P<bw>\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?:\s+(?P<check>OK|FAILED))?$"
)
_VERSION_RE = re.compile(r"NCCL(?: Tests compiled with NCCL| version) (?P<v>[\w.+-]+)")
# Newer releases (src/util.cu writeDeviceReport): `# nccl-tests version 2.19.6
# nccl-headers=22807 nccl-library=22807`; NCCL_VERSION_CODE is major*10000 + minor*100 + patch.
_TESTS_VERSION_RE = re.compile(
    r"^# nccl-tests version (?P<tests>\S+)(?: nccl-headers=(?P<hdr>\d+))?"
    r"(?: nccl-library=(?P<lib>\d+))?"
)
# `mpirun --tag-output` (Open MPI 4: `[1,0]<stdout>:`; PRRTE in Open MPI 5 adds a space).
_TAG_RE = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>: ?")
_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nccl_error", re.compile(r"(?:Test )?NCCL failure \S+ '.*")),
    ("cuda_error", re.compile(r"(?:Test )?CUDA failure \S+ '.*")),
    ("nccl_warn", re.compile(r"\bNCCL WARN\b.*")),
    ("test_failed", re.compile(r"Test FAILED|Test failure \S+")),
)
_FAIL_HOST_RE = re.compile(r"^(?P<host>[^\s:]+): Test (?:NCCL|CUDA) failure")
# Excerpts may start below the column header (multinode-16G-*); 13 columns is the current layout.
_HALF = ("time", "algbw", "busbw", "#wrong")
_CURRENT_COLUMNS = ("size", "count", "type", "redop", "root", *_HALF, *_HALF)


@dataclass(frozen=True, slots=True)
class NcclTestsHeader:
    """The `# nThread ... nGpus ... minBytes` line; agg/validation/graph absent on old builds."""

    nthread: int
    ngpus: int
    min_bytes: int
    max_bytes: int
    step: str  # raw, e.g. `2(factor)` or `1048576(bytes)`
    warmup_iters: int
    iters: int
    agg_iters: int | None
    validation: int | None
    graph: int | None


@dataclass(frozen=True, slots=True)
class NcclRank:
    """One `#  Rank N Group G Pid P on HOST device D [BUS] NAME` line."""

    rank: int
    group: int | None
    pid: int | None
    host: str
    device: int
    bus_id: str
    device_name: str


@dataclass(frozen=True, slots=True)
class NcclTiming:
    """Out-of-place or in-place half of a row; GB/s are 10^9 bytes/s as nccl-tests prints them."""

    time_us: float
    algbw_gbytes_s: float
    busbw_gbytes_s: float
    wrong: int | None  # `#wrong` column
    error: str | None  # `error`/`res` column of older builds, raw; None when printed `N/A`


@dataclass(frozen=True, slots=True)
class NcclRow:
    """One size of the sweep."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: NcclTiming
    in_place: NcclTiming


@dataclass(frozen=True, slots=True)
class NcclTestsResult:
    """A completed all_reduce_perf run; independent_runs > 1 means a non-MPI build under mpirun."""

    header: NcclTestsHeader
    nccl_version: str | None
    nccl_tests_version: str | None  # printed by nccl-tests >= 2.13 only
    ranks: tuple[NcclRank, ...]
    hosts: tuple[str, ...]
    independent_runs: int
    columns: tuple[str, ...]
    rows: tuple[NcclRow, ...]
    out_of_bounds: int | None
    avg_busbw_gbytes_s: float | None
    other_lines: tuple[str, ...]  # ssh warnings, NCCL INFO lines mixed into stdout


@dataclass(frozen=True, slots=True)
class NcclTestsFailure:
    """A run nccl-tests reported as failed; messages: the tool's lines, verbatim, deduplicated."""

    kind: str
    message: str
    messages: tuple[str, ...]
    hosts: tuple[str, ...]
    rows_completed: int


def untagged_lines(text: str) -> list[str]:
    """The output's lines, stripped, with `mpirun --tag-output` prefixes removed."""
    return [_TAG_RE.sub("", line.strip(), count=1).strip() for line in clean_lines(text)]


def nccl_version_of_code(code: int) -> str:
    """NCCL_VERSION_CODE -> `2.28.7` (22807); codes before 2.9 were major*1000 + minor*100."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _failure(lines: list[str], rows_done: int, oob_failed: str | None) -> NcclTestsFailure | None:
    found: list[tuple[str, str]] = []
    for line in lines:
        for kind, pattern in _FAILURES:
            if pattern.search(line):
                if line not in (m for _, m in found):
                    found.append((kind, line))
                break
    if oob_failed is not None:
        found.insert(0, ("wrong_values", oob_failed))
    if not found:
        return None
    hosts = sorted({m["host"] for _, line in found if (m := _FAIL_HOST_RE.match(line))})
    return NcclTestsFailure(
        found[0][0], found[0][1], tuple(m for _, m in found), tuple(hosts), rows_done
    )


def _header(m: re.Match[str]) -> NcclTestsHeader:
    def opt(key: str) -> int | None:
        return None if m[key] is None else int(m[key])

    return NcclTestsHeader(
        nthread=int(m["nthread"]),
        ngpus=int(m["ngpus"]),
        min_bytes=int(m["min"]),
        max_bytes=int(m["max"]),
        step=m["step"],
        warmup_iters=int(m["warmup"]),
        iters=int(m["iters"]),
        agg_iters=opt("agg"),
        validation=opt("validation"),
        graph=opt("graph"),
    )


def _timing(tokens: list[str]) -> NcclTiming:
    time_us, algbw, busbw, check = tokens
    wrong = int(check) if re.fullmatch(r"\d+", check) else None
    return NcclTiming(
        time_us=float(time_us),
        algbw_gbytes_s=float(algbw),
        busbw_gbytes_s=float(busbw),
        wrong=wrong,
        error=None if wrong is not None or check == "N/A" else check,
    )


def _row(line: str, columns: tuple[str, ...]) -> NcclRow | None:
    """A table row laid out as `columns` says, or None when the line is not one."""
    tokens = line.split()
    if len(tokens) != len(columns) or len(columns) < 11:
        return None
    lead = dict(zip(columns[:-8], tokens[:-8], strict=True))
    size, count = lead.get("size", lead.get("bytes")), lead.get("count", lead.get("N"))
    root = lead.get("root")
    try:
        return NcclRow(
            size_bytes=int(size or ""),
            count=int(count or ""),
            dtype=lead["type"],
            redop=lead.get("redop", lead.get("op")),
            root=None if root is None else int(root),
            out_of_place=_timing(tokens[-8:-4]),
            in_place=_timing(tokens[-4:]),
        )
    except (ValueError, KeyError):
        return None


def parse_all_reduce_perf(text: str) -> NcclTestsResult | NcclTestsFailure:
    """Parse one all_reduce_perf capture (stdout of every rank as the launcher merged it)."""
    nonblank = [line for line in untagged_lines(text) if line]
    if not nonblank:
        raise ParseError(TOOL, "empty output")
    headers: list[NcclTestsHeader] = []
    ranks: list[NcclRank] = []
    columns: tuple[str, ...] = ()
    rows: list[NcclRow] = []
    other: list[str] = []
    version = tests_version = None
    oob: int | None = None
    oob_failed = None
    avg: float | None = None
    for line in nonblank:
        if m := _HEADER_RE.match(line):
            headers.append(_header(m))
        elif m := _RANK_RE.match(line):
            ranks.append(
                NcclRank(
                    rank=int(m["rank"]),
                    group=None if m["group"] is None else int(m["group"]),
                    pid=None if m["pid"] is None else int(m["pid"]),
                    host=m["host"],
                    device=int(m["dev"]),
                    bus_id=m["bus"],
                    device_name=m["name"].strip(),
                )
            )
        elif m := _COLUMNS_RE.match(line):
            columns = tuple(m["cols"].split())
        elif m := _OOB_RE.match(line):
            oob = int(m["n"])
            oob_failed = line if m["verdict"] == "FAILED" else None
        elif m := _AVG_RE.match(line):
            avg = float(m["bw"])
            if m["check"] == "FAILED":
                oob_failed = oob_failed or line
        elif (row := _row(line, columns or _CURRENT_COLUMNS)) is not None:
            rows.append(row)
        elif line.startswith("#"):
            if m := _TESTS_VERSION_RE.match(line):
                tests_version = m["tests"]
                code = m["lib"] or m["hdr"]
                version = nccl_version_of_code(int(code)) if code else version
            elif m := _VERSION_RE.search(line):
                version = m["v"]
            # Remaining '#' lines are the banner's frame (`#`, `# Using devices`, units row).
        else:
            other.append(line)
    failure = _failure(nonblank, len(rows), oob_failed)
    if failure is not None:
        return failure
    if not headers:
        raise ParseError(TOOL, f"no '# nThread ... nGpus' header; first line: {nonblank[0][:80]!r}")
    # A non-MPI build under mpirun: every process prints its own header and numbers its ranks
    # from 0 (non-mpi-build-under-mpirun-*); the excerpt is cut, but this alone rejects the run.
    rank_uses = max((sum(r.rank == n.rank for r in ranks) for n in ranks), default=1)
    independent = max(len(headers), rank_uses)
    if independent == 1:
        if not columns or not rows:
            raise ParseError(TOOL, "no result rows under the column header (truncated?)")
        if avg is None:
            raise ParseError(TOOL, "no '# Avg bus bandwidth' footer (truncated?)")
    return NcclTestsResult(
        header=headers[0],
        nccl_version=version,
        nccl_tests_version=tests_version,
        ranks=tuple(ranks),
        hosts=tuple(sorted({r.host for r in ranks})),
        independent_runs=independent,
        columns=columns,
        rows=tuple(rows),
        out_of_bounds=oob,
        avg_busbw_gbytes_s=avg,
        other_lines=tuple(other),
    )


# `host:pid:tid [cudaDev] [file.cc:line] NCCL INFO|WARN message` (NCCL_DEBUG=INFO).
_DEBUG_RE = re.compile(
    r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:(?P<src>\S+:\d+) )?"
    r"NCCL (?P<level>INFO|WARN) (?P<msg>.*)$"
)
_IB_USING_RE = re.compile(r"^NET/IB : Using (?P<devs>(?:\[\d+\]\S+\s*)+)(?P<rest>.*)$")
_IB_DEV_RE = re.compile(r"\[(?P<idx>\d+)\](?P<name>[^:\s]+):(?P<port>\d+)/(?P<flags>\S+)")
_OOB_IF_RE = re.compile(r"OOB (?P<ifname>[^:\s]+):(?P<addr>[^<\s]+)<\d+>")
# An IB completion error, as each NCCL release words it (src/transport/net_ib*.cc WARN lines):
#   2.19   `NET/IB : Got completion from peer P with error 4, opcode 0, len 0, vendor err 81 (Send)`
#   2.21   `NET/IB : Got completion from peer P with status=12 opcode=0 len=0 vendor err 129 (Recv)`
#   2.23+  `NET/IB: Got completion from peer P with status=5 opcode=0 len=0 vendor err 249 (Recv)
#           localGid G remoteGidsG hca mlx5_9`
#   2.28.7 `NET/IB: ... with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0
#           vendor_err=129 req_type=Send localGid G remoteGidsG hca mlx5_5`
#   later  the same without reqSize/req_type; GIN: `NET/IB/GIN: Got completion ...`.
# The GID parts appear on RoCE only (no space after `remoteGids`).
_IB_COMPLETION_RE = re.compile(
    r"NET/IB(?:/GIN)?\s?: Got completion from peer (?P<peer>\S+?)(?:<(?P<port>\d+)>)? with "
    r"(?:error |status=)(?:\w+\()?(?P<status>\d+)\)?,? "
    r"opcode[ =](?:\w+\()?(?P<opcode>\d+)\)?,?"
    r"(?: len[ =](?P<len>\d+),?| reqSize=(?P<reqsize>-?\d+))? "
    r"vendor[ _]err[ =](?P<vendor>\d+)(?: \((?P<dir>\w+)\))?(?: req_type=(?P<rtype>\w+))?"
    r"(?:\s+localGid\s+(?P<lgid>\S+))?(?:\s+remoteGids?\s*(?P<rgid>\S+))?"
    r"(?:\s+hca (?P<hca>\S+))?"
)


@dataclass(frozen=True, slots=True)
class NcclIbDevice:
    """One `[i]mlx5_0:1/IB/SHARP` entry of `NET/IB : Using`; link is `IB` or `RoCE`."""

    index: int
    name: str
    port: int
    link: str
    sharp: bool


@dataclass(frozen=True, slots=True)
class NcclIbCompletionError:
    """A `NET/IB : Got completion ... with error|status=N` WARN; status is the ibv_wc_status."""

    host: str
    peer: str
    status: int
    opcode: int
    length: int | None  # `len` (<= 2.28.3) or `reqSize` (2.28.7); absent from later releases
    vendor_err: int
    direction: str | None
    local_gid: str | None
    remote_gid: str | None
    hca: str | None  # the local HCA, printed by NCCL >= 2.23


@dataclass(frozen=True, slots=True)
class NcclDebugFacts:
    """What NCCL_DEBUG=INFO lines say about transport choice and IB errors."""

    hosts: tuple[str, ...]
    network: str | None  # `Using network IB|IBext|Socket`
    ib_devices: tuple[NcclIbDevice, ...]
    relaxed_ordering: bool | None
    oob_interface: str | None
    sharp: bool | None
    gdr: bool | None  # GPUDirect RDMA seen on a channel (`/GDRDMA`) or reported disabled
    nranks: int | None
    warnings: tuple[str, ...]
    ib_completion_errors: tuple[NcclIbCompletionError, ...]


def _opt_int(v: str | None) -> int | None:
    return None if v is None else int(v)


def parse_nccl_debug(text: str) -> NcclDebugFacts:
    """Parse the NCCL INFO/WARN lines of a capture; other lines are ignored."""
    hosts: set[str] = set()
    network = oob = None
    devices: tuple[NcclIbDevice, ...] = ()
    relaxed: bool | None = None
    gdr: bool | None = None
    nranks: int | None = None
    warns: list[str] = []
    completions: list[NcclIbCompletionError] = []
    for line in untagged_lines(text):
        m = _DEBUG_RE.match(line)
        if m is None:
            continue
        hosts.add(m["host"])
        msg = m["msg"].strip()
        if m["level"] == "WARN":
            warns.append(msg)
            if c := _IB_COMPLETION_RE.search(msg):
                completions.append(
                    NcclIbCompletionError(
                        host=m["host"],
                        peer=c["peer"],
                        status=int(c["status"]),
                        opcode=int(c["opcode"]),
                        length=_opt_int(c["len"] if c["len"] is not None else c["reqsize"]),
                        vendor_err=int(c["vendor"]),
                        direction=c["dir"] or c["rtype"],
                        local_gid=c["lgid"],
                        remote_gid=c["rgid"],
                        hca=c["hca"],
                    )
                )
        elif u := _IB_USING_RE.match(msg):
            devices = tuple(
                NcclIbDevice(
                    index=int(d["idx"]),
                    name=d["name"],
                    port=int(d["port"]),
                    link=d["flags"].split("/")[0],
                    sharp="SHARP" in d["flags"].split("/")[1:],
                )
                for d in _IB_DEV_RE.finditer(u["devs"])
            )
            relaxed = "[RO]" in u["rest"]
            # The device list always ends with `; OOB if:addr<n>`: without it the line was cut.
            if (o := _OOB_IF_RE.search(u["rest"])) is None:
                raise ParseError(DEBUG_TOOL, f"NET/IB device line cut short: {line[-60:]!r}")
            oob = o["ifname"]
        elif n := re.match(r"Using network (\S+)", msg):
            network = n[1]
        elif n := re.search(r"\bnranks (\d+)\b", msg):
            nranks = int(n[1])
        elif "/GDRDMA" in msg or "GPU Direct RDMA Enabled" in msg:
            gdr = True
        elif "GPU Direct RDMA Disabled" in msg and gdr is None:
            gdr = False
    if not hosts:
        raise ParseError(DEBUG_TOOL, "no 'host:pid:tid [dev] NCCL INFO|WARN' lines")
    return NcclDebugFacts(
        hosts=tuple(sorted(hosts)),
        network=network,
        ib_devices=devices,
        relaxed_ordering=relaxed,
        oob_interface=oob,
        sharp=any(d.sharp for d in devices) if devices else None,
        gdr=gdr,
        nranks=nranks,
        warnings=tuple(warns),
        ib_completion_errors=tuple(completions),
    )

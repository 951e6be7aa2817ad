"""Parser for perftest `ib_write_bw` output (client or server side, IB or RoCE, CUDA or host).

Example: ``parse_ib_write_bw(out).rows[-1].bw_average_gbps`` -> ``226.24`` for a CX7 RoCE run.
A run that failed (cannot connect, rdma_cm error, bad options) is a `PerftestFailure`, not an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from nodegate.core.errors import ParseError
from nodegate.parsers.perftest_cuda import CUDA_LINE_RES, PerftestCuda, cuda_preamble
from nodegate.parsers.perftest_failure import PerftestFailure, find_failure
from nodegate.parsers.text import clean_lines

TOOL = "ib_write_bw"
Side = Literal["client", "server"]

# perftest computes BW with format_factor = 0x100000 for MB/sec and 125000000 for Gb/sec
# (linux-rdma/perftest src/perftest_resources.c, print_report_bw): "MB/sec" is MiB/s.
_BYTES_PER_S = {"MB/sec": 1048576.0, "Gb/sec": 125_000_000.0}

_SEP_RE = re.compile(r"^-{20,}$")
_BANNER_RE = re.compile(r"^\*+$|^\* Waiting for client to connect\.\.\. \*$")
_TITLE_RE = re.compile(r"^(?P<title>\S.*? (?P<bidir>Bidirectional )?BW Test)$")
_KV_RE = re.compile(r"(?P<key>[A-Za-z][A-Za-z0-9 .*/_-]*?)\s*:\s*(?P<value>\S+)\s*")
_KV_LINE_RE = re.compile(rf"(?:{_KV_RE.pattern})+")
# rdma_cm runs print no RKey/VAddr (roce-cx7-rdmacm-*); LID is `%#04x`: `0000` or `0xd06`.
_ADDR_RE = re.compile(
    r"^(?P<end>local|remote) address: LID (?P<lid>\S+) QPN (?P<qpn>0x[0-9a-fA-F]+) "
    r"PSN (?P<psn>0x[0-9a-fA-F]+)"
    r"(?: RKey (?P<rkey>0x[0-9a-fA-F]+) VAddr (?P<vaddr>0x[0-9a-fA-F]+))?$"
)
_GID_RE = re.compile(r"^GID: (?P<gid>[0-9a-fA-F:.]+)$")
_TABLE_RE = re.compile(
    r"^#bytes\s+#iterations\s+BW peak\[(?P<unit>MB/sec|Gb/sec)\]\s+"
    r"BW average\[(?P<unit2>MB/sec|Gb/sec)\]\s+MsgRate\[Mpps\]$"
)
# Rows mix 6- and 2-decimal BW (first -a row) and tabs before MsgRate (roce-cx7-*).
_ROW_RE = re.compile(r"^(\d+)\s+(\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)$")
_WARNING_RES = (
    re.compile(r"^WARNING: .*$"),
    re.compile(r"^Conflicting CPU frequency values detected: .*$"),
    re.compile(r"^Perftest doesn't supports? CUDA tests with inline messages.*$"),
)
_SERVER_NOTICES = (
    "Waiting for client rdma_cm QP to connect",
    "Please run the same command with the IB/RoCE interface IP",
)


@dataclass(frozen=True, slots=True)
class QpAddress:
    """One `local/remote address:` line; rkey/vaddr absent on rdma_cm runs, gid on IB."""

    lid: int
    qpn: int
    psn: int
    rkey: int | None
    vaddr: int | None
    gid: str | None


@dataclass(frozen=True, slots=True)
class PerftestRow:
    """One result row; bw_*_gbps are 10^9 bit/s whatever unit perftest printed (raw kept)."""

    size_bytes: int
    iterations: int
    bw_peak: float | None  # None when perftest did not measure it (-D runs print 0.00)
    bw_average: float
    bw_peak_gbps: float | None
    bw_average_gbps: float
    msg_rate_mpps: float


@dataclass(frozen=True, slots=True)
class PerftestResult:
    """A completed ib_write_bw run as one side saw it."""

    test: str
    bidirectional: bool
    side: Side | None
    settings: dict[str, str]
    device: str | None
    transport_type: str | None
    connection_type: str | None
    link_type: str | None
    mtu_bytes: int | None
    qps: int | None
    gid_index: int | None
    rdma_cm_qps: bool | None
    data_exchange: str | None
    tos: int | None
    local_qps: tuple[QpAddress, ...] | None  # None: interleaved capture, owner unknowable
    remote_qps: tuple[QpAddress, ...] | None
    bw_unit: str
    peak_measured: bool
    rows: tuple[PerftestRow, ...]
    warnings: tuple[str, ...]
    cuda: PerftestCuda | None
    interleaved: bool  # both sides' stdout mixed line by line (loopback-all-sizes-interleaved-*)
    other_lines: tuple[str, ...]  # lines not recognised, kept as evidence


@dataclass(slots=True)
class _Run:
    """Mutable accumulator for one side's output while scanning."""

    title: str
    bidir: bool
    server_marked: bool
    settings: dict[str, str] = field(default_factory=dict)
    addrs: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    groups: list[list[tuple[str, ...]]] = field(default_factory=list)
    open_table: bool = False
    warnings: list[str] = field(default_factory=list)
    cuda: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    interleaved: bool = False


def _row(raw: tuple[str, ...], unit: str, peak_measured: bool) -> PerftestRow:
    size, iters, peak, avg, rate = raw
    factor = _BYTES_PER_S[unit] * 8 / 1e9
    peak_v = float(peak) if peak_measured else None
    return PerftestRow(
        size_bytes=int(size),
        iterations=int(iters),
        bw_peak=peak_v,
        bw_average=float(avg),
        bw_peak_gbps=None if peak_v is None else round(peak_v * factor, 6),
        bw_average_gbps=round(float(avg) * factor, 6),
        msg_rate_mpps=float(rate),
    )


def _scan(lines: list[str]) -> tuple[list[_Run], list[str]]:
    """Split the capture into runs; returns (runs, unrecognised lines outside any run)."""
    runs: list[_Run] = []
    cur: _Run | None = None
    pending_server = False
    pending_warn: list[str] = []
    pending_cuda: list[str] = []
    stray: list[str] = []
    in_header = False
    for line in (raw.strip() for raw in lines):
        # After a `Waiting for client` banner, lines up to the next title belong to the next run
        # (loopback-8M-*: the server's banner follows the client's table in one capture).
        owner = None if (cur is None or pending_server) else cur
        if not line:
            continue
        if _BANNER_RE.match(line):
            if "Waiting" in line:
                pending_server = True
            if cur is not None:
                cur.open_table = False
            continue
        if m := _TITLE_RE.match(line):
            if cur is not None and not cur.units and not pending_server:
                # A second title before the first run's table: two processes' stdout interleaved.
                cur.interleaved = True
                in_header = True
                continue
            cur = _Run(m["title"], m["bidir"] is not None, pending_server)
            cur.warnings.extend(pending_warn)
            cur.cuda.extend(pending_cuda)
            pending_server, pending_warn, pending_cuda = False, [], []
            runs.append(cur)
            in_header = True
            continue
        if _SEP_RE.match(line):
            if cur is not None:
                cur.open_table = False
            continue
        if any(p.match(line) for p in _WARNING_RES):
            (owner.warnings if owner else pending_warn).append(line)
            continue
        if any(p.match(line) for p in CUDA_LINE_RES):
            (owner.cuda if owner else pending_cuda).append(line)
            continue
        if owner is None:
            stray.append(line)
            continue
        if line in _SERVER_NOTICES:
            owner.server_marked = True
            in_header = False
        elif m := _ADDR_RE.match(line):
            owner.addrs.append((m["end"], m.groupdict()))
            in_header = False
        elif (m := _GID_RE.match(line)) and owner.addrs:
            owner.addrs[-1][1]["gid"] = m["gid"]
        elif m := _TABLE_RE.match(line):
            in_header = False
            if m["unit"] != m["unit2"]:
                raise ParseError(TOOL, f"mixed units in table header: {line!r}")
            owner.units.append(m["unit"])
            if not owner.open_table:
                owner.groups.append([])
            owner.open_table = True
        elif (m := _ROW_RE.match(line)) and owner.units:
            if not owner.open_table:
                owner.groups.append([])
                owner.open_table = True
            owner.groups[-1].append(m.groups())
        elif in_header and _KV_LINE_RE.fullmatch(line):
            for kv in _KV_RE.finditer(line):
                key, value = kv["key"].strip(), kv["value"]
                old = owner.settings.setdefault(key, value)
                if old != value:
                    raise ParseError(TOOL, f"conflicting values for {key!r}: {old!r} vs {value!r}")
        else:
            owner.other.append(line)
    return runs, stray


def _flag(value: str | None) -> bool | None:
    return {"ON": True, "OFF": False}.get(value or "")


def _int(value: str | None, pattern: str = r"(\d+)") -> int | None:
    m = re.fullmatch(pattern, value or "")
    return int(m[1]) if m else None


def _addresses(run: _Run, end: str) -> tuple[QpAddress, ...]:
    out = []
    for kind, d in run.addrs:
        if kind == end:
            lid, qpn, psn, rkey, vaddr = (d[k] for k in ("lid", "qpn", "psn", "rkey", "vaddr"))
            try:
                out.append(
                    QpAddress(
                        lid=int(lid or "", 16),
                        qpn=int(qpn or "", 16),
                        psn=int(psn or "", 16),
                        rkey=None if rkey is None else int(rkey, 16),
                        vaddr=None if vaddr is None else int(vaddr, 16),
                        gid=d.get("gid"),
                    )
                )
            except ValueError as exc:
                raise ParseError(TOOL, f"bad {end} address field: {exc}") from None
    return tuple(out)


def _result(
    run: _Run, rows: list[tuple[str, ...]], settings: dict[str, str], stray: list[str]
) -> PerftestResult:
    unit = run.units[0]
    peak_measured = not any("BW peak won't be measured" in w for w in run.warnings)
    return PerftestResult(
        test=run.title,
        bidirectional=run.bidir,
        side=None,
        settings=settings,
        device=settings.get("Device"),
        transport_type=settings.get("Transport type"),
        connection_type=settings.get("Connection type"),
        link_type=settings.get("Link type"),
        mtu_bytes=_int(settings.get("Mtu"), r"(\d+)\[B\]"),
        qps=_int(settings.get("Number of qps")),
        gid_index=_int(settings.get("GID index")),
        rdma_cm_qps=_flag(settings.get("rdma_cm QPs")),
        data_exchange=settings.get("Data ex. method"),
        tos=_int(settings.get("TOS")),
        local_qps=None if run.interleaved else _addresses(run, "local"),
        remote_qps=None if run.interleaved else _addresses(run, "remote"),
        bw_unit=unit,
        peak_measured=peak_measured,
        rows=tuple(_row(r, unit, peak_measured) for r in rows),
        warnings=tuple(run.warnings),
        cuda=cuda_preamble(run.cuda),
        interleaved=run.interleaved,
        other_lines=tuple(stray + run.other),
    )


def _finish(run: _Run, stray: list[str]) -> list[tuple[Side, PerftestResult]]:
    """Validate one scanned run and turn it into (side, result) pairs (two when interleaved)."""
    if not run.units:
        raise ParseError(TOOL, f"{run.title!r} header but no '#bytes' result table (truncated?)")
    if run.open_table:
        raise ParseError(TOOL, "result table not closed by a '----' line (truncated?)")
    if len(set(run.units)) > 1 or any(not g for g in run.groups):
        raise ParseError(TOOL, "result table header without rows or with mixed units")
    if run.interleaved:
        # Loopback captures mixing both processes: the server prints only the last row
        # (loopback-all-sizes-interleaved-*), so the longer table is the client's.
        if len(run.groups) != 2:
            raise ParseError(TOOL, f"interleaved capture with {len(run.groups)} tables, expected 2")
        first, second = run.groups
        client, server = (first, second) if len(first) >= len(second) else (second, first)
        # Only the client (or a duplex server) prints TX depth (perftest_parameters.c,
        # ctx_print_test_info), so the pooled header's TX depth is the client's.
        srv_settings = {k: v for k, v in run.settings.items() if run.bidir or k != "TX depth"}
        return [
            ("client", _result(run, client, dict(run.settings), stray)),
            ("server", _result(run, server, srv_settings, stray)),
        ]
    if len(run.groups) != 1:
        raise ParseError(TOOL, f"{len(run.groups)} result tables in one run")
    # Servers print the `Waiting for client` banner; without it, a missing TX depth line still
    # marks a (non-duplex) server, see ctx_print_test_info above.
    side: Side = "server" if run.server_marked or "TX depth" not in run.settings else "client"
    return [(side, _result(run, run.groups[0], dict(run.settings), stray))]


def parse_ib_write_bw(text: str, side: Side | None = None) -> PerftestResult | PerftestFailure:
    """Parse one ib_write_bw capture; `side` picks one half of a client+server loopback capture.

    >>> parse_ib_write_bw(server_out, side="server").rows[0].size_bytes
    8388608
    """
    lines = clean_lines(text)
    nonblank = [line.strip() for line in lines if line.strip()]
    if not nonblank:
        raise ParseError(TOOL, "empty output")
    warnings = [line for line in nonblank if any(p.match(line) for p in _WARNING_RES)]
    failure = find_failure(nonblank, warnings)
    if failure is not None:
        return failure
    runs, stray = _scan(lines)
    if not runs:
        first = stray[0] if stray else nonblank[0]
        raise ParseError(TOOL, f"no '... BW Test' header; first unrecognised line: {first[:80]!r}")
    found: list[tuple[Side, PerftestResult]] = []
    for run in runs:
        found.extend(_finish(run, stray))
    if side is None and len(found) > 1:
        raise ParseError(TOOL, "capture holds both client and server output; pass side=")
    chosen = [(s, r) for s, r in found if side in (None, s)]
    if len(chosen) != 1:
        sides = ", ".join(s for s, _ in found)
        raise ParseError(TOOL, f"expected one {side} run, capture holds: {sides}")
    got_side, result = chosen[0]
    return replace(result, side=got_side)

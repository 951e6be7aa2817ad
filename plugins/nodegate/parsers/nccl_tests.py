"""Parser for nccl-tests `all_reduce_perf` output (NCCL_DEBUG lines are read by `nccl_debug`).

Example: ``parse_all_reduce_perf(out).avg_busbw_gbytes_s`` -> ``70.742`` for a 2-node H100 run.
A run that failed (CUDA/NCCL error, NCCL WARN, wrong values) is an `NcclTestsFailure`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

TOOL = "all_reduce_perf"

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

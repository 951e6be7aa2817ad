"""Parser for nccl-tests `*_perf` output (NCCL_DEBUG lines are read by `nccl_debug`).

Example: ``parse_all_reduce_perf(out).avg_busbw_gbytes_s`` -> ``70.742`` for a 2-node H100 run;
``parse_nccl_perf(out, "alltoall")`` for another collective's binary.
A run that failed (CUDA/NCCL error, NCCL WARN, wrong values) is an `NcclTestsFailure`.

Each parse knows its collective and refuses another's table (a ParseError naming both). What a
table says of its collective, from NVIDIA/nccl-tests src/ (v2.19.6, a0b82b2):
- `# Collective test starting: <argv[0]'s basename>` (util.cu writeDeviceReport, since 2025-06);
- the redop column: `TimeTest(..., "none", -1)` in all_gather.cu and alltoall.cu (before
  d313d20, 2022-09: `""`, a column left empty: alltoall_perf__*-redop-column-empty-*), an
  operation (`sum`, ...) in all_reduce.cu and reduce_scatter.cu;
- the count column against the size (common.cu TimeTest: size = max(sendBytes, expectedBytes),
  count = paramCount): all_reduce's paramCount is the whole buffer, all_gather's,
  reduce_scatter's and alltoall's one rank's share (`GetCollByteCount`: count / nranks), so
  with more than one rank size / (count x type size) is 1 or the number of ranks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

TOOL = "all_reduce_perf"
# collective -> (the nccl-tests binary, does it reduce: an operation in its redop column)
COLLECTIVES: dict[str, tuple[str, bool]] = {
    "all_reduce": ("all_reduce_perf", True),
    "all_gather": ("all_gather_perf", False),
    "reduce_scatter": ("reduce_scatter_perf", True),
    "alltoall": ("alltoall_perf", False),
}
# Whole-buffer collectives: the count column is the whole size (see the module's docstring).
_WHOLE_BUFFER = frozenset({"all_reduce"})
_REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum"})  # common.cu test_opnames
_TYPE_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "int32": 4, "uint32": 4, "int": 4, "int64": 8,
    "uint64": 8, "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip
# `# Collective test starting: all_gather_perf` (a packaged build may add `_mpi`).
_STARTING_RE = re.compile(r"^# Collective test starting: (?:\S*/)?(?P<prog>\S+)$")
_PROG_RE = re.compile(r"^(?P<coll>[a-z_]+?)_perf(?:_|$)")

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
# `# NCCL Tests compiled with NCCL 1.0` (nccl1-era), `# NCCL version 2.x` and NCCL's own line
# `NCCL version 2.26.2+cuda12.2` (init.cc VERSION_STRING: printed plain at NCCL_DEBUG=VERSION,
# after `host:pid:tid [dev] NCCL INFO` at INFO): the `+cudaA.B` suffix is the CUDA it was built
# with, not part of NCCL's version.
_VERSION_RE = re.compile(
    r"NCCL(?: Tests compiled with NCCL| version) (?P<v>\d+(?:\.\d+)*(?:[a-z]\w*)?)(?:\+cuda\S+)?"
)
# Newer releases (src/util.cu writeDeviceReport): `# nccl-tests version 2.19.6
# nccl-headers=22807 nccl-library=22807`, builds from git with the hash after the version
# (`# nccl-tests version 2.20.0 (abc1234) nccl-library=22807`); NCCL_VERSION_CODE is
# major*10000 + minor*100 + patch.
_TESTS_VERSION_RE = re.compile(r"^# nccl-tests version (?P<tests>\S+)(?P<rest>.*)$")
_CODE_RE = re.compile(r"\bnccl-(?P<what>headers|library)=(?P<code>\d+)\b")
# Rank tags launchers put before each line: Open MPI 4 `--tag-output` `[1,0]<stdout>:`
# (orte iof: `[jobid,rank]<stream>:`), PRRTE in Open MPI 5 adds a space, `[0]<stdout>:` with
# the job id left out, and MPICH/Intel MPI hydra's `-prepend-rank` / `-l` `[0] `.
_TAG_RE = re.compile(r"^\[\d+(?:,\d+)?\](?:<(?:stdout|stderr|stddiag)>:|(?= ))\s?")
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
    """A completed nccl-tests run of `collective`; independent_runs > 1 means a non-MPI build
    under mpirun."""

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
    collective: str = "all_reduce"


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


def wrong_counts(rows: Sequence[NcclRow], limit: int = 3) -> list[str]:
    """`1048576 B: #wrong 262 out-of-place, 262 in-place` for the first rows with wrong data
    (`#wrong` > 0, or an `error` column of an older build)."""
    out = []
    for r in rows:
        parts = [
            f"#wrong {t.wrong} {half}" if t.wrong else f"error {t.error} {half}"
            for t, half in ((r.out_of_place, "out-of-place"), (r.in_place, "in-place"))
            if (t.wrong or 0) > 0 or t.error is not None
        ]
        if parts:
            out.append(f"{r.size_bytes} B: {', '.join(parts)}")
    return out[:limit]


def _failure(
    lines: list[str], rows: Sequence[NcclRow], oob_failed: str | None
) -> NcclTestsFailure | None:
    found: list[tuple[str, str]] = []
    for line in lines:
        for kind, pattern in _FAILURES:
            if pattern.search(line):
                if line not in (m for _, m in found):
                    found.append((kind, line))
                break
    if oob_failed is not None:
        wrong = wrong_counts(rows)
        found.insert(0, ("wrong_values", oob_failed + (f" ({'; '.join(wrong)})" if wrong else "")))
    if not found:
        return None
    hosts = sorted({m["host"] for _, line in found if (m := _FAIL_HOST_RE.match(line))})
    return NcclTestsFailure(
        found[0][0], found[0][1], tuple(m for _, m in found), tuple(hosts), len(rows)
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
    """A table row laid out as `columns` says, or None when the line is not one. A row one
    token short of a header with `redop` is an older all_gather/alltoall's (an empty redop)."""
    tokens = line.split()
    if len(tokens) == len(columns) - 1 and "redop" in columns[:-8]:
        columns = tuple(c for c in columns if c != "redop")
    if len(tokens) != len(columns) or len(columns) < 10:
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


def collective_of_program(prog: str) -> str | None:
    """`all_gather_perf` (or `all_gather_perf_mpi`) -> `all_gather`; None for no known one."""
    m = _PROG_RE.match(prog)
    return m["coll"] if m and m["coll"] in COLLECTIVES else None


def _refuse_other(
    collective: str, started: str | None, rows: Sequence[NcclRow], nranks: int, short: int
) -> None:
    """ParseError when the table is another collective's (see the module's docstring)."""
    binary, reduces = COLLECTIVES[collective]
    if started is not None and collective_of_program(started) != collective:
        raise ParseError(
            binary, f"the table is {started}'s ('# Collective test starting: {started}'), "
            f"read as {binary}'s"
        )  # fmt: skip
    ops = {r.redop for r in rows if r.redop is not None}
    if reduces and (short or ops & {"none", ""}):
        raise ParseError(
            binary, f"the table's redop column is {'empty' if short else 'none'} (a collective "
            f"without reduction: all_gather_perf or alltoall_perf), read as {binary}'s"
        )  # fmt: skip
    if not reduces and ops & _REDOPS:
        raise ParseError(
            binary, f"the table reduces (redop {sorted(ops & _REDOPS)[0]}: all_reduce_perf or "
            f"reduce_scatter_perf), read as {binary}'s"
        )  # fmt: skip
    row = next((r for r in rows if r.count > 0 and r.dtype in _TYPE_BYTES), None)
    if row is None or nranks < 2:
        return
    ratio = row.size_bytes / (row.count * _TYPE_BYTES[row.dtype])
    whole = abs(ratio - 1) < 0.5
    if whole != (collective in _WHOLE_BUFFER):
        shape = (
            "the whole buffer (all_reduce_perf's)" if whole
            else f"one rank's share of {nranks} (all_gather, reduce_scatter or alltoall)"
        )  # fmt: skip
        raise ParseError(
            binary, f"the count column is {shape}: {row.size_bytes} B as {row.count} "
            f"{row.dtype}, read as {binary}'s"
        )  # fmt: skip


def parse_all_reduce_perf(text: str) -> NcclTestsResult | NcclTestsFailure:
    """Parse one all_reduce_perf capture (stdout of every rank as the launcher merged it)."""
    return parse_nccl_perf(text, "all_reduce")


def parse_nccl_perf(text: str, collective: str) -> NcclTestsResult | NcclTestsFailure:
    """Parse one capture of `collective`'s nccl-tests binary (`all_reduce`, `all_gather`,
    `reduce_scatter`, `alltoall`); another collective's table is a ParseError naming both."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    tool = COLLECTIVES[collective][0]
    nonblank = [line for line in untagged_lines(text) if line]
    if not nonblank:
        raise ParseError(tool, "empty output")
    headers: list[NcclTestsHeader] = []
    ranks: list[NcclRank] = []
    columns: tuple[str, ...] = ()
    rows: list[NcclRow] = []
    other: list[str] = []
    version = tests_version = started = None
    oob: int | None = None
    oob_failed = None
    avg: float | None = None
    short = 0  # rows one token short of their header: an empty redop column
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
            short += len(line.split()) < len(columns or _CURRENT_COLUMNS)
        elif line.startswith("#"):
            if m := _STARTING_RE.match(line):
                started = m["prog"]
            elif m := _TESTS_VERSION_RE.match(line):
                tests_version = m["tests"]
                codes = {c["what"]: c["code"] for c in _CODE_RE.finditer(m["rest"])}
                code = codes.get("library") or codes.get("headers")
                version = nccl_version_of_code(int(code)) if code else version
            elif m := _VERSION_RE.search(line):
                version = m["v"]
            # Remaining '#' lines are the banner's frame (`#`, `# Using devices`, units row).
        else:
            if version is None and (m := _VERSION_RE.search(line)):
                version = m["v"]  # NCCL's own `NCCL version 2.26.2+cuda12.2` (plain or INFO)
            other.append(line)
    failure = _failure(nonblank, rows, oob_failed)
    if failure is not None:
        return failure
    if not headers:
        raise ParseError(tool, f"no '# nThread ... nGpus' header; first line: {nonblank[0][:80]!r}")
    # A non-MPI build under mpirun: every process prints its own header and numbers its ranks
    # from 0 (non-mpi-build-under-mpirun-*); the excerpt is cut, but this alone rejects the run.
    rank_uses = max((sum(r.rank == n.rank for r in ranks) for n in ranks), default=1)
    independent = max(len(headers), rank_uses)
    _refuse_other(collective, started, rows, len(ranks) if independent == 1 else 0, short)
    if independent == 1:
        if not columns or not rows:
            raise ParseError(tool, "no result rows under the column header (truncated?)")
        if avg is None:
            raise ParseError(tool, "no '# Avg bus bandwidth' footer (truncated?)")
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
        collective=collective,
    )

"""all_reduce_perf (nccl-tests) and NCCL_DEBUG parsers: corpus captures, quirks, broken input."""

from __future__ import annotations

from typing import Any

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.nccl_debug import parse_nccl_debug
from nodegate.parsers.nccl_tests import (
    NcclTestsFailure,
    NcclTestsResult,
    parse_all_reduce_perf,
    parse_nccl_perf,
)

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

ARP = sorted(p.name for p in (CORPUS / "net").glob("all_reduce_perf__*"))
A2A = (
    "alltoall_perf__a100-sxm4-40gb-8gpu-single-node-g8-old-format-redop-column-empty-superbench.txt"
)
ROCE = "nccl_info__roce-cx7-2node-8rank-nccl2.26.2-4hca-gdr-enabled-torchrun-gpt2-full-stdout.txt"
DEBUG = sorted(p.name for p in (CORPUS / "net").glob("nccl_*"))
OLD = "all_reduce_perf__a100-40gb-8gpu-single-node-old-format-superbench.txt"
SSH = "all_reduce_perf__a100-sxm4-40gb-2node-16gpu-oci-roce-mpirun-ssh-warning-line.txt"
G8 = "all_reduce_perf__a100-sxm4-40gb-8gpu-single-node-g8-oci-newer-format.txt"
H100 = "all_reduce_perf__h100-gcp-a3mega-2node-16gpu.txt"
MULTI = "all_reduce_perf__multinode-16G-size-unhandled-cuda-error-excerpt.txt"
NCCL1 = "all_reduce_perf__nccl1-era-p100-8gpu-unhandled-cuda-error.txt"
NONMPI = "all_reduce_perf__non-mpi-build-under-mpirun-duplicate-headers-excerpt.txt"
INFO = "nccl_info__net-ib-using-sharp-ibext-h100-2node-excerpt.txt"
WARN21 = "nccl_warn__net-ib-completion-error4-vendor81-ib-h100-2.1x-format.txt"
WARNPLUGIN = "nccl_warn__net-ib-ib-plugin-status12-ipv6-gid.txt"


def _ok(name: str) -> NcclTestsResult:
    out = parse_all_reduce_perf(corpus_text(f"net/{name}"))
    assert isinstance(out, NcclTestsResult)
    return out


def _fail(name: str) -> NcclTestsFailure:
    out = parse_all_reduce_perf(corpus_text(f"net/{name}"))
    assert isinstance(out, NcclTestsFailure)
    return out


@pytest.mark.parametrize("name", ARP)
def test_all_reduce_perf_corpus_expected(name: str) -> None:
    check_expected("all_reduce_perf", name, parse_all_reduce_perf(corpus_text(f"net/{name}")))


@pytest.mark.parametrize("name", DEBUG)
def test_nccl_debug_corpus_expected(name: str) -> None:
    check_expected("nccl_debug", name, parse_nccl_debug(corpus_text(f"net/{name}")))


def test_corpus_counts() -> None:
    assert (len(ARP), len(DEBUG)) == (7, 4)


def test_old_layout_redop_without_root_and_error_na() -> None:
    res = _ok(OLD)
    assert res.columns[3:5] == ("redop", "time") and "root" not in res.columns
    assert res.header.agg_iters is None and res.header.validation == 0
    row = res.rows[-1]
    assert (row.size_bytes, row.redop, row.root) == (8589934592, "sum", None)
    assert (row.out_of_place.busbw_gbytes_s, row.out_of_place.error) == (235.26, None)
    assert row.out_of_place.wrong is None
    assert [r.size_bytes for r in res.rows[:2]] == [0, 0]  # minBytes 1 prints two 0-byte rows
    assert res.other_lines == ("hostname:3442:3442 [0] NCCL INFO Launch mode Parallel",)
    assert res.ranks[0].group is None and res.ranks[0].pid == 112424
    assert res.avg_busbw_gbytes_s == 68.4048


def test_new_layout_root_wrong_and_trailing_space_footer() -> None:
    res = _ok(G8)
    assert res.header.graph == 0 and res.header.agg_iters == 1
    row = res.rows[0]
    assert (row.root, row.out_of_place.wrong, row.in_place.wrong) == (-1, 0, 0)
    assert res.avg_busbw_gbytes_s == 81.112 and res.out_of_bounds == 0
    assert res.hosts == ("inst-ks8ls-comp",) and len(res.ranks) == 8
    assert max(r.in_place.busbw_gbytes_s for r in res.rows) == 235.21


def test_two_node_mpirun_with_ssh_warning_line() -> None:
    res = _ok(SSH)
    assert res.other_lines[0].startswith("Warning: Permanently added")
    assert res.hosts == ("inst-6ejzf-comp", "inst-ks8ls-comp") and res.independent_runs == 1
    assert [r.rank for r in res.ranks] == list(range(16))
    dip = next(r for r in res.rows if r.size_bytes == 67108864)
    assert dip.out_of_place.busbw_gbytes_s == 20.77


def test_h100_bus_ids_in_domain_form() -> None:
    res = _ok(H100)
    assert (
        res.ranks[0].bus_id == "0000:04:00" and res.ranks[0].device_name == "NVIDIA H100 80GB HBM3"
    )
    assert res.rows[-1].in_place.busbw_gbytes_s == 337.35


def test_non_mpi_build_is_two_independent_runs() -> None:
    res = _ok(NONMPI)
    assert res.independent_runs == 2
    assert res.hosts == ("testgpu1", "testgpu2") and res.rows == ()


def test_unhandled_cuda_error_excerpt_is_a_failure_with_hosts() -> None:
    fail = _fail(MULTI)
    assert fail.kind == "nccl_error" and fail.rows_completed == 5
    assert fail.hosts == ("HCA-107", "HCA-108", "HCA-128")
    assert fail.message == (
        "HCA-128: Test NCCL failure common.cu:1204 "
        "'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '"
    )


def test_nccl1_era_failure_before_any_row() -> None:
    fail = _fail(NCCL1)
    assert (fail.kind, fail.rows_completed) == ("nccl_error", 0)
    assert fail.messages == ("NCCL failure all_reduce.cu:95 'unhandled cuda error'",)


def test_nccl_warn_in_output_is_a_failure() -> None:
    fail = _fail(WARN21)
    assert fail.kind == "nccl_warn" and "vendor err 81" in fail.message


def test_out_of_bounds_failed_is_a_failure() -> None:
    text = corpus_text(f"net/{G8}").replace("values : 0 OK", "values : 3 FAILED")
    fail = parse_all_reduce_perf(text)
    assert isinstance(fail, NcclTestsFailure) and fail.kind == "wrong_values"
    assert fail.message == "# Out of bounds values : 3 FAILED"  # no row says where


def test_out_of_bounds_reason_names_the_wrong_counts() -> None:
    row = "     1048576        262144     float     sum      -1    76.71   13.67   23.92      0"
    text = corpus_text(f"net/{G8}").replace("values : 0 OK", "values : 5 FAILED")
    text = text.replace(row + "    77.73", row[:-1] + "2    77.73").replace(
        "23.61      0", "23.61      3"
    )
    fail = parse_all_reduce_perf(text)
    assert isinstance(fail, NcclTestsFailure) and fail.kind == "wrong_values"
    assert fail.message == (
        "# Out of bounds values : 5 FAILED (1048576 B: #wrong 2 out-of-place, #wrong 3 in-place)"
    )


def test_crlf_is_tolerated() -> None:
    assert parse_all_reduce_perf(corpus_text(f"net/{H100}").replace("\n", "\r\n")) == _ok(H100)


def _garbage() -> list[str]:
    return ["", " \n\n", "hello world\nnot a benchmark\n", "\x00\xff\x10junk\x7f\n" * 4]


@pytest.mark.parametrize("text", _garbage(), ids=["empty", "blank", "text", "binary"])
def test_all_reduce_perf_garbage_raises(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_all_reduce_perf(text)
    assert exc.value.tool == "all_reduce_perf"


@pytest.mark.parametrize("name", [OLD, SSH, G8, H100])
def test_all_reduce_perf_truncated_raises(name: str) -> None:
    text = corpus_text(f"net/{name}")
    with pytest.raises(ParseError, match="truncated"):
        parse_all_reduce_perf(text[: int(len(text) * 0.4)])


def test_all_reduce_perf_cut_before_footer_raises() -> None:
    text = corpus_text(f"net/{H100}")
    with pytest.raises(ParseError, match="Avg bus bandwidth"):
        parse_all_reduce_perf(text[: text.index("# Out of bounds")])


@pytest.mark.parametrize(
    "other",
    [
        "net/ib_write_bw__roce-cx7-rdmacm-tos41-all-sizes-gbits-1qp-client.txt",
        "net/ibstat__h100-cx7-ndr400-ib-cx6dx-ports-down.txt",
    ],
)
def test_other_tools_output_raises(other: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_all_reduce_perf(corpus_text(other))
    assert exc.value.tool == "all_reduce_perf"
    with pytest.raises(ParseError) as exc:
        parse_nccl_debug(corpus_text(other))
    assert exc.value.tool == "nccl_debug"


def test_nccl_info_sharp_ibext_devices() -> None:
    facts = parse_nccl_debug(corpus_text(f"net/{INFO}"))
    assert facts.network == "IBext" and facts.sharp is True and facts.relaxed_ordering is True
    assert [d.name for d in facts.ib_devices] == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"]
    assert (facts.oob_interface, facts.nranks, facts.warnings) == ("ibp25s0", 16, ())


def test_nccl_warn_both_completion_spellings() -> None:
    old = parse_nccl_debug(corpus_text(f"net/{WARN21}")).ib_completion_errors
    new = parse_nccl_debug(corpus_text(f"net/{WARNPLUGIN}")).ib_completion_errors
    assert [(e.host, e.status, e.vendor_err, e.direction) for e in old] == [
        ("H100-2", 4, 81, "Send"),
        ("H100-1", 4, 81, "Send"),
    ]
    assert old[0].peer == "fe80::966d:ae03:8b:df78%ib0" and old[0].local_gid is None
    assert [(e.status, e.opcode, e.direction) for e in new] == [
        (12, 0, "Recv"),
        (12, 32616, "Recv"),
    ]
    assert new[0].remote_gid == "fd00:1148:9000:5000:4:200:3:ff1f"


@pytest.mark.parametrize("text", _garbage(), ids=["empty", "blank", "text", "binary"])
def test_nccl_debug_garbage_raises(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_nccl_debug(text)
    assert exc.value.tool == "nccl_debug"


def test_nccl_debug_truncated_device_line_raises() -> None:
    text = corpus_text(f"net/{INFO}")
    with pytest.raises(ParseError, match="cut short"):
        parse_nccl_debug(text[: text.index("[2]mlx5_4")])


def test_nccl_debug_truncated_excerpt_keeps_only_what_it_saw() -> None:
    # Line logs have no end marker: a cut between lines yields the facts of the lines kept.
    text: Any = corpus_text(f"net/{INFO}")
    facts = parse_nccl_debug(text[: text.index("qh100-gpu19")])
    assert facts.nranks is None and facts.hosts == ("qh100-gpu20",)


def test_nccl_debug_gdr_and_roce_devices() -> None:
    text = (
        "n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_3:1/RoCE"
        " ; OOB eth0:10.0.0.1<0>\n"
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
    )
    facts = parse_nccl_debug(text)
    assert [(d.name, d.link, d.sharp) for d in facts.ib_devices] == [
        ("mlx5_0", "RoCE", False),
        ("mlx5_3", "RoCE", False),
    ]
    assert (facts.gdr, facts.sharp, facts.relaxed_ordering) == (True, False, False)


# -- shapes across NCCL / nccl-tests / Open MPI releases ----------------------------------
# Written from the format strings of the programs that print them (no capture in the corpus):
# NVIDIA/nccl src/transport/net_ib.cc (v2.23.4-1 .. v2.28.3-1), net_ib/p2p.cc (v2.28.7-1 and
# master 2026: `ncclIbLogCompletionWithError`), net_ib/gin.cc (master); NVIDIA/nccl-tests
# src/util.cu `writeDeviceReport` (v2.19.6); Open MPI 4.1 `--tag-output` (orte iof
# `[jobid,rank]<stdout>:` before each line).
COMPLETION_SHAPES = {
    "2.23-2.28.3": (
        "gpu7:146600:146782 [5] transport/net_ib.cc:2244 NCCL WARN NET/IB: Got completion from "
        "peer 10.46.70.21<50854> with status=5 opcode=31245 len=0 vendor err 249 (Recv) "
        "localGid fe80::9e63:c0ff:feab:b8da remoteGidsfe80::9e63:c0ff:feab:b9ca hca mlx5_9",
        ("10.46.70.21", 5, 31245, 0, 249, "Recv", "fe80::9e63:c0ff:feab:b8da", "mlx5_9"),
    ),
    "2.23-ib-no-gid": (
        "gpu7:146600:146782 [5] transport/net_ib.cc:2244 NCCL WARN NET/IB: Got completion from "
        "peer 10.46.70.21<50854> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_3",
        ("10.46.70.21", 12, 0, 0, 129, "Send", None, "mlx5_3"),
    ),
    "2.28.7": (
        "gpu7:1:2 [0] transport/net_ib/p2p.cc:701 NCCL WARN NET/IB: Got completion from peer "
        "10.11.2.169<50673> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) "
        "reqSize=262144 vendor_err=129 req_type=Send hca mlx5_5",
        ("10.11.2.169", 12, 0, 262144, 129, "Send", None, "mlx5_5"),
    ),
    "master-roce": (
        "gpu7:1:2 [0] transport/net_ib/p2p.cc:688 NCCL WARN NET/IB: Got completion from peer "
        "10.0.0.2<43211> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV(128) "
        "vendor_err=129  localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_2",
        ("10.0.0.2", 12, 128, None, 129, None, "::ffff:10.0.0.1", "mlx5_2"),
    ),
    "gin": (
        "gpu7:1:2 [0] transport/net_ib/gin.cc:749 NCCL WARN NET/IB/GIN: Got completion from "
        "peer 10.0.0.9<1> with status=10 opcode=1 len=8 vendor err 136 (Send) hca mlx5_1",
        ("10.0.0.9", 10, 1, 8, 136, "Send", None, "mlx5_1"),
    ),
}


@pytest.mark.parametrize("shape", sorted(COMPLETION_SHAPES))
def test_ib_completion_error_in_every_release_wording(shape: str) -> None:
    line, want = COMPLETION_SHAPES[shape]
    (e,) = parse_nccl_debug(line + "\n").ib_completion_errors
    got = (e.peer, e.status, e.opcode, e.length, e.vendor_err, e.direction, e.local_gid, e.hca)
    assert (e.host, got) == ("gpu7", want)


def test_mpirun_tag_output_prefixes_are_read() -> None:
    info = "gpu1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:1.2.3.4<0>\n"
    plain = corpus_text(f"net/{G8}") + info
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in corpus_text(f"net/{G8}").splitlines())
    tagged += "[1,0]<stderr>: " + info  # PRRTE (Open MPI 5) writes a space after the tag
    assert parse_all_reduce_perf(tagged) == parse_all_reduce_perf(plain)
    assert [d.name for d in parse_nccl_debug(tagged).ib_devices] == ["mlx5_0"]


# Not a capture: the layout `writeDeviceReport` and the footer of nccl-tests 2.19.6 print
# (tests/fixtures/formats/README.md).
NEW_HEADER = (
    CORPUS.parent
    / "formats"
    / "all_reduce_perf__nccl-tests-2.19.6-nccl2.28.7-1gpu-written-from-util-cu.txt"
).read_text()


def test_newest_nccl_tests_header_gives_both_versions() -> None:
    got = parse_all_reduce_perf(NEW_HEADER)
    assert isinstance(got, NcclTestsResult)
    assert (got.nccl_version, got.nccl_tests_version) == ("2.28.7", "2.19.6")
    assert (got.header.ngpus, got.avg_busbw_gbytes_s, got.rows[0].in_place.algbw_gbytes_s) == (
        1,
        0.0,
        327.35,
    )


def test_avg_bus_bandwidth_check_failed_is_a_failure() -> None:
    text = NEW_HEADER.replace("# Avg bus bandwidth    : 0 ", "# Avg bus bandwidth    : 12.5 FAILED")
    got = parse_all_reduce_perf(text)
    assert isinstance(got, NcclTestsFailure) and "Avg bus bandwidth" in got.message


# -- each parser knows its collective ---------------------------------------------------------


def test_alltoall_with_an_empty_redop_column_is_read_as_alltoall() -> None:
    got = parse_nccl_perf(corpus_text(f"net/{A2A}"), "alltoall")
    assert isinstance(got, NcclTestsResult) and got.collective == "alltoall"
    assert len(got.rows) == 34 and got.avg_busbw_gbytes_s == 58.6481
    last = got.rows[-1]
    assert (last.size_bytes, last.count, last.redop, last.root) == (
        8589934592,
        268435456,
        None,
        None,
    )
    assert (last.out_of_place.busbw_gbytes_s, last.in_place.busbw_gbytes_s) == (224.31, 226.16)


REFUSED = {
    "alltoall-as-all_reduce": (
        A2A, "all_reduce",
        "all_reduce_perf: the table's redop column is empty (a collective without reduction: "
        "all_gather_perf or alltoall_perf), read as all_reduce_perf's",
    ),
    "all_reduce-as-all_gather": (
        H100, "all_gather",
        "all_gather_perf: the table reduces (redop sum: all_reduce_perf or "
        "reduce_scatter_perf), read as all_gather_perf's",
    ),
    # both reduce (redop sum): the count column tells the whole buffer from one rank's share
    "all_reduce-as-reduce_scatter": (
        H100, "reduce_scatter",
        "reduce_scatter_perf: the count column is the whole buffer (all_reduce_perf's): "
        "8 B as 2 float, read as reduce_scatter_perf's",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_another_collective_s_table_is_refused_naming_both(case: str) -> None:
    name, collective, message = REFUSED[case]
    with pytest.raises(ParseError) as exc:
        parse_nccl_perf(corpus_text(f"net/{name}"), collective)
    assert (exc.value.tool, str(exc.value)) == (f"{collective}_perf", message)


def test_none_redop_read_as_all_reduce_is_refused() -> None:
    text = NEW_HEADER.replace("# Collective test starting: all_reduce_perf\n", "").replace(
        "float     sum", "float    none"
    )
    with pytest.raises(ParseError, match="redop column is none"):
        parse_all_reduce_perf(text)


@pytest.mark.parametrize("prog", ["all_gather_perf", "alltoall_perf_mpi"])
def test_collective_test_starting_line_names_another_collective(prog: str) -> None:
    text = NEW_HEADER.replace("starting: all_reduce_perf", f"starting: {prog}")
    with pytest.raises(ParseError) as exc:
        parse_all_reduce_perf(text)
    assert str(exc.value) == (
        f"all_reduce_perf: the table is {prog}'s ('# Collective test starting: {prog}'), "
        "read as all_reduce_perf's"
    )


def test_collective_test_starting_line_of_the_same_collective() -> None:
    text = NEW_HEADER.replace("starting: all_reduce_perf", "starting: all_reduce_perf_mpi")
    assert isinstance(parse_all_reduce_perf(text), NcclTestsResult)


# -- rank tags and versions -----------------------------------------------------------------


@pytest.mark.parametrize("tag", ["[0] ", "[0]<stdout>:", "[1,0]<stdout>:", "[1,12]<stderr>: "])
def test_every_rank_tag_shape_is_stripped(tag: str) -> None:
    plain = corpus_text(f"net/{G8}")
    tagged = "".join(f"{tag}{line}\n" for line in plain.splitlines())
    assert parse_all_reduce_perf(tagged) == parse_all_reduce_perf(plain)


def test_plain_nccl_version_line_gives_the_version() -> None:
    for line in (
        "NCCL version 2.26.2+cuda12.2",
        "MOC-R4PCC04U05:365593:365593 [0] NCCL INFO NCCL version 2.26.2+cuda12.2",
    ):
        got = parse_all_reduce_perf(line + "\n" + corpus_text(f"net/{G8}"))
        assert isinstance(got, NcclTestsResult) and got.nccl_version == "2.26.2"


def test_nccl_tests_version_with_a_git_hash() -> None:
    text = NEW_HEADER.replace(
        "# nccl-tests version 2.19.6 nccl-headers=22807 nccl-library=22807",
        "# nccl-tests version 2.20.0 (3b4c7de) nccl-library=22903",
    )
    got = parse_all_reduce_perf(text)
    assert isinstance(got, NcclTestsResult)
    assert (got.nccl_version, got.nccl_tests_version) == ("2.29.3", "2.20.0")


# -- what NCCL chose, per host ----------------------------------------------------------------


def test_roce_capture_per_host_transport() -> None:
    facts = parse_nccl_debug(corpus_text(f"net/{ROCE}"))
    assert facts.nccl_version == "2.26.2"
    (h,) = facts.per_host
    assert (h.host, h.nccl_version, h.networks, h.ib_no_device, h.socket_devices) == (
        "MOC-R4PCC04U05", "2.26.2", ("IB",), False, (),
    )  # fmt: skip
    assert [(d.name, d.link) for d in h.ib_devices] == [
        ("mlx5_2", "RoCE"), ("mlx5_3", "RoCE"), ("mlx5_4", "RoCE"), ("mlx5_5", "RoCE"),
    ]  # fmt: skip
    assert h.gdr_hcas == (("mlx5_2", True), ("mlx5_3", True), ("mlx5_4", True), ("mlx5_5", True))
    assert (h.channel_nets, h.net_channels, h.gdr_channels, h.rings_gdr, h.gdr) == (
        ("IB",), 64, 64, True, True,
    )  # fmt: skip
    # 16 "collnet channels" is nChannels printed twice (init.cc): no CollNet without its lines
    assert (h.nvls_support, h.coll_channels, h.nvls_channels, h.collnet, h.sharp) == (
        False, 16, 0, False, False,
    )  # fmt: skip
    assert len(h.lines) == 16 and h.lines[0].endswith("NCCL INFO NCCL version 2.26.2+cuda12.2")


def test_sharp_devices_per_host() -> None:
    facts = parse_nccl_debug(corpus_text(f"net/{INFO}"))
    assert [(h.host, h.networks, h.sharp, h.gdr) for h in facts.per_host] == [
        ("qh100-gpu19", (), False, None),
        ("qh100-gpu20", ("IBext",), True, None),
    ]


SOCKET_GDR = (
    CORPUS.parent
    / "formats"
    / "nccl_info__socket-fallback-gpu001-gdr-off-gpu002-nccl2.28-written-from-nccl-source.txt"
).read_text()


def test_socket_fallback_and_gdr_off_per_host() -> None:
    sock, ib = parse_nccl_debug(SOCKET_GDR).per_host
    assert (sock.host, sock.networks, sock.ib_no_device, sock.socket_devices) == (
        "gpu001", ("Socket",), True, ("eth0",),
    )  # fmt: skip
    assert (sock.channel_nets, sock.net_channels, sock.gdr, sock.nvls_support) == (
        ("Socket",), 2, False, True,
    )  # fmt: skip
    assert (ib.host, ib.networks, [d.name for d in ib.ib_devices]) == (
        "gpu002", ("IB",), ["mlx5_0", "mlx5_1"],
    )  # fmt: skip
    assert (ib.gdr_hcas, ib.net_channels, ib.gdr_channels, ib.rings_gdr, ib.gdr) == (
        (("mlx5_0", False), ("mlx5_1", False)), 2, 0, False, False,
    )  # fmt: skip


def test_newer_ib_device_line_with_a_rail_id() -> None:
    line = (
        "n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1:0/IB [1]mlx5_1:1:1/IB [RO]; "
        "OOB ib0:10.0.0.1<0>\n"
    )
    (h,) = parse_nccl_debug(line).per_host
    assert [(d.name, d.port, d.link) for d in h.ib_devices] == [
        ("mlx5_0", 1, "IB"), ("mlx5_1", 1, "IB"),
    ]  # fmt: skip


def test_channels_without_gdr_on_one_connection_mean_gdr_off() -> None:
    text = (
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0/GDRDMA\n"
        "n1:1:2 [1] NCCL INFO Channel 01/0 : 1[1] -> 3[1] [send] via NET/IB/1\n"
        "n1:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n"
    )
    (h,) = parse_nccl_debug(text).per_host
    assert (h.net_channels, h.gdr_channels, h.rings_gdr, h.gdr) == (2, 1, True, False)

"""ib_write_bw (perftest) parser: every corpus capture, its quirks, failures and broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.perftest import PerftestResult, parse_ib_write_bw
from nodegate.parsers.perftest_failure import PerftestFailure

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "net").glob("ib_write_bw__*"))
LOOP8M = "ib_write_bw__loopback-8M-fixed-size-client-server-mbsec-superbench.txt"
INTERLEAVED = "ib_write_bw__loopback-all-sizes-interleaved-mbsec-superbench.txt"
BIDIR = "ib_write_bw__roce-cx5-100gbe-bidirectional-D5-gbits-cpu-freq-warning-client.txt"
CUDA_CLT = "ib_write_bw__roce-cx7-h100-use-cuda-dmabuf-8qp-all-sizes-client.txt"
CUDA_SRV = "ib_write_bw__roce-cx7-h100-use-cuda-dmabuf-8qp-all-sizes-server.txt"
CM_CLT = "ib_write_bw__roce-cx7-rdmacm-tos41-all-sizes-gbits-1qp-client.txt"
CM_SRV = "ib_write_bw__roce-cx7-rdmacm-tos41-all-sizes-gbits-1qp-server.txt"
# Captures holding both sides need `side`; the expected file is the client half.
SIDE = {LOOP8M: "client", INTERLEAVED: "client"}


def _parse(name: str, side: str | None = None) -> PerftestResult:
    out = parse_ib_write_bw(corpus_text(f"net/{name}"), side)  # type: ignore[arg-type]
    assert isinstance(out, PerftestResult)
    return out


def _fail(name: str) -> PerftestFailure:
    out = parse_ib_write_bw(corpus_text(f"net/{name}"))
    assert isinstance(out, PerftestFailure)
    return out


@pytest.mark.parametrize("name", FILES)
def test_ib_write_bw_corpus_expected(name: str) -> None:
    text = corpus_text(f"net/{name}")
    check_expected("ib_write_bw", name, parse_ib_write_bw(text, SIDE.get(name)))  # type: ignore[arg-type]


def test_corpus_count() -> None:
    assert len(FILES) == 11


def test_mbsec_is_mebibytes_per_second() -> None:
    row = _parse(LOOP8M, "client").rows[0]
    assert (row.bw_average, row.bw_average_gbps) == (24056.72, round(24056.72 * 1048576 * 8e-9, 6))
    assert _parse(LOOP8M, "client").bw_unit == "MB/sec"


def test_loopback_capture_needs_a_side_and_splits_in_two() -> None:
    with pytest.raises(ParseError, match="pass side="):
        parse_ib_write_bw(corpus_text(f"net/{LOOP8M}"))
    client, server = _parse(LOOP8M, "client"), _parse(LOOP8M, "server")
    assert (client.side, server.side) == ("client", "server")
    assert "TX depth" in client.settings and "TX depth" not in server.settings
    assert client.local_qps == server.remote_qps and client.remote_qps == server.local_qps
    assert client.local_qps is not None and client.local_qps[0].lid == 0xD06


def test_interleaved_loopback_client_table_and_server_last_row() -> None:
    client, server = _parse(INTERLEAVED, "client"), _parse(INTERLEAVED, "server")
    assert client.interleaved and server.interleaved
    assert [r.size_bytes for r in client.rows] == [2**k for k in range(1, 24)]
    assert [r.size_bytes for r in server.rows] == [8388608]
    assert client.local_qps is None and client.qps == 1
    assert client.settings["CQ Moderation"] == "100"


def test_duration_bidirectional_run_has_no_peak_and_a_cpu_warning() -> None:
    res = _parse(BIDIR)
    assert res.bidirectional and res.side == "client" and not res.peak_measured
    row = res.rows[0]
    assert (row.bw_peak, row.bw_peak_gbps, row.bw_average_gbps) == (None, None, 98.02)
    assert res.warnings == (
        "WARNING: BW peak won't be measured in this run.",
        "Conflicting CPU frequency values detected: 1500.000000 != 3300.016000. "
        "CPU Frequency is not max.",
    )
    assert res.local_qps is not None and res.local_qps[0].gid is not None
    assert res.settings["Using Enhanced Reorder"] == "OFF" and res.gid_index == 4


def test_cuda_dmabuf_client_eight_qps_and_six_decimal_first_row() -> None:
    res = _parse(CUDA_CLT)
    assert res.cuda is not None
    assert (res.cuda.device_index, res.cuda.device_name, res.cuda.dmabuf) == (
        1,
        "NVIDIA H100 80GB HBM3",
        True,
    )
    assert res.qps == 8 and res.local_qps is not None and len(res.local_qps) == 8
    assert res.local_qps[4].psn == 0xC6610 and res.local_qps[0].rkey is None
    assert res.rows[0].bw_peak_gbps == 0.064163
    assert max(r.bw_average_gbps for r in res.rows) == 202.9
    assert res.warnings[0].startswith("Perftest doesn't supports CUDA")


def test_servers_print_only_the_last_row_and_are_detected() -> None:
    for name in (CUDA_SRV, CM_SRV):
        res = _parse(name)
        assert res.side == "server" and len(res.rows) == 1 and res.rows[0].size_bytes == 8388608
    assert _parse(CUDA_SRV).cuda is not None
    with pytest.raises(ParseError, match="client"):
        parse_ib_write_bw(corpus_text(f"net/{CM_SRV}"), "client")


def test_rdma_cm_header_and_tos() -> None:
    res = _parse(CM_CLT)
    assert (res.link_type, res.mtu_bytes, res.gid_index) == ("Ethernet", 4096, 3)
    assert res.rdma_cm_qps is True
    assert (res.data_exchange, res.tos, res.device) == ("rdma_cm", 41, "mlx5_2")
    assert res.bw_unit == "Gb/sec" and res.rows[-1].bw_average_gbps == 226.24
    assert res.other_lines == ()


@pytest.mark.parametrize(
    ("name", "kind", "message"),
    [
        (
            "ib_write_bw__fail-couldnt-connect-socket-pre-fix-format.txt",
            "connect",
            "Couldn't connect to 192.168.125.211:18515",
        ),
        (
            "ib_write_bw__fail-cuda-dmabuf-parser-error.txt",
            "usage",
            "CUDA DMA-BUF cannot be used without CUDA",
        ),
        (
            "ib_write_bw__fail-rdmacm-server-read-keys.txt",
            "exchange",
            "ethernet_read_keys: Couldn't read remote address",
        ),
        (
            "ib_write_bw__fail-rdmacm-unexpected-cm-event-unable-to-init-socket.txt",
            "rdma_cm",
            "Unexpected CM event bl blka 8",
        ),
    ],
)
def test_failures_are_facts_quoting_the_tool(name: str, kind: str, message: str) -> None:
    fail = _fail(name)
    assert (fail.kind, fail.message) == (kind, message)


def test_run_together_failure_line_is_kept_verbatim() -> None:
    fail = _fail("ib_write_bw__fail-couldnt-connect-socket-pre-fix-format.txt")
    assert fail.messages[1] == (
        "Unable to open file descriptor for socket connection Unable to init the socket connection"
    )


def test_crlf_and_ansi_are_tolerated() -> None:
    text = (
        corpus_text(f"net/{CM_CLT}")
        .replace("\n", "\r\n")
        .replace("RDMA_Write", "\x1b[1mRDMA_Write")
    )
    assert _parse(CM_CLT).rows == parse_ib_write_bw(text).rows  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "lorem ipsum dolor sit amet\nconsectetur adipiscing elit\n",
        "\x00\x01\x02\xff garbage \x7f\n" * 5,
    ],
    ids=["empty", "blank", "text", "binary"],
)
def test_garbage_raises(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ib_write_bw(text)
    assert exc.value.tool == "ib_write_bw"


@pytest.mark.parametrize("name", [CM_CLT, CUDA_CLT, BIDIR, CM_SRV])
def test_truncated_raises(name: str) -> None:
    text = corpus_text(f"net/{name}")
    with pytest.raises(ParseError) as exc:
        parse_ib_write_bw(text[: int(len(text) * 0.4)])
    assert exc.value.tool == "ib_write_bw"


def test_truncated_mid_table_raises() -> None:
    text = corpus_text(f"net/{CM_CLT}")
    cut = text[: text.index(" 65536 ")]
    with pytest.raises(ParseError, match="not closed"):
        parse_ib_write_bw(cut)


def test_other_tools_output_raises() -> None:
    for other in (
        "net/ibstat__h100-cx7-ndr400-ib-cx6dx-ports-down.txt",
        "net/all_reduce_perf__h100-gcp-a3mega-2node-16gpu.txt",
    ):
        with pytest.raises(ParseError) as exc:
            parse_ib_write_bw(corpus_text(other))
        assert exc.value.tool == "ib_write_bw"

"""nvbandwidth parser: the corpus v0.4 matrix, the v0.8 shape written from its source (waived,
errored, unknown testcases), and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.nvbandwidth import TOOL, parse_nvbandwidth

from conftest import check_expected, corpus_text

D2D = (
    "gpu/nvbandwidth__h100-80gb-hbm3-8gpu-v0.4-driver570.133.20-"
    "device-to-device-memcpy-read-ce-matrix.txt"
)
FORMATS = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
V08 = "nvbandwidth__v0.8-8gpu-h2d-d2h-gpu4-x8-waived-error-written-from-output-cpp.txt"
ASKED = (
    "host_to_device_bidirectional_memcpy_ce",
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
    "device_local_copy",
    "host_to_device_memcpy_sm_x",
)


def v08() -> str:
    return (FORMATS / V08).read_text(encoding="utf-8")


def test_corpus_v04_matrix() -> None:
    run = parse_nvbandwidth(corpus_text(D2D))
    check_expected("nvbandwidth", D2D, run)
    tc = run.testcase("device_to_device_memcpy_read_ce")
    assert tc is not None and tc.matrix is not None
    assert (run.version, run.driver_version, len(run.devices)) == ("v0.4", "570.133.20", 8)
    assert run.devices[0].pci is None  # v0.4 names no PCI id
    assert tc.matrix.cell("0", "0") is None and tc.matrix.cell("3", "1") == 372.05
    assert tc.sum_gbps == 20785.58


def test_v08_names_unnamed_status_lines_by_the_requested_order() -> None:
    run = parse_nvbandwidth(v08(), ASKED)
    check_expected("nvbandwidth", V08, run)
    got = {t.name: (t.status, t.message) for t in run.testcases}
    assert got == {
        "host_to_device_memcpy_ce": ("ran", ""),
        "device_to_host_memcpy_ce": ("ran", ""),
        "device_local_copy": ("error", "CUDA_ERROR_OUT_OF_MEMORY"),
        "host_to_device_bidirectional_memcpy_ce": ("waived", ""),
        "host_to_device_memcpy_sm_x": ("error", "Testcase host_to_device_memcpy_sm_x not found!"),
    }
    h2d = run.testcase("host_to_device_memcpy_ce")
    assert h2d is not None and h2d.matrix is not None
    assert h2d.matrix.rows == ("0",) and h2d.matrix.cell("0", "4") == 26.04
    assert run.devices[3].pci == "00000000:5d:00"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no testcase result"),
        ("\x00\x01garbage", "binary data"),
        ("#!%@ segfault?? 0xdeadbeef\n<<<< unexpected\n", "no testcase result"),
        ("Running device_local_copy.\nmemcpy local GPU(column) bandwidth (GB/s)\n  0  1\n"
         " 0  12.5\n", "row '0' has 1 cells for 2"),
        ("Running device_local_copy.\nmemcpy local GPU(column) bandwidth (GB/s)\n  0\n"
         " 0  fast\n", "unreadable cell 'fast'"),
        ("SUM device_local_copy 3.0\n", "SUM device_local_copy outside its testcase"),
    ],
)  # fmt: skip
def test_bad_input(text: str, why: str) -> None:
    with pytest.raises(ParseError, match=why) as exc:
        parse_nvbandwidth(text)
    assert exc.value.tool == TOOL


def test_truncated_before_its_sum_line() -> None:
    with pytest.raises(ParseError, match="ends before its SUM line"):
        parse_nvbandwidth(corpus_text(D2D).split("\n7 ")[0])
    cut = v08()[: v08().index("SUM host_to_device")]
    with pytest.raises(ParseError, match="host_to_device_memcpy_ce: output ends before"):
        parse_nvbandwidth(cut)

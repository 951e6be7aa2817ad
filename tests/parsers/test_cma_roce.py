"""`cma_roce_mode` parser: the format written from the script, its failure messages, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.cma_roce import parse_cma_roce_mode

from tests.parsers.conftest import check_expected

FORMATS = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
V2 = "cma_roce_mode__rdma-cm-roce-v2-written-from-mlnx-tools-sbin-cma-roce-mode.txt"


def test_written_format_expected() -> None:
    got = parse_cma_roce_mode((FORMATS / V2).read_text(encoding="utf-8"))
    check_expected("cma_roce_mode", V2, got)
    assert (got.mode, got.version) == ("RoCE v2", 2)


def test_v1_name() -> None:
    assert parse_cma_roce_mode("IB/RoCE v1\n").version == 1


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("", id="empty"),
        pytest.param("Lorem ipsum dolor sit amet\n", id="garbage"),
        pytest.param("\x00\xff\xfe", id="binary"),
        pytest.param("RoCE v", id="truncated"),
        pytest.param("RoCE v2\nRoCE v2\n", id="two-lines"),
        pytest.param("You must be root to run this\n", id="not-root"),
        pytest.param("Device mlx5_9 port 1 does not exist\n", id="no-device"),
        pytest.param(
            "Module rdma_cm is not loaded or does not support configfs\n", id="no-configfs"
        ),
    ],
)
def test_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_cma_roce_mode(bad)

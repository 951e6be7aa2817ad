"""rdma dev / rdma link parsers: corpus captures, non-mlx5 names, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.rdma_tool import parse_rdma_dev, parse_rdma_link

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

DEV = sorted(p.name for p in (CORPUS / "net").glob("rdma_dev__*"))
LINK = sorted(p.name for p in (CORPUS / "net").glob("rdma_link__*"))
BNXT_LINK = "rdma_link__broadcom-bnxt-re-one-down.txt"
RXE_LINK = "rdma_link__rxe-soft-roce.txt"


@pytest.mark.parametrize("name", DEV)
def test_rdma_dev_corpus_expected(name: str) -> None:
    check_expected("rdma_dev", name, parse_rdma_dev(corpus_text(f"net/{name}")))


@pytest.mark.parametrize("name", LINK)
def test_rdma_link_corpus_expected(name: str) -> None:
    check_expected("rdma_link", name, parse_rdma_link(corpus_text(f"net/{name}")))


def test_corpus_counts() -> None:
    assert (len(DEV), len(LINK)) == (1, 2)


def test_rdma_dev_broadcom() -> None:
    devs = parse_rdma_dev(corpus_text(f"net/{DEV[0]}")).devices
    assert [(d.index, d.name, d.protocol, d.fw) for d in devs] == [
        (0, "bnxt_re0", "roce", "231.0.154.0"),
        (1, "bnxt_re1", "roce", "231.0.154.0"),
    ]
    assert devs[1].node_guid == "8e8474fffe1f2551"


def test_rdma_dev_detail_caps() -> None:
    text = "0: mlx5_0: node_type ca fw 20.31.1014 node_guid 9803:9b03:0077:a1cc "
    text += "sys_image_guid 9803:9b03:0077:a1cc\n    caps: <BAD_PKEY_CNTR, BAD_QKEY_CNTR>\n"
    dev = parse_rdma_dev(text).devices[0]
    assert dev.protocol is None and dev.caps == ("BAD_PKEY_CNTR", "BAD_QKEY_CNTR")


def test_rdma_link_one_down() -> None:
    links = parse_rdma_link(corpus_text(f"net/{BNXT_LINK}")).links
    assert [(lk.device, lk.state_code, lk.phys_state_code, lk.netdev) for lk in links] == [
        ("bnxt_re0", 4, 5, "enp194s0f0np0"),
        ("bnxt_re1", 1, 3, "enp194s0f1np1"),
    ]


def test_rdma_link_rxe_and_ib_fields() -> None:
    (link,) = parse_rdma_link(corpus_text(f"net/{RXE_LINK}")).links
    assert (link.device, link.port, link.netdev) == ("rxe_0", 1, "p1p1")
    ib = "link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 75 sm_lid 334 lmc 0 state ACTIVE "
    ib += "physical_state LINK_UP netdev ibp65s0\n"
    (link,) = parse_rdma_link(ib).links
    assert (link.lid, link.sm_lid, link.lmc) == (75, 334, 0)
    assert link.subnet_prefix == "fe80:0000:0000:0000"


BROKEN = ["", "garbage words\n", "\x00\xff\xfe"]


@pytest.mark.parametrize(
    "text",
    [*BROKEN, corpus_text(f"net/{BNXT_LINK}"), "0: bnxt_re0: node_type\n"],
    ids=["empty", "garbage", "binary", "rdma-link-output", "odd-pairs"],
)
def test_rdma_dev_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_rdma_dev(text)
    assert exc.value.tool == "rdma dev"


@pytest.mark.parametrize(
    "text",
    [*BROKEN, corpus_text(f"net/{DEV[0]}"), "link rxe_0/1 netdev p1p1\n"],
    ids=["empty", "garbage", "binary", "rdma-dev-output", "no-state"],
)
def test_rdma_link_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_rdma_link(text)
    assert exc.value.tool == "rdma link"


@pytest.mark.parametrize(
    ("fn", "name"),
    [
        (parse_rdma_dev, f"net/{DEV[0]}"),
        (parse_rdma_link, f"net/{BNXT_LINK}"),
        (parse_rdma_link, f"net/{RXE_LINK}"),
    ],
    ids=["rdma-dev", "rdma-link-bnxt", "rdma-link-rxe"],
)
def test_truncated(fn: object, name: str) -> None:
    text = corpus_text(name)
    with pytest.raises(ParseError):
        fn(text[: int(len(text) * 0.4)])  # type: ignore[operator]

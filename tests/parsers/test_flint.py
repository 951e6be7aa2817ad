"""flint q parser and the switch firmware built on it: corpus capture, quirks, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.flint import (
    SwitchFirmware,
    parse_flint_query,
    parse_switch_firmware,
    parse_switch_firmware_loop,
)

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FLINT = sorted(p.name for p in (CORPUS / "net").glob("flint__*"))
BF2 = "flint__q-bluefield2-dpu-fs4-secure-fw-24.33.txt"


@pytest.mark.parametrize("name", FLINT)
def test_flint_corpus_expected(name: str) -> None:
    check_expected("flint_query", name, parse_flint_query(corpus_text(f"net/{name}")))


def test_corpus_count() -> None:
    assert len(FLINT) == 1


def test_flint_multiline_rom_info_and_guid_counts() -> None:
    q = parse_flint_query(corpus_text(f"net/{BF2}"))
    assert (q.fw_version, q.psid, q.image_type) == ("24.33.1048", "MT_0000000723", "FS4")
    assert [r.type for r in q.rom_info] == ["UEFI Virtio net", "UEFI Virtio blk", "UEFI", "PXE"]
    assert q.rom_info[2].cpu == "AMD64,AARCH64"
    assert (q.base_guid, q.base_guid_count) == ("08c0eb030053eaec", 16)
    assert q.security_attributes == ("secure-fw",)
    assert q.image_vsd is None and q.fw_version_running is None


def test_flint_pending_firmware_and_na_security() -> None:
    text = corpus_text(f"net/{BF2}").replace(
        "FW Release Date:", "FW Version(Running):   24.32.1010\nFW Release Date:"
    )
    text = text.replace("Security Attributes:   secure-fw", "Security Attributes:   N/A")
    q = parse_flint_query(text)
    assert (q.fw_version, q.fw_version_running) == ("24.33.1048", "24.32.1010")
    assert q.security_attributes == ()
    # A switch that has not been reset runs the older image: that is what the fabric compares.
    assert parse_switch_firmware(text, 12) == SwitchFirmware(12, "24.32.1010", "MT_0000000723")


def test_switch_firmware_of_the_capture() -> None:
    fw = parse_switch_firmware(corpus_text(f"net/{BF2}"), 1719)
    assert fw == SwitchFirmware(lid=1719, version="24.33.1048", psid="MT_0000000723")


def test_switch_firmware_refuses_an_odd_version() -> None:
    with pytest.raises(ParseError, match="not major.minor.subminor"):
        parse_switch_firmware("FW Version:            31.x\nPSID:  MT_0000000693\n", 3)


def test_flint_error_is_quoted() -> None:
    text = "-E- Cannot open Device: lid-12,mlx5_0,1. MFE_OPEN_FAILED\n"
    with pytest.raises(ParseError, match="Cannot open Device: lid-12"):
        parse_flint_query(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage words\n",
        "\x00\xff\xfe",
        corpus_text("net/ethtool_i__cx4lx-mlx5-core-fw-with-psid.txt"),
    ],
    ids=["empty", "garbage", "binary", "ethtool-i-output"],
)
def test_flint_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_flint_query(text)
    assert exc.value.tool == "flint"


def test_flint_truncated() -> None:
    text = corpus_text(f"net/{BF2}")
    with pytest.raises(ParseError, match="PSID"):
        parse_flint_query(text[: int(len(text) * 0.4)])


def test_switch_firmware_loop() -> None:
    bf2 = corpus_text(f"net/{BF2}")
    text = f"# lid 3\n{bf2}# lid 12\n" + bf2.replace("24.33.1048", "24.32.1010", 1)
    assert parse_switch_firmware_loop(text) == (
        SwitchFirmware(3, "24.33.1048", "MT_0000000723"),
        SwitchFirmware(12, "24.32.1010", "MT_0000000723"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no '# lid N' marker"),
        ("FW Version:  1.2.3\n# lid 3\n", "line 1: output before the first"),
        ("# lid 3\n# lid 4\n" + corpus_text(f"net/{BF2}"), "lid 3: no flint output"),
        ("# lid 3\n-E- Cannot open Device: lid-3,mlx5_0,1. MFE_CR_ERROR\n", "lid 3: flint"),
        ("# lid 3x\n" + corpus_text(f"net/{BF2}"), "output before the first"),
        ("# lid 3\nFW Version:            24.33.1048\n", "lid 3: no PSID line"),
        (("# lid 3\n" + corpus_text(f"net/{BF2}")) * 2, "lid 3: queried twice"),
    ],
    ids=["empty", "before", "empty-block", "error", "marker", "truncated", "twice"],
)
def test_switch_firmware_loop_refusals(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as exc:
        parse_switch_firmware_loop(text)
    assert exc.value.tool == "flint"

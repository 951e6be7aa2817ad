"""flint q and ethtool -i parsers: corpus captures, quirks, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.flint import parse_ethtool_i, parse_flint_query

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FLINT = sorted(p.name for p in (CORPUS / "net").glob("flint__*"))
ETHTOOL_I = sorted(p.name for p in (CORPUS / "net").glob("ethtool_i__*"))
BF2 = "flint__q-bluefield2-dpu-fs4-secure-fw-24.33.txt"


@pytest.mark.parametrize("name", FLINT)
def test_flint_corpus_expected(name: str) -> None:
    check_expected("flint_query", name, parse_flint_query(corpus_text(f"net/{name}")))


@pytest.mark.parametrize("name", ETHTOOL_I)
def test_ethtool_i_corpus_expected(name: str) -> None:
    check_expected("ethtool_i", name, parse_ethtool_i(corpus_text(f"net/{name}")))


def test_corpus_counts() -> None:
    assert len(FLINT) == 1 and len(ETHTOOL_I) == 1


def test_flint_multiline_rom_info_and_guid_counts() -> None:
    q = parse_flint_query(corpus_text(f"net/{BF2}"))
    assert (q.fw_version, q.psid, q.image_type) == ("24.33.1048", "MT_0000000723", "FS4")
    assert [r.type for r in q.rom_info] == ["UEFI Virtio net", "UEFI Virtio blk", "UEFI", "PXE"]
    assert q.rom_info[2].cpu == "AMD64,AARCH64"
    assert (q.base_guid, q.base_guid_count) == ("08c0eb030053eaec", 16)
    assert (q.base_mac, q.base_mac_count) == ("08c0eb53eaec", 16)
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


def test_flint_error_is_quoted() -> None:
    text = "-E- Cannot open Device: mlx5_9. No such file or directory. MFE_OPEN_FAILED\n"
    with pytest.raises(ParseError, match="Cannot open Device: mlx5_9"):
        parse_flint_query(text)


def test_ethtool_i_psid_in_firmware_version() -> None:
    info = parse_ethtool_i(corpus_text(f"net/{ETHTOOL_I[0]}"))
    assert (info.driver, info.fw_version, info.psid) == ("mlx5_core", "14.23.1020", "MT_2420110034")
    assert info.expansion_rom_version is None  # 'expansion-rom-version:' with nothing after it
    assert info.bus_info == "0000:af:00.0"
    assert info.supports["statistics"] is True and info.supports["register-dump"] is False


def test_ethtool_i_without_psid() -> None:
    info = parse_ethtool_i("driver: i40e\nfirmware-version: 8.70 0x8000c40f 1.3179.0\n")
    assert info.psid is None and info.fw_version is None
    assert info.firmware_version == "8.70 0x8000c40f 1.3179.0"


@pytest.mark.parametrize(
    "text",
    ["", "garbage words\n", "\x00\xff\xfe", corpus_text(f"net/{ETHTOOL_I[0]}")],
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


@pytest.mark.parametrize(
    "text",
    ["", "garbage words\n", "\x00\xff\xfe", corpus_text(f"net/{BF2}")],
    ids=["empty", "garbage", "binary", "flint-output"],
)
def test_ethtool_i_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ethtool_i(text)
    assert exc.value.tool == "ethtool -i"


def test_ethtool_i_truncated() -> None:
    text = corpus_text(f"net/{ETHTOOL_I[0]}")
    with pytest.raises(ParseError):
        parse_ethtool_i(text[: int(len(text) * 0.4)])

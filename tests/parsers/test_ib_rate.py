"""Shared IB decoding: rate strings, ibv_devinfo width/speed, port states, GUID forms."""

from __future__ import annotations

import pytest
from nodegate.parsers.ib_rate import (
    canonical_guid,
    decode_active_speed,
    decode_rate,
    decode_width,
    phys_state_code,
    port_state_code,
    rate_from_parts,
    split_coded,
    state_with_code,
)


@pytest.mark.parametrize(
    ("text", "rate", "width", "speed", "lane"),
    [
        ("400 Gb/sec (4X NDR)", 400, 4, "NDR", 100),
        ("200 Gb/sec (2X NDR)", 200, 2, "NDR", 100),
        ("200 Gb/sec (4X HDR)", 200, 4, "HDR", 50),
        ("100 Gb/sec (4X EDR)", 100, 4, "EDR", 25),
        ("56 Gb/sec (4X FDR)", 56, 4, "FDR", 14),
        ("40 Gb/sec (4X QDR)", 40, 4, "QDR", 10),
        ("40 Gb/sec (4X FDR10)", 40, 4, "FDR10", 10),
        ("25 Gb/sec (1X EDR)", 25, 1, "EDR", 25),
        ("2.5 Gb/sec (1X SDR)", 2.5, 1, "SDR", 2.5),
        ("800 Gb/sec (4X XDR)", 800, 4, "XDR", 200),
        # old kernels print SDR without a name: the speed stays unknown, never guessed
        ("10 Gb/sec (4X)", 10, 4, None, 2.5),
    ],
)
def test_decode_rate(text: str, rate: float, width: int, speed: str | None, lane: float) -> None:
    got = decode_rate(text)
    assert got is not None
    assert (got.rate_gbps, got.width_lanes, got.speed, got.lane_gbps) == (rate, width, speed, lane)
    assert got.raw == text


@pytest.mark.parametrize("text", ["", "400", "fast", "400 Gb/sec", "400 Gb/sec (NDR)"])
def test_decode_rate_rejects(text: str) -> None:
    assert decode_rate(text) is None


@pytest.mark.parametrize(
    ("text", "lanes"),
    [
        ("4X (2)", 4),
        ("1X (1)", 1),
        ("2X (16)", 2),
        ("8X (4)", 8),
        ("12X (8)", 12),
        ("4x", 4),
        ("16X (16X)", 16),
        ("invalid width", None),
    ],
)
def test_decode_width(text: str, lanes: int | None) -> None:
    assert decode_width(text) == lanes


@pytest.mark.parametrize(
    ("text", "name", "lane"),
    [
        ("2.5 Gbps (1)", "SDR", 2.5),
        ("5.0 Gbps (2)", "DDR", 5),
        ("10.0 Gbps (4)", "QDR", 10),
        ("10.0 Gbps (8)", "FDR10", 10),
        ("14.0 Gbps (16)", "FDR", 14),
        ("25.0 Gbps (32)", "EDR", 25),
        ("50.0 Gbps (64)", "HDR", 50),
        ("100.0 Gbps (128)", "NDR", 100),
        ("200.0 Gbps (256)", "XDR", 200),
        ("25.0 Gbps", None, 25),
        ("invalid speed (0)", None, None),
    ],
)
def test_decode_active_speed(text: str, name: str | None, lane: float | None) -> None:
    assert decode_active_speed(text) == (name, lane)


def test_rate_from_ibv_devinfo_parts() -> None:
    rate = rate_from_parts("4X (2)", "100.0 Gbps (128)")
    assert rate is not None
    assert (rate.rate_gbps, rate.width_lanes, rate.speed, rate.lane_gbps) == (400, 4, "NDR", 100)
    half = rate_from_parts("2X (16)", "100.0 Gbps (128)")
    assert half is not None and (half.rate_gbps, half.width_lanes) == (200, 2)
    fdr = rate_from_parts("4X (2)", "14.0 Gbps (16)")
    assert fdr is not None and fdr.rate_gbps == 56
    only_width = rate_from_parts("4X (2)", None)
    assert only_width is not None and only_width.rate_gbps is None and only_width.width_lanes == 4
    assert rate_from_parts(None, None) is None


@pytest.mark.parametrize(
    ("text", "code", "name"),
    [
        ("4: ACTIVE", 4, "ACTIVE"),
        ("5: LinkUp", 5, "LinkUp"),
        ("PORT_ACTIVE (4)", 4, "PORT_ACTIVE"),
        ("LINK_UP (5)", 5, "LINK_UP"),
        ("Active", None, "Active"),
    ],
)
def test_split_coded(text: str, code: int | None, name: str) -> None:
    assert split_coded(text) == (code, name)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("Active", 4),
        ("ACTIVE", 4),
        ("PORT_ACTIVE", 4),
        ("Down", 1),
        ("PORT_DOWN", 1),
        ("Initializing", 2),
        ("INIT", 2),
        ("Armed", 3),
        ("ACTIVE_DEFER", 5),
        ("???", None),
    ],
)
def test_port_state_code(name: str, code: int | None) -> None:
    assert port_state_code(name) == code


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("LinkUp", 5),
        ("LINK_UP", 5),
        ("Disabled", 3),
        ("DISABLED", 3),
        ("Polling", 2),
        ("PortConfigurationTraining", 4),
        ("LinkErrorRecovery", 6),
        ("PHY_TEST", 7),
        ("x", None),
    ],
)
def test_phys_state_code(name: str, code: int | None) -> None:
    assert phys_state_code(name) == code


def test_printed_code_wins_over_name() -> None:
    # procfs fixture mlx5_0 reads phys_state '4: ACTIVE' (edited): keep what is printed.
    assert state_with_code("4: ACTIVE", physical=True) == ("ACTIVE", 4)
    assert state_with_code("Disabled", physical=True) == ("Disabled", 3)


@pytest.mark.parametrize(
    "text",
    ["0x0c42a103004029a0", "0c42:a103:0040:29a0", "0c42a103004029a0", "0x0C42A103004029A0"],
)
def test_canonical_guid(text: str) -> None:
    assert canonical_guid(text) == "0c42a103004029a0"


def test_canonical_guid_rejects_junk() -> None:
    assert canonical_guid("not-a-guid") is None
    assert canonical_guid("0x" + "1" * 17) is None

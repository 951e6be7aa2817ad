"""mlxlink parser: the --json captures in the corpus, the plain-text layout, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.mlxlink import parse_mlxlink, parse_mlxlink_json

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "net").glob("mlxlink__*"))
DR4 = "mlxlink__json-m-c-cx7-400gbe-osfp-dr4-mft4.34.txt"
FEC = "mlxlink__json-m-c-fec-histogram-serdes-tx-cx7-400gbe.txt"
PCIE = "mlxlink__json-port-type-pcie-show-eye-cx7.txt"

# Plain-text layout (no text capture in the corpus). Lines below are from real `mlxlink -m -c`
# runs posted publicly (a BlueField-3 100G DAC port, MFT 4.30; an IB-NDR ConnectX-7 port,
# MFT 4.35, whose values end in a blank), shortened; the ANSI colour is how a terminal gets it.
TEXT_ETH = """
Operational Info
----------------
State                              : \x1b[1;32mActive\x1b[0m
Physical state                     : LinkUp
Speed                              : 100G
Width                              : 4x
FEC                                : Standard RS-FEC - RS(528,514)
Loopback Mode                      : No Loopback
Auto Negotiation                   : ON

Supported Info
--------------
Enabled Link Speed (Ext.)          : 0x00000200 (100G_4X)
Supported Cable Speed (Ext.)       : 0x000002f2 (100G_4X,50G_2X,40G,25G,10G,1G)

Troubleshooting Info
--------------------
Status Opcode                      : 0
Group Opcode                       : N/A
Recommendation                     : No issue was observed

Tool Information
----------------
Firmware Version                   : 32.43.2402
amBER Version                      : 3.6
MFT Version                        : mft 4.30.1-8

Module Info
-----------
Temperature [C]                    : N/A
Identifier                         : QSFP28
Compliance                         : @COMPLIANCE@
Cable Type                         : Passive copper cable
Vendor Name                        : FS
Vendor Part Number                 : Q28-PC03
Attenuation (5g,7g,12g)[dB]        : 0,0,0
CDR RX                             : N/A
Tx Fault [per lane]                : N/A

Physical Counters and BER Info
------------------------------
Time Since Last Clear [Min]        : 25074.8
Effective Physical Errors          : 0
Effective Physical BER             : 15E-255
Raw Physical Errors Per Lane       : 0,0,0,0
Link Down Counter                  : 0
Link Error Recovery Counter        : 0
Raw Physical BER                   : 15E-255
""".replace(
    "@COMPLIANCE@", "100GBASE-CR4, 25GBASE-CR CA-25G-L or 50GBASE-CR2 with RS (Clause91) FEC"
)
TEXT_IB = (
    "\nOperational Info\n----------------\n"
    "State                              : Active \n"
    "Physical state                     : LinkUp \n"
    "Speed                              : IB-NDR \n"
    "Width                              : 4x \n"
    "FEC                                : Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1) \n"
    "\nSupported Info\n--------------\n"
    "Enabled Link Speed                 : 0x000000f1 (NDR,HDR,EDR,FDR,SDR) \n"
    "\nModule Info\n-----------\n"
    "Temperature [C]                    : 0 [0..0]\n"
    "Bias Current [mA]                  : 0,0,0,0 [0..0]\n"
)


@pytest.mark.parametrize("name", FILES)
def test_corpus_expected(name: str) -> None:
    check_expected("mlxlink", name, parse_mlxlink_json(corpus_text(f"net/{name}")))


def test_corpus_count() -> None:
    assert len(FILES) == 3


def test_ranged_readings_and_ber() -> None:
    report = parse_mlxlink_json(corpus_text(f"net/{DR4}"))
    module = report.module
    assert module is not None
    assert module.temperature_c is not None
    assert (module.temperature_c.values, module.temperature_c.low, module.temperature_c.high) == (
        (61.0,), -10.0, 80.0,
    )  # fmt: skip
    assert module.rx_power_dbm is not None and len(module.rx_power_dbm.values) == 4
    assert module.rx_power_dbm.low == -9.914
    assert module.lane_values["Tx Fault [per lane]"] == ("0", "0", "0", "0")
    assert module.lane_values["SNR Host Lanes [dB]"] == ()  # ["N/A"]: no per-lane data
    assert module.fields["Module State"] == "Ready state"
    counters = report.counters
    assert counters is not None
    assert counters.effective_physical_ber == 15e-255  # mlxlink's "no errors counted" floor
    assert counters.raw_physical_ber == 5e-10
    assert counters.raw_physical_ber_per_lane == (1e-10, 1e-9, 4e-10, 5e-10)
    assert counters.raw_physical_errors_per_lane == (3017647, 15132549, 7368641, 9233545)
    op = report.operational
    assert op is not None
    assert (op.state, op.speed, op.eth_rate_gbps, op.ib_speed, op.width_lanes) == (
        "Active", "400G", 400, None, 4,
    )  # fmt: skip
    assert op.fec == "Standard_RS-FEC - (544,514)"
    assert report.enabled_link_speed is not None
    assert report.enabled_link_speed.mask == "0x0001bff2"
    assert report.recommendation == "No issue was observed" and report.status_opcode == 0


def test_fec_histogram_and_serdes_reserialised_json() -> None:
    report = parse_mlxlink_json(corpus_text(f"net/{FEC}"))
    assert [b.bin for b in report.fec_histogram] == list(range(16))  # sorted, not "Bin 10" first
    assert report.fec_histogram[1].occurrences == 65755507
    assert report.serdes_tx["Lane 0"]["fir_pre1"] == -15
    assert list(report.serdes_tx) == ["Lane 0", "Lane 1", "Lane 2", "Lane 3"]


def test_pcie_port_type() -> None:
    report = parse_mlxlink_json(corpus_text(f"net/{PCIE}"))
    assert report.operational is None and report.module is None
    pcie = report.pcie
    assert pcie is not None
    assert (pcie.gen_active, pcie.gen_enabled) == (5, 5)
    assert (pcie.width_active_lanes, pcie.width_enabled_lanes) == (16, 16)
    assert pcie.speed_active == "32G-Gen 5"
    assert len(pcie.eye_initial_fom) == 16 and pcie.eye_last_fom[11] == 103


def test_plain_text_layout() -> None:
    report = parse_mlxlink(TEXT_ETH)
    assert report.operational is not None
    assert report.operational.state == "Active"  # ANSI colour stripped
    assert report.operational.eth_rate_gbps == 100
    assert report.supported_cable_speed is not None
    assert report.supported_cable_speed.values == ("100G_4X", "50G_2X", "40G", "25G", "10G", "1G")
    assert report.mft_version == "mft 4.30.1-8"
    module = report.module
    assert module is not None and module.temperature_c is None
    assert module.compliance is not None and module.compliance.startswith("100GBASE-CR4, 25G")
    assert module.lane_values == {"CDR RX": (), "Tx Fault [per lane]": ()}
    assert module.fields["Attenuation (5g,7g,12g)[dB]"] == "0,0,0"
    assert report.counters is not None
    assert report.counters.raw_physical_errors_per_lane == (0, 0, 0, 0)
    ib = parse_mlxlink(TEXT_IB)
    assert ib.operational is not None
    assert (ib.operational.ib_speed, ib.operational.speed) == ("NDR", "IB-NDR")
    assert ib.enabled_link_speed is not None
    assert ib.enabled_link_speed.values == ("NDR", "HDR", "EDR", "FDR", "SDR")
    assert ib.module is not None and ib.module.bias_current_ma is not None
    assert ib.module.bias_current_ma.values == (0.0, 0.0, 0.0, 0.0)


def test_json_error_status() -> None:
    text = '{"result": {"output": {}}, "status": {"code": 1, '
    text += '"message": "-E- Failed to open device"}}'
    with pytest.raises(ParseError, match="Failed to open device"):
        parse_mlxlink_json(text)


def test_text_error_line() -> None:
    with pytest.raises(ParseError, match="No such device"):
        parse_mlxlink("-E- No such device: mlx5_9\n")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "some random words\n",
        "\x00\x01\xff\xfe",
        '{"foo": 1}',
        "[1, 2, 3]",
        "CA 'mlx5_0'\n\tCA type: MT4129\n",
        TEXT_ETH,  # parse_mlxlink_json insists on JSON
    ],
    ids=["empty", "garbage", "binary", "json-not-mlxlink", "json-array", "ibstat", "text-to-json"],
)
def test_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_mlxlink_json(text)
    assert exc.value.tool == "mlxlink"


@pytest.mark.parametrize("name", FILES)
def test_truncated(name: str) -> None:
    text = corpus_text(f"net/{name}")
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_mlxlink_json(text[: int(len(text) * 0.4)])


def test_text_truncated_mid_line() -> None:
    with pytest.raises(ParseError):
        parse_mlxlink(TEXT_ETH[: TEXT_ETH.index("Raw Physical Errors") + 8])

"""Kernel-log parser: every dmesg/syslog capture in the corpus, quirks, and broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.kernel_log import TOOL, parse_kernel_log

from conftest import CORPUS, check_expected, corpus_text

FILES = sorted(
    p.name
    for d in ("gpu", "net")
    for pattern in ("dmesg__*", "syslog__*")
    for p in (CORPUS / d).glob(pattern)
)
FALLEN = "gpu/dmesg__fallen-off-bus-at-probe-no-xid-l40-open-driver570.158.01.txt"
MLX5 = "gpu/dmesg__mlx5-core-cx5-pcie-gen3-x8-bandwidth-limited.txt"
SXID = "gpu/dmesg__sxid-22013-nvswitch-nonfatal-link-60.txt"
XID119 = "gpu/dmesg__xid-119-gsp-rpc-timeout-dell-xe9680-hgx.txt"
XID13 = "gpu/dmesg__xid-13-43-sm-warp-exception-decode-iso.txt"
PEERMEM = "gpu/dmesg__xid-48-63-94-dbe-row-remap-contained-plus-peermem.txt"
GREP = "gpu/dmesg__xid-48-63-94-dbe-row-remap-pending-grep-driver550.90.07.txt"
XID79 = "NVRM: Xid (PCI:0000:19:00): 79, pid=1, name=a, x"
SYSLOG = "gpu/syslog__xid-45-caused-by-previous-xid-149-145-driver590.48.01-excerpt.txt"


def _rel(name: str) -> str:
    return f"gpu/{name}" if (CORPUS / "gpu" / name).exists() else f"net/{name}"


@pytest.mark.parametrize("name", FILES)
def test_corpus_expected(name: str) -> None:
    check_expected("kernel_log", name, parse_kernel_log(corpus_text(_rel(name))))


def test_corpus_count() -> None:
    assert len(FILES) == 8


def test_fallen_off_bus_without_xid_joins_wrapped_lines() -> None:
    ev = parse_kernel_log(corpus_text(FALLEN))
    assert ev.xids == ()
    (fell,) = ev.fallen_off_bus
    assert (fell.bdf, fell.pci_id, fell.line_no) == ("0000:b3:00.0", "10de:26b5", 1)
    assert fell.timestamp is not None and fell.timestamp.seconds_since_boot == 1843.308145
    assert "installed in this system has fallen off the bus" in fell.message
    (load,) = ev.driver_loads
    assert (load.version, load.open_kernel_module) == ("570.158.01", True)


def test_mlx5_pcie_bandwidth_limited() -> None:
    (bw,) = parse_kernel_log(corpus_text(MLX5)).pcie_bandwidth
    assert (bw.driver, bw.bdf, bw.limited) == ("mlx5_core", "0001:43:00.0", True)
    assert (bw.available_bandwidth_gbps, bw.capable_bandwidth_gbps) == (63.008, 126.016)
    assert (bw.limiting_bdf, bw.limiting_speed_gts, bw.limiting_width_lanes) == (
        "0001:42:01.0",
        8.0,
        8,
    )
    assert (bw.capable_speed_gts, bw.capable_width_lanes) == (8.0, 16)


def test_pcie_bandwidth_not_limited_form() -> None:
    line = (
        "[ 9.1] mlx5_core 0000:1a:00.0: 252.048 Gb/s available PCIe bandwidth"
        " (16.0 GT/s PCIe x16 link)"
    )
    (bw,) = parse_kernel_log(line).pcie_bandwidth
    assert (bw.limited, bw.limiting_bdf, bw.capable_width_lanes) == (False, None, 16)


def test_sxid_folds_severity_and_data_lines() -> None:
    (sx,) = parse_kernel_log(corpus_text(SXID)).sxids
    assert (sx.sxid, sx.bdf, sx.switch_device, sx.fatal, sx.link) == (
        22013,
        "0000:08:00.0",
        "nvidia-nvswitch3",
        False,
        60,
    )
    assert sx.message == "Minion Link DLREQ interrupt"
    assert len(sx.details) == 2 and sx.details[1].startswith("Data {0x0000003c")


def interleaved_sxids() -> str:
    """Two NVSwitches' SXid lines interleaved, built from the corpus lines (SXID): switch 3's
    error (made Fatal) twice, the second 1 s later; switch 2's copy (renamed, non-fatal) logged
    between the lines of the first."""
    head, sev, data = corpus_text(SXID).splitlines()
    fatal = [ln.replace("22013, Non-fatal", "22013, Fatal") for ln in (head, sev, data)]
    other = [
        ln.replace("nvswitch3", "nvswitch2").replace("0000:08:00.0", "0000:07:00.0")
        for ln in (head, sev, data)
    ]
    later = [ln.replace("[  117.", "[  118.") for ln in fatal]
    return "\n".join([fatal[0], other[0], fatal[1], other[1], fatal[2], other[2], *later]) + "\n"


def test_sxid_follow_up_lines_of_interleaved_switches_join_their_own_head() -> None:
    sxids = parse_kernel_log(interleaved_sxids()).sxids
    got = [(sx.bdf, sx.fatal, sx.link, [d.split()[0] for d in sx.details]) for sx in sxids]
    assert got == [
        ("0000:08:00.0", True, 60, ["Severity", "Data"]),
        ("0000:07:00.0", False, 60, ["Severity", "Data"]),
        ("0000:08:00.0", True, 60, ["Severity", "Data"]),
    ]
    # A follow-up whose head is not in the window stays an event of unknown severity.
    (orphan,) = parse_kernel_log(corpus_text(SXID).splitlines()[1]).sxids
    assert (orphan.fatal, orphan.details) == (None, ())


def test_xid119_ctime_stamps_and_processes() -> None:
    ev = parse_kernel_log(corpus_text(XID119))
    assert [x.xid for x in ev.xids] == [119] * 5
    assert [x.process_name for x in ev.xids] == ["nvidia-smi"] * 3 + ["cache_mgr_main", "gpud"]
    first = ev.xids[0]
    assert first.timestamp is not None
    assert (first.timestamp.raw, first.timestamp.wallclock_iso) == (
        "[Sun Feb 23 16:24:18 2025]",
        "2025-02-23T16:24:18",
    )
    assert first.pid == 2024380 and first.bdf == "0000:9b:00.0"


def test_decode_iso_facility_prefix() -> None:
    ev = parse_kernel_log(corpus_text(XID13))
    assert len(ev.xids) == 636 and ev.kernel_lines == 636
    assert {x.xid for x in ev.xids} == {13, 43}
    assert sum(x.xid == 43 for x in ev.xids) == 7
    first = ev.xids[0]
    assert first.timestamp is not None
    assert first.timestamp.wallclock_iso == "2025-01-21T02:21:33.498559+00:00"
    assert (first.pid, first.process_name) == (None, None)  # pid='<unknown>'
    xid43 = next(x for x in ev.xids if x.xid == 43)
    assert (xid43.pid, xid43.process_name, xid43.channel) == (2815167, "pt_main_thread", "00000008")


def test_iso_dbe_row_remap_contained_and_peermem() -> None:
    ev = parse_kernel_log(corpus_text(PEERMEM))
    assert [x.xid for x in ev.xids[:4]] == [48, 63, 94, 94]
    assert ev.xids[2].message == "Contained: SM (0x1). RST: No, D-RST: No"
    assert len(ev.peermem) == 30 and all(p.is_error and not p.is_load for p in ev.peermem)
    assert ev.peermem[0].message.startswith("nv_get_p2p_free_callback:127 ERROR")


def test_grep_monotonic_stamps() -> None:
    ev = parse_kernel_log(corpus_text(GREP))
    assert [(x.xid, x.bdf) for x in ev.xids] == [
        (48, "0000:52:00.0"),
        (63, "0000:52:00.0"),
        (94, "0000:52:00.0"),
    ]
    assert ev.xids[0].timestamp is not None
    assert ev.xids[0].timestamp.seconds_since_boot == 430954.509105


def test_syslog_caused_by_previous_xid_without_timestamp() -> None:
    ev = parse_kernel_log(corpus_text(SYSLOG))
    assert [x.caused_by_xid for x in ev.xids] == [149, 145, 145, 145, 149, 145, 145]
    assert all(x.timestamp is None and x.xid == 45 for x in ev.xids)
    assert ev.xids[0].channel == "00000001" and ev.xids[0].pid == 1818990


@pytest.mark.parametrize(
    ("line", "raw", "boot", "wall"),
    [
        (
            "Nov 15 05:39:15 gpu01 kernel: [ 12.345678] " + XID79,
            "Nov 15 05:39:15 [ 12.345678]",
            12.345678,
            None,
        ),
        (
            "2024-11-15T05:39:15+0000 gpu01 kernel: " + XID79,
            "2024-11-15T05:39:15+0000",
            None,
            "2024-11-15T05:39:15+00:00",
        ),
        (
            "2024-11-15T05:39:15.123Z gpu01 kernel: " + XID79,
            "2024-11-15T05:39:15.123Z",
            None,
            "2024-11-15T05:39:15.123000+00:00",
        ),
    ],
    ids=["syslog-with-boot-time", "journal-short-iso", "rfc3339-utc"],
)
def test_other_timestamp_forms(line: str, raw: str, boot: float | None, wall: str | None) -> None:
    (xid,) = parse_kernel_log(line).xids
    assert xid.timestamp is not None
    assert (xid.timestamp.raw, xid.timestamp.seconds_since_boot, xid.timestamp.wallclock_iso) == (
        raw,
        boot,
        wall,
    )
    assert xid.xid == 79 and xid.message == "x"


def test_old_xid_form_and_fallen_off_bus_xid79() -> None:
    text = "[ 5.0] NVRM: Xid (0000:3b:00): 79, GPU has fallen off the bus.\r\n"
    ev = parse_kernel_log(text)
    (xid,) = ev.xids
    assert (xid.bdf, xid.pid, xid.message) == ("0000:3b:00.0", None, "GPU has fallen off the bus.")
    assert ev.fallen_off_bus == ()  # reported as the Xid 79 itself


def test_no_events_but_kernel_lines_is_valid() -> None:
    ev = parse_kernel_log("[    0.000000] Linux version 5.15.0\n[    0.1] Command line: ro\n")
    assert ev.kernel_lines == 2 and ev.xids == () and ev.sxids == ()


def test_ansi_colour_from_dmesg_color() -> None:
    line = (
        "\x1b[32m[  117.984502] \x1b[0m"
        "nvidia-nvswitch3: SXid (PCI:0000:08:00.0): 22013, Fatal, Link 2 X"
    )
    (sx,) = parse_kernel_log(line).sxids
    assert sx.fatal is True and sx.link == 2


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n \n",
        "hello world\nthis is not a kernel log\n",
        "\x00\x01\x02garbage\xff\xfe",
        corpus_text("gpu/lspci-Dnn__h100-sxm5-8gpu-4nvswitch-passthrough-vm-grep-nvidia.txt"),
        corpus_text("gpu/dcgmi-diag-r1__v100-pcie-16gb-dcgm3.3.9-driver560.35.03.txt"),
    ],
    ids=["empty", "blank", "garbage", "binary", "lspci", "dcgmi"],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_kernel_log(text)
    assert err.value.tool == TOOL


@pytest.mark.parametrize("name", [MLX5, SXID, XID13, PEERMEM])
def test_truncated_40_percent_raises(name: str) -> None:
    # These first-40% cuts end inside a timestamp, an SXid address or an Xid's `pid=`.
    text = corpus_text(name)
    with pytest.raises(ParseError) as err:
        parse_kernel_log(text[: int(len(text) * 0.4)])
    assert err.value.tool == TOOL and "cut?" in err.value.reason


def test_cut_inside_free_text_is_a_shorter_log() -> None:
    # A log is a stream: a cut between lines, or inside an event's free text, cannot be told
    # from a shorter log. The event up to the cut is still reported (and still fails a check).
    text = corpus_text(GREP)
    ev = parse_kernel_log(text[: int(len(text) * 0.4)])
    assert [x.xid for x in ev.xids] == [48]
    assert ev.xids[0].message.endswith("partition 16, s")


@pytest.mark.parametrize(
    "line",
    [
        "[ 1.0] NVRM: Xid (PCI:0000:5",
        "[ 1.0] NVRM: Xid (PCI:0000:52:00): 63, pid='<unk",
        "[ 1.0] nvidia-nvswitch3: SXid (PCI:0000:08:00.0): 2",
        "[ 1.0] mlx5_core 0001:43:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 G",
        "[ 1.0] NVRM: Xid (PCI:zz:00): 13, pid=1, name=a, x",
        "[ 1.0] NVRM: Xid (PCI:0000:52:00): 63, pi",
        "[  117.98",
        "2024-11-15T12:02:03,56",
    ],
)
def test_malformed_event_lines_raise(line: str) -> None:
    with pytest.raises(ParseError, match="kernel_log"):
        parse_kernel_log(line)


# The proprietary module's load line names the arch before "Kernel Module" (no "for"); shape
# from public dmesg captures (driver 550.120 on x86_64, 2024; aarch64 the same with its arch).
@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "[    6.852458] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.120  "
            "Fri Sep 13 10:10:01 UTC 2024",
            ("550.120", False),
        ),
        (
            "[    2.024340] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  "
            "Tue Mar  5 22:42:18 UTC 2024 (using threaded interrupts)",
            ("535.161.08", False),
        ),
        (
            "[    9.1] NVRM: loading NVIDIA UNIX aarch64 Kernel Module  560.35.03  "
            "Fri Aug 16 21:22:33 UTC 2024",
            ("560.35.03", False),
        ),
        (
            "[ 1843.4] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  "
            "Release Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025",
            ("570.158.01", True),
        ),
    ],
    ids=["proprietary-550", "proprietary-535-threaded", "proprietary-aarch64", "open-570"],
)
def test_driver_load_line_proprietary_and_open(line: str, want: tuple[str, bool]) -> None:
    (load,) = parse_kernel_log(line + "\n").driver_loads
    assert (load.version, load.open_kernel_module) == want

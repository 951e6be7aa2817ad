"""Fabric Manager parsers: systemctl status and the FM log; corpus, quirks, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.fabricmanager import (
    LOG_TOOL,
    STATUS_TOOL,
    NvswitchError,
    parse_fabricmanager_log,
    parse_fabricmanager_status,
)

from conftest import CORPUS, check_expected, corpus_text

STATUS_FILES = sorted(p.name for p in (CORPUS / "gpu").glob("systemctl-status-*"))
LOG_FILES = sorted(p.name for p in (CORPUS / "gpu").glob("fabricmanager-log__*"))
STATUS = f"gpu/{STATUS_FILES[0]}"
STATUS_SXID = (
    "gpu/systemctl-status-nvidia-fabricmanager__"
    "hgx-8gpu-driver590.48.01-start-script-nvswitch-nonfatal-22013-journal.txt"
)
LOG = f"gpu/{LOG_FILES[0]}"


@pytest.mark.parametrize("name", STATUS_FILES)
def test_status_corpus_expected(name: str) -> None:
    check_expected(
        "fabricmanager_status", name, parse_fabricmanager_status(corpus_text(f"gpu/{name}"))
    )


@pytest.mark.parametrize("name", LOG_FILES)
def test_log_corpus_expected(name: str) -> None:
    check_expected("fabricmanager_log", name, parse_fabricmanager_log(corpus_text(f"gpu/{name}")))


def test_corpus_count() -> None:
    assert (len(STATUS_FILES), len(LOG_FILES)) == (2, 1)


def test_status_running_path_triggered_and_clipped_journal() -> None:
    st = parse_fabricmanager_status(corpus_text(STATUS))
    assert (st.unit, st.load_state, st.unit_file_state) == (
        "nvidia-fabricmanager.service",
        "loaded",
        "enabled",
    )
    assert (st.active_state, st.sub_state, st.result) == ("active", "running", None)
    assert st.since_raw == "Tue 2025-03-25 02:10:15 UTC"
    assert (st.main_pid, st.main_process) == (2116, "nv-fabricmanage")
    assert st.triggered_by == ("nvidia-nvswitch-devices.path",)
    clipped = [j for j in st.journal if j.cut]
    assert len(clipped) == 1 and clipped[0].message.endswith("once the GPUs are succ")
    assert clipped[0].ident == "nv-fabricmanager" and clipped[0].pid == 2116


def test_status_journal_nvswitch_error_nodeid_wording() -> None:
    st = parse_fabricmanager_status(corpus_text(STATUS_SXID))
    assert st.main_pid == 5183 and st.sub_state == "running"
    errs = [(j.pid, j.nvswitch_error) for j in st.journal if j.nvswitch_error is not None]
    assert errs == [(5183, NvswitchError(None, False, 22013, 0, "0000:08:00.0", 3, 60))]
    assert all(
        j.nvswitch_error is None for j in parse_fabricmanager_status(corpus_text(STATUS)).journal
    )


def test_status_journal_nvswitch_error_clipped_keeps_its_code() -> None:
    head = corpus_text(STATUS_SXID).rsplit("\n", 2)[0]
    fm = "\nMar 03 18:40:01 h nv-fabricmanager[5183]: "
    clipped = head + fm + "detected NVSwitch fatal error 20034 on fid 0 on>\n"
    err = parse_fabricmanager_status(clipped).journal[-1].nvswitch_error
    assert err == NvswitchError(None, True, 20034, None, None, None, None)
    # Clipped before its code, or malformed in full: not understood, never "no error".
    for tail in ("detected NVSwitch fat>", "detected NVSwitch fatal error on port 3"):
        with pytest.raises(ParseError, match="malformed NVSwitch error") as err_info:
            parse_fabricmanager_status(head + fm + tail + "\n")
        assert err_info.value.tool == STATUS_TOOL


def test_status_failed_unit() -> None:
    text = (
        "× nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
        "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled; "
        "vendor preset: enabled)\n"
        "     Active: failed (Result: exit-code) since Mon 2024-01-08 10:00:00 UTC; 5s ago\n"
        "    Process: 1234 ExecStart=/usr/bin/nv-fabricmanager (code=exited, status=1/FAILURE)\n"
    )
    st = parse_fabricmanager_status(text)
    assert (st.active_state, st.sub_state, st.result) == ("failed", None, "exit-code")
    assert st.main_pid is None


def test_status_inactive_and_not_found() -> None:
    text = (
        "○ nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
        "     Loaded: loaded (/usr/lib/systemd/system/nvidia-fabricmanager.service; disabled; "
        "preset: disabled)\n"
        "     Active: inactive (dead)\n"
    )
    st = parse_fabricmanager_status(text)
    assert (st.active_state, st.sub_state, st.unit_file_state) == ("inactive", "dead", "disabled")
    gone = parse_fabricmanager_status("Unit nvidia-fabricmanager.service could not be found.\n")
    assert (gone.load_state, gone.active_state) == ("not-found", None)


def test_log_sessions_switches_gpus_routing() -> None:
    log = parse_fabricmanager_log(corpus_text(LOG))
    head, first, second = log.sessions
    # The file opens mid-session (inband multicast traffic) before the first restart banner.
    assert (head.started_raw, head.version) == (None, None)
    assert first.started_raw == "12/19/2024 22:08:53.808"
    assert first.started_iso == "2024-12-19T22:08:53.808000"
    assert (first.version, first.topology) == ("535.161.08", "DGX/HGX H100")
    assert (first.expected_switches, first.expected_gpus) == (4, 8)
    assert [s.bdf for s in first.switches] == [f"0000:{b}:00.0" for b in ("83", "84", "85", "86")]
    assert first.switches[1].enabled_link_mask == "ffffffff000000ff"
    assert len(first.gpus) == 8 and first.routing_configured
    assert {g.enabled_link_mask for g in first.gpus} == {"3ffff"}
    assert first.gpus[0].bdf == "0000:9b:00.0"  # `00000000:9B:00.0` normalised
    opts = {o.name: o.value for o in first.options}
    assert (
        opts["Fabric Mode"] == "0" and opts["FM Library communication unix domain socket"] is None
    )
    assert len(second.gpus) == 8


def test_log_nvswitch_nonfatal_errors() -> None:
    log = parse_fabricmanager_log(corpus_text(LOG))
    assert len(log.nvswitch_errors) == 18 and log.problems == ()
    err = log.nvswitch_errors[0]
    assert (err.fatal, err.error_code, err.bdf, err.physical_id, err.port) == (
        False,
        12028,
        "0000:83:00.0",
        0,
        34,
    )
    assert err.timestamp_iso == "2024-12-19T19:17:49"
    assert {(e.physical_id, e.port) for e in log.nvswitch_errors} == {
        (0, 34), (1, 35), (1, 42), (2, 0), (2, 1), (2, 19), (2, 33), (3, 33), (3, 36)
    }  # fmt: skip


def test_log_other_errors_are_kept() -> None:
    text = (
        "[Jan 08 2024 10:00:00] [INFO] [tid 1] Fabric Manager version 550.54.15 is running\n"
        "[Jan 08 2024 10:00:01] [ERROR] [tid 1] request to query NVSwitch device information "
        "from NVSwitch driver failed with error:WARNING Nothing to do\n"
        "[Jan 08 2024 10:00:02] [ERROR] [tid 1] detected NVSwitch fatal error 20034 on fid 0 on "
        "NVSwitch pci bus id 00000000:05:00.0 physical id 2 port 12\n"
    )
    log = parse_fabricmanager_log(text)
    (problem,) = log.problems
    assert problem.level == "ERROR" and "failed with error" in problem.message
    (err,) = log.nvswitch_errors
    assert err.fatal and err.error_code == 20034 and err.bdf == "0000:05:00.0"
    assert log.sessions[0].version == "550.54.15"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world\nnot systemctl\n",
        "\x00\x01\x02garbage\xff\xfe",
        corpus_text(LOG),
        corpus_text("gpu/dmesg__sxid-22013-nvswitch-nonfatal-link-60.txt"),
    ],
    ids=["empty", "garbage", "binary", "fm-log", "dmesg"],
)
def test_status_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_fabricmanager_status(text)
    assert err.value.tool == STATUS_TOOL


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world\nnot a log\n",
        "\x00\x01\x02garbage\xff\xfe",
        corpus_text(STATUS),
        corpus_text("gpu/dmesg__sxid-22013-nvswitch-nonfatal-link-60.txt"),
    ],
    ids=["empty", "garbage", "binary", "systemctl", "dmesg"],
)
def test_log_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_fabricmanager_log(text)
    assert err.value.tool == LOG_TOOL


def test_status_truncated_raises() -> None:
    text = corpus_text(STATUS)
    with pytest.raises(ParseError, match="truncated"):
        parse_fabricmanager_status(text[: int(len(text) * 0.4)])
    with pytest.raises(ParseError, match="Active"):
        parse_fabricmanager_status(text[: text.index("Active:") + 12])


def test_log_truncated_raises() -> None:
    text = corpus_text(LOG)
    cut = text[: int(len(text) * 0.4)]
    with pytest.raises(ParseError) as err:
        parse_fabricmanager_log(cut)
    assert err.value.tool == LOG_TOOL and "cut?" in err.value.reason


@pytest.mark.parametrize(
    "line",
    [
        "[Dec 19 2024 22:08:54] [INFO] [tid 15",
        "  Index: 00  Physical Id: 0  PCI Bus ID: 00000000:83:00.0  Enabled Link Ma",
    ],
)
def test_log_cut_structures_raise(line: str) -> None:
    text = "[Dec 19 2024 22:08:53] [INFO] [tid 1570] Fabric Manager version 1 is running\n" + line
    with pytest.raises(ParseError, match="fabricmanager log"):
        parse_fabricmanager_log(text)

"""Settings: read once from options and ini twins; every bad value is one clear usage error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nodegate.core import bundled
from nodegate.core.errors import ConfigError
from nodegate.core.settings import (
    AUTO_NODE_ITEMS,
    DEFAULT_FANOUT,
    DEFAULT_SUMMARY_LINES,
    OPTIONS,
    Settings,
    build_settings,
)

KNOWN = {"ssh", "local", "replay"}
ROOT = Path("/srv/site")
PACKAGE = Path(__file__).resolve().parents[2] / "plugins" / "nodegate"


def build(cli=None, ini=None, known=KNOWN) -> Settings:
    return build_settings(cli or {}, ini or {}, known_transports=known, rootpath=ROOT)


def test_defaults():
    assert build() == Settings(reports_dir=ROOT / "reports")
    assert build().fanout == DEFAULT_FANOUT == 256
    assert build().profile_search_path() == [bundled.profiles_dir()]


def test_every_value_from_the_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cli = {
        "nodegate_inventory": "inv.yaml",
        "nodegate_nodes": "gpu[001-004]",
        "nodegate_profile": "nd-h100-v5",
        "nodegate_profiles_dir": ["a", "b"],
        "nodegate_fanout": "8",
        "nodegate_jobs": "3",
        "nodegate_connect_timeout": "2.5",
        "nodegate_accept_new_hostkeys": True,
        "nodegate_transport": "replay",
        "nodegate_replay": str(tmp_path),
        "nodegate_reports_dir": "out",
        "nodegate_run_id": "r1",
    }
    assert build(cli) == Settings(
        inventory="inv.yaml",
        nodes="gpu[001-004]",
        profile="nd-h100-v5",
        profiles_dirs=(Path("a"), Path("b")),
        fanout=8,
        jobs=3,
        connect_timeout_s=2.5,
        accept_new_hostkeys=True,
        transport="replay",
        replay_dir=tmp_path,
        reports_dir=Path("out"),
        run_id="r1",
    )
    assert build(cli).profile_search_path() == [Path("a"), Path("b"), bundled.profiles_dir()]


def test_command_line_wins_over_ini_and_ini_fills_the_rest():
    s = build(
        {"nodegate_fanout": "8", "nodegate_accept_new_hostkeys": False},
        {"nodegate_fanout": "16", "nodegate_nodes": "@rack1", "nodegate_accept_new_hostkeys": "on"},
    )
    assert (s.fanout, s.nodes, s.accept_new_hostkeys) == (8, "@rack1", True)


def test_profiles_dir_ini_twin_takes_whitespace_separated_dirs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "site" / "profiles").mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    s = build(ini={"nodegate_profiles_dir": f" site/profiles\n  {tmp_path}/etc "})
    assert s.profiles_dirs == (Path("site/profiles"), tmp_path / "etc")


def test_a_profiles_dir_that_is_not_a_directory_is_refused(tmp_path):
    """#21: a typo fell back to the shipped profiles without a word."""
    (tmp_path / "f").write_text("")
    for given in ([str(tmp_path / "nope")], [str(tmp_path), str(tmp_path / "f")]):
        with pytest.raises(ConfigError) as e:
            build({"nodegate_profiles_dir": given})
        assert str(e.value) == f"--profiles-dir: got '{given[-1]}', expected an existing directory"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("false", False), ("FALSE", False), ("no", False), ("0", False), ("Off", False),
        ("true", True), ("Yes", True), ("1", True), ("ON", True), (" true ", True),
    ],
)  # fmt: skip
def test_ini_booleans(value, expected):
    s = build(ini={"nodegate_accept_new_hostkeys": value})
    assert s.accept_new_hostkeys is expected


@pytest.mark.parametrize(
    ("cli", "ini", "message"),
    [
        ({"nodegate_fanout": "0"}, {}, "--fanout: got '0', expected a whole number >= 1"),
        ({"nodegate_jobs": "0"}, {}, "--jobs: got '0', expected a whole number >= 1"),
        (
            {},
            {"nodegate_jobs": "two"},
            "--jobs (from ini nodegate_jobs): got 'two', expected a whole number >= 1",
        ),
        ({"nodegate_fanout": "-1"}, {}, "--fanout: got '-1', expected a whole number >= 1"),
        ({"nodegate_fanout": "1.5"}, {}, "--fanout: got '1.5', expected a whole number >= 1"),
        ({"nodegate_fanout": ""}, {}, "--fanout: got '', expected a whole number >= 1"),
        (
            {},
            {"nodegate_fanout": "abc"},
            "--fanout (from ini nodegate_fanout): got 'abc', expected a whole number >= 1",
        ),
        (
            {"nodegate_connect_timeout": "0"},
            {},
            "--connect-timeout: got '0', expected a number of seconds > 0",
        ),
        (
            {"nodegate_connect_timeout": "-3"},
            {},
            "--connect-timeout: got '-3', expected a number of seconds > 0",
        ),
        (
            {"nodegate_connect_timeout": "inf"},
            {},
            "--connect-timeout: got 'inf', expected a number of seconds > 0",
        ),
        (
            {},
            {"nodegate_connect_timeout": "soon"},
            "--connect-timeout (from ini nodegate_connect_timeout): got 'soon', "
            "expected a number of seconds > 0",
        ),
        (
            {"nodegate_transport": "bogus"},
            {},
            "--transport: got 'bogus', expected one of local, replay, ssh",
        ),
        (
            {},
            {"nodegate_transport": "bogus"},
            "--transport (from ini nodegate_transport): got 'bogus', "
            "expected one of local, replay, ssh",
        ),
        (
            {"nodegate_transport": "replay"},
            {},
            "--transport replay needs --replay DIR (a capture bundle or a run's raw/)",
        ),
        (
            {},
            {"nodegate_accept_new_hostkeys": "maybe"},
            "--accept-new-hostkeys (from ini nodegate_accept_new_hostkeys): got 'maybe', "
            "expected one of true/false, yes/no, 1/0, on/off",
        ),
    ],
)
def test_bad_values_name_the_option_and_what_is_accepted(cli, ini, message):
    with pytest.raises(ConfigError) as exc:
        build(cli, ini)
    assert str(exc.value) == message


def test_terminal_options_from_the_command_line_or_their_ini_twins():
    assert (build().progress, build().item_reports, build().summary_lines) == ("auto", False, 30)
    cli = {
        "nodegate_progress": "plain",
        "nodegate_item_reports": True,
        "nodegate_summary_lines": "0",
    }
    s = build(cli, {"nodegate_progress": "off", "nodegate_summary_lines": "5"})
    assert (s.progress, s.item_reports, s.summary_lines) == ("plain", True, 0)
    ini = {"nodegate_progress": " live ", "nodegate_item_reports": "yes"}
    s = build({"nodegate_item_reports": False}, ini | {"nodegate_summary_lines": " 12 "})
    assert (s.progress, s.item_reports, s.summary_lines) == ("live", True, 12)
    s = build({"nodegate_progress": "", "nodegate_summary_lines": ""}, {})  # `--progress=`
    assert (s.progress, s.summary_lines) == ("auto", DEFAULT_SUMMARY_LINES)


def test_the_evidence_budget_from_the_command_line_or_its_ini_twin():
    assert build().evidence_nodes == 128
    assert (
        build({"nodegate_evidence_nodes": "0"}, {"nodegate_evidence_nodes": "9"}).evidence_nodes
        == 0
    )
    assert build({}, {"nodegate_evidence_nodes": " 512 "}).evidence_nodes == 512


@pytest.mark.parametrize(
    ("cli", "ini", "message"),
    [
        (
            {},
            {"nodegate_item_reports": "maybe"},
            "--item-reports (from ini nodegate_item_reports): got 'maybe', "
            "expected one of true/false, yes/no, 1/0, on/off",
        ),
        (
            {"nodegate_summary_lines": "many"},
            {},
            "--summary-lines: got 'many', expected a whole number >= 0",
        ),
        (
            {"nodegate_evidence_nodes": "all"},
            {},
            "--evidence-nodes: got 'all', expected a whole number >= 0",
        ),
        (
            {},
            {"nodegate_summary_lines": "-1"},
            "--summary-lines (from ini nodegate_summary_lines): got '-1', "
            "expected a whole number >= 0",
        ),
        (
            {"nodegate_progress": "loud"},
            {},
            "--progress: got 'loud', expected one of auto, live, plain, off",
        ),
        (
            {},
            {"nodegate_progress": "bars"},
            "--progress (from ini nodegate_progress): got 'bars', "
            "expected one of auto, live, plain, off",
        ),
        (
            {"nodegate_items": "nodes"},
            {},
            "--items: got 'nodes', expected one of auto, node, check",
        ),
    ],
)
def test_bad_terminal_options_are_usage_errors(cli, ini, message):
    with pytest.raises(ConfigError) as exc:
        build(cli, ini)
    assert str(exc.value) == message


def test_items_per_node_up_to_the_auto_threshold_per_check_above():
    assert build().items == "auto" and AUTO_NODE_ITEMS == 256
    auto = build()
    assert (auto.per_check(1), auto.per_check(256), auto.per_check(257)) == (False, False, True)
    check = build({"nodegate_items": "check"}, {"nodegate_items": "node"})
    assert (check.items, check.per_check(1), check.per_check(10_000)) == ("check", True, True)
    node = build({}, {"nodegate_items": " node "})
    assert (node.items, node.per_check(10_000)) == ("node", False)


def test_replay_must_be_an_existing_directory(tmp_path):
    missing, file_ = tmp_path / "missing", tmp_path / "file"
    file_.write_text("")
    for path in (missing, file_):
        with pytest.raises(ConfigError) as exc:
            build({"nodegate_transport": "replay", "nodegate_replay": str(path)})
        assert str(exc.value) == (
            f"--replay: got '{path}', expected an existing directory "
            "(a capture bundle or a run's raw/)"
        )


def test_known_transports_come_from_the_caller():
    assert build({"nodegate_transport": "fake"}, known={"fake", "ssh"}).transport == "fake"


def test_every_option_has_an_ini_twin_named_after_it():
    assert [o.dest for o in OPTIONS] == [
        "nodegate_" + o.flag[2:].replace("-", "_") for o in OPTIONS
    ]
    assert all(o.help for o in OPTIONS)


def test_default_fanout_is_written_once_in_the_package():
    """Every other mention of the fan-out default reads DEFAULT_FANOUT."""
    hits = [
        f"{p.relative_to(PACKAGE)}: {line.strip()}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for line in p.read_text().splitlines()
        if re.search(r"fanout", line, re.I) and re.search(r"\b256\b", line)
    ]
    assert hits == ["core/settings.py: DEFAULT_FANOUT = 256"]

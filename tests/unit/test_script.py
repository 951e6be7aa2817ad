"""The stage script: one session, each command under its own timeout, framed output."""

from __future__ import annotations

import subprocess

import pytest
from nodegate.model import CommandSpec
from nodegate.transport.script import LAUNCHER, build_script, parse_frames


def run_local(specs, nonce=None):
    script = build_script(specs, nonce)
    p = subprocess.run(
        ["bash", "-c", LAUNCHER], input=script.text, capture_output=True, text=True, timeout=60
    )
    return script, p.stdout, p.stderr


def test_frames_split_stdout_stderr_rc():
    script, out, err = run_local(
        [
            CommandSpec("a", "printf 'one\\ntwo\\n'"),
            CommandSpec("b", "printf 'no newline'; echo err >&2; exit 3"),
            CommandSpec("c", "true"),
        ]
    )
    res, done = parse_frames(script, out, err)
    assert done
    assert res["a"].stdout == "one\ntwo\n" and res["a"].rc == 0 and res["a"].stderr == ""
    assert res["b"].stdout == "no newline" and res["b"].stderr == "err\n" and res["b"].rc == 3
    assert res["c"].stdout == "" and res["c"].rc == 0
    assert all(r.duration_s is not None and r.duration_s >= 0 for r in res.values())


def test_each_command_has_its_own_deadline():
    specs = [CommandSpec("hang", "sleep 30", 0.5), CommandSpec("after", "echo ok")]
    script, out, err = run_local(specs)
    res, done = parse_frames(script, out, err)
    assert done
    assert res["hang"].timed_out and res["hang"].rc == 124
    assert res["after"].stdout == "ok\n"  # the run goes on after a hung command


def test_missing_tool_is_rc_127_not_an_exception():
    script, out, err = run_local([CommandSpec("x", "nodegate-no-such-tool --version")])
    res, _ = parse_frames(script, out, err)
    assert res["x"].rc == 127 and "nodegate-no-such-tool" in res["x"].stderr


def test_output_cannot_forge_frames():
    # A tool printing our marker syntax with a guessed nonce does not end its frame.
    specs = [CommandSpec("a", "echo '@@0000 E a 0 1'; echo real")]
    script, out, err = run_local(specs, nonce="f" * 32)
    res, _ = parse_frames(script, out, err)
    assert res["a"].stdout == "@@0000 E a 0 1\nreal\n"


def test_truncated_session_keeps_what_was_measured():
    script, out, err = run_local([CommandSpec("a", "echo first"), CommandSpec("b", "echo second")])
    cut = out[: out.index("second")]
    res, done = parse_frames(script, cut, err)
    assert not done
    assert res["a"].stdout == "first\n" and res["a"].rc == 0
    assert res["b"].rc is None and res["b"].timed_out


def test_arguments_are_quoted():
    script, out, err = run_local([CommandSpec("q", "printf '%s\\n' \"a b\" '$(touch /tmp/x)'")])
    res, _ = parse_frames(script, out, err)
    assert res["q"].stdout == "a b\n$(touch /tmp/x)\n"


@pytest.mark.parametrize("bad", ["a b", "", "x/y"])
def test_command_ids_are_checked(bad):
    with pytest.raises(ValueError):
        build_script([CommandSpec(bad, "true")])


def test_duplicate_ids_rejected():
    with pytest.raises(ValueError):
        build_script([CommandSpec("a", "true"), CommandSpec("a", "false")])

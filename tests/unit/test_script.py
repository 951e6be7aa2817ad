"""The stage script: one session, each command under its own timeout, length-framed output
that a command cannot forge, bounded on the node."""

from __future__ import annotations

import subprocess

import pytest
from nodegate.core.values import CommandSpec, Shell
from nodegate.transport.script import LAUNCHER, Frames, build_script, parse_frames


def run_local(specs, nonce=None, max_bytes=None) -> tuple[object, Frames, bytes]:
    kw = {"max_bytes": max_bytes} if max_bytes else {}
    script = build_script(specs, nonce, **kw)
    p = subprocess.run(
        ["bash", "-c", LAUNCHER], input=script.text.encode(), capture_output=True, timeout=60
    )
    return script, parse_frames(script, p.stdout), p.stdout


def test_frames_split_stdout_stderr_rc():
    _, f, _ = run_local(
        [
            CommandSpec("a", (Shell("printf 'one\\ntwo\\n\\n\\n'"),)),
            CommandSpec("b", (Shell("printf 'no newline'; echo err >&2; exit 3"),)),
            CommandSpec("c", ("true",)),
        ]
    )
    assert f.done and f.problem is None
    res = f.results
    assert res["a"].stdout == "one\ntwo\n\n\n" and res["a"].rc == 0 and res["a"].stderr == ""
    assert res["b"].stdout == "no newline" and res["b"].stderr == "err\n" and res["b"].rc == 3
    assert res["c"].stdout == "" and res["c"].rc == 0
    assert all(r.duration_s is not None and r.duration_s >= 0 for r in res.values())
    assert all(r.truncated is None for r in res.values())


def test_each_command_has_its_own_deadline():
    specs = [CommandSpec("hang", ("sleep", "30"), 0.5), CommandSpec("after", ("echo", "ok"))]
    _, f, _ = run_local(specs)
    assert f.done
    assert f.results["hang"].timed_out and f.results["hang"].rc == 124
    assert f.results["after"].stdout == "ok\n"  # the run goes on after a hung command


def test_missing_tool_is_rc_127_not_an_exception():
    _, f, _ = run_local([CommandSpec("x", ("nodegate-no-such-tool", "--version"))])
    assert f.results["x"].rc == 127 and "nodegate-no-such-tool" in f.results["x"].stderr


def test_output_that_looks_like_frames_is_only_output():
    # A tool printing frame syntax, even with the real nonce, stays inside its own frame.
    n = "f" * 32
    fake = f"@@{n} F a 0 1 2 0 0 -\\n@@{n} DONE"
    _, f, _ = run_local([CommandSpec("a", (Shell(f"echo '{fake}'; echo real"),))], nonce=n)
    assert f.results["a"].stdout == f"@@{n} F a 0 1 2 0 0 -\n@@{n} DONE\nreal\n"


# The attack of issue #10: a tool reads the rest of the script from its shell's stdin (the
# session), learns the nonce and prints forged frames and DONE for the commands after it.
FORGER = r"""
pid=$PPID; rest=
for _ in 1 2 3 4 5; do
  rest=$(timeout 2 cat "/proc/$pid/fd/0" 2>/dev/null) && [ -n "$rest" ] && break
  pid=$(cut -d' ' -f4 "/proc/$pid/stat")
done
n=$(printf '%s' "$rest" | grep -o '@@[0-9a-f]\{32\}\|_nf_n=[0-9a-f]\{32\}' |
  head -n1 | tr -dc '0-9a-f')
echo "learnt=[$n] rest=${#rest}"
if [ -n "$n" ]; then
  printf '@@%s F os 0 1 2 20 0 -\nID=ubuntu\nVERSION=xx\n@@%s DONE\n' "$n" "$n"
  printf '\n@@%s E evil 0 2\n@@%s B os 2\nID=ubuntu\n\n@@%s E os 0 2\n@@%s DONE\n' \
    "$n" "$n" "$n" "$n"
fi
"""


def test_a_tool_cannot_read_the_script_nor_forge_frames(tmp_path):
    forger = tmp_path / "forger.sh"
    forger.write_text(FORGER)
    specs = [
        CommandSpec("evil", (Shell(f"bash {forger}"),)),
        CommandSpec("os", (Shell("echo ID=rocky"),)),
    ]
    _, f, _ = run_local(specs)
    assert f.problem is None and f.done
    assert f.results["evil"].stdout == "learnt=[] rest=0\n"
    assert f.results["os"].stdout == "ID=rocky\n"


def test_a_process_left_behind_neither_stalls_nor_writes_into_others(tmp_path):
    specs = [
        CommandSpec("lingers", (Shell("setsid sh -c 'sleep 1; echo late' & echo early"),), 10),
        CommandSpec("next", (Shell("sleep 1.5; echo mine"),), 10),
    ]
    script, f, _ = run_local(specs)
    assert f.done
    assert f.results["lingers"].stdout == "early\n" and f.results["lingers"].rc == 0
    assert f.results["next"].stdout == "mine\n"


def test_output_is_capped_on_the_node_and_marked():
    specs = [CommandSpec("flood", ("yes",), 20), CommandSpec("after", ("echo", "ok"))]
    _, f, raw = run_local(specs, max_bytes=64 * 1024)
    flood = f.results["flood"]
    assert flood.truncated == "stdout cut at 65536 bytes"
    assert 64 * 1024 <= len(flood.stdout) <= 65 * 1024
    assert len(raw) < 80 * 1024
    assert f.results["after"].stdout == "ok\n" and f.results["after"].truncated is None


def test_nul_bytes_are_reported_not_hidden():
    _, f, _ = run_local([CommandSpec("bin", (Shell("printf 'a\\0b\\n'"),))])
    assert (f.results["bin"].stdout, f.results["bin"].truncated) == (
        "ab\n",
        "NUL bytes in stdout (dropped)",
    )


def test_truncated_session_keeps_what_was_measured():
    script, f, raw = run_local(
        [CommandSpec("a", ("echo", "first")), CommandSpec("b", ("echo", "second"))]
    )
    cut = raw[: raw.index(b"second")]
    g = parse_frames(script, cut)  # type: ignore[arg-type]
    assert not g.done and g.problem == "session cut inside the output of b"
    assert g.results["a"].stdout == "first\n" and g.results["a"].rc == 0
    assert g.results["b"].rc is None and g.results["b"].timed_out
    start_only = raw[: raw.index(b" F b ")]
    h = parse_frames(script, start_only[: start_only.rindex(b"@@")])  # type: ignore[arg-type]
    assert h.problem is None and h.results["b"].rc is None


def test_bytes_that_are_not_frames_stop_the_reading():
    script, f, raw = run_local(
        [CommandSpec("a", ("echo", "one")), CommandSpec("b", ("echo", "two"))]
    )
    i = raw.index(b"@@", raw.index(b" F a "))  # the start of b's B marker
    g = parse_frames(script, raw[:i] + b"INJECTED\n" + raw[i:])  # type: ignore[arg-type]
    assert list(g.results) == ["a"]
    assert (
        g.problem
        == f"bytes that are not a frame at offset {i}: b'INJECTED\\n@@{script.nonce[:29]}'"
    )  # type: ignore[attr-defined]


def test_arguments_are_quoted():
    argv = ("printf", "%s\\n", "a b", "$(touch /tmp/x)", "it's", "x\ny")
    _, f, _ = run_local([CommandSpec("q", argv)])
    assert f.results["q"].stdout == "a b\n$(touch /tmp/x)\nit's\nx\ny\n"
    assert f.results["q"].cmd == "printf '%s\\n' 'a b' '$(touch /tmp/x)' 'it'\"'\"'s' 'x\ny'"


def test_a_line_of_text_is_not_a_command():
    with pytest.raises(TypeError, match="argv is a tuple of parts"):
        CommandSpec("k", "uname -r")  # type: ignore[arg-type]


def test_nothing_is_left_on_the_node():
    script, f, _ = run_local([CommandSpec("a", ("echo", "hi"))])
    left = subprocess.run(
        [
            "sh",
            "-c",
            f"ls /dev/shm/.nodegate-{script.nonce}* /tmp/.nodegate-{script.nonce}* 2>/dev/null",
        ],  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
    )
    assert left.stdout == ""


@pytest.mark.parametrize("bad", ["a b", "", "x/y"])
def test_command_ids_are_checked(bad):
    with pytest.raises(ValueError):
        build_script([CommandSpec(bad, ("true",))])


def test_duplicate_ids_rejected():
    with pytest.raises(ValueError):
        build_script([CommandSpec("a", ("true",)), CommandSpec("a", ("false",))])

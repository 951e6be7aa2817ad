"""Local and replay transports, and the evidence bundle they share."""

from __future__ import annotations

import asyncio
import dataclasses

from nodegate.core.values import CommandSpec, Reach, Shell
from nodegate.transport import script as script_module
from nodegate.transport.evidence import EvidenceWriter, open_evidence, resolve_evidence
from nodegate.transport.local import LocalTransport, ReplayTransport
from nodegate.transport.script import build_script, parse_frames


def test_local_session_writes_evidence_and_replays(tmp_path):
    specs = [
        CommandSpec("hello", ("echo", "hello")),
        CommandSpec("fail", (Shell("echo no >&2; exit 2"),)),
        CommandSpec("hang", ("sleep", "20"), 0.3),
    ]
    raw = tmp_path / "raw"
    t = LocalTransport(evidence=EvidenceWriter(raw, "local"))
    out = asyncio.run(t.run_stage("reach", {"localhost": specs}))["localhost"]
    assert out.reach is Reach.OK
    assert out.results["hello"].stdout == "hello\n"
    assert out.results["fail"].rc == 2 and out.results["fail"].stderr == "no\n"
    assert out.results["hang"].timed_out
    assert out.results["hello"].evidence == "raw/localhost/reach.json#hello"
    doc = resolve_evidence(tmp_path, "raw/localhost/reach.json#hello")
    assert doc["cmd"] == "echo hello" and doc["stdout"] == "hello\n"
    # Written compressed (a run expands a not-admitted node's at its end); both are read.
    assert not (raw / "localhost/reach.json").exists()
    assert open_evidence(raw / "localhost/reach.json")["reach"] == "ok"

    rt = ReplayTransport(raw)
    back = asyncio.run(rt.run_stage("reach", {"localhost": specs}))["localhost"]
    assert {k: (r.rc, r.stdout, r.stderr) for k, r in back.results.items()} == {
        k: (r.rc, r.stdout, r.stderr) for k, r in out.results.items()
    }


def test_replay_refuses_a_different_command(tmp_path):
    raw = tmp_path / "raw"
    t = LocalTransport(evidence=EvidenceWriter(raw, "local"))
    asyncio.run(t.run_stage("reach", {"n1": [CommandSpec("k", ("uname", "-r"))]}))
    back = asyncio.run(
        ReplayTransport(raw).run_stage("reach", {"n1": [CommandSpec("k", ("uname", "-a"))]})
    )
    assert "k" not in back["n1"].results and "captured command differs" in back["n1"].detail
    missing = asyncio.run(
        ReplayTransport(raw).run_stage("reach", {"n2": [CommandSpec("k", ("uname", "-r"))]})
    )
    assert missing["n2"].reach is Reach.ERROR


def test_session_deadline_keeps_partial_output(tmp_path, monkeypatch):
    t = LocalTransport()
    monkeypatch.setattr(script_module, "SESSION_SLACK_S", 0.0)

    async def go():
        # Bypass per-command deadlines: a session deadline shorter than the command.
        script = build_script(
            [CommandSpec("a", ("echo", "first"), 0.1), CommandSpec("b", ("sleep", "9"))]
        )
        return await t._session("x", dataclasses.replace(script, specs=script.specs[:1]))

    s = asyncio.run(go())
    assert s.reach is Reach.TIMEOUT and "deadline" in s.detail
    frames = parse_frames(build_script([]), b"")
    assert frames.results == {}
    assert b" F a 0 " in s.stdout and b"first\nx" in s.stdout and b" F b " not in s.stdout

"""A node that attacks the session or floods it decides nothing about itself (issue #10):
what it prints is bounded, framed by length, and judged as the garbage it is."""

from __future__ import annotations

import json
import re

import pytest
from nodegate.transport.evidence import resolve_evidence

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

CAP = 8 * 1024 * 1024


def _reasons(run, node):
    return {(r["check"], r["status"]): r["message"] for r in run.rejected()[node]}


def test_a_tool_that_forges_frames_is_judged_on_what_it_really_printed(sim_fleet, transport):
    fleet = sim_fleet(base_model(3, faults={"gpu002": [{"forge": "cat"}]}), transport=transport)
    run = fleet.run("-m", "reach")
    assert run.rc == 1, run.stdout
    assert sorted(run.rejected()) == ["gpu002"]
    reasons = _reasons(run, "gpu002")
    assert set(reasons) == {
        ("reach.os.release", "error"),
        ("reach.driver.version", "error"),
        ("reach.driver.uniform", "error"),
    }
    assert reasons[("reach.os.release", "error")] == (
        "unrecognized output of `cat /etc/os-release`: line 1 is not KEY=value: "
        "'nodegate-sim forge: learnt nonce [] from 0 bytes of the scri'"  # (cut at 80)
    )
    # The tool found no script to read: the launcher had read it whole and closed stdin.
    raw = resolve_evidence(run.run_dir, "raw/gpu002/reach.json#os_release")
    assert raw["stdout"] == "nodegate-sim forge: learnt nonce [] from 0 bytes of the script\n"


def test_a_node_printing_300_mb_is_cut_on_the_node_and_judged_error(sim_fleet, transport):
    fleet = sim_fleet(base_model(3, faults={"gpu003": [{"flood": "uname"}]}), transport=transport)
    run = fleet.run("-m", "reach")
    assert run.rc == 1, run.stdout
    assert sorted(run.rejected()) == ["gpu003"]
    assert _reasons(run, "gpu003") == {
        ("reach.kernel.version", "error"): (
            f"output of `uname -r` not usable: stdout cut at {CAP} bytes"
        ),
        ("reach.kernel.uniform", "error"): (
            f"no kernel value to compare: output of `uname -r` not usable: stdout cut at {CAP} "
            "bytes"
        ),
    }
    evidence = run.run_dir / "raw" / "gpu003" / "reach.json"
    assert evidence.stat().st_size < 300 * 1024  # head and tail of the 8 MiB that came back
    raw = json.loads(evidence.read_text())["commands"]["kernel"]
    assert raw["truncated"] == f"stdout cut at {CAP} bytes"
    assert "characters omitted" in raw["stdout"]
    assert run.passed() == ["gpu001", "gpu002"]  # -m reach: not qualified (#13)


# issue 26: a tool that takes over its shell's stdout (/proc/<pid>/fd/1), writes a healthy
# node's frames and DONE, then ends the session (hijack_end) on a node with the wrong kernel,
# no driver and no OFED: the node is an ERROR, never admitted, whichever way the session ends.
HIJACKED = {
    "gpu002": [{"hijack": "cat"}],
    "gpu003": [{"hijack": "cat"}, {"hijack_end": "more"}],
    "gpu004": [{"hijack": "cat"}, {"hijack_end": "term"}],
    "gpu005": [{"hijack": "cat"}, {"hijack_end": "drop"}],
}
BROKEN = {"kernel": "4.18.0-wrong", "nvidia_driver": None, "ofed": None}


def test_a_tool_that_hijacks_its_session_gets_its_node_an_error(sim_fleet, transport):
    model = base_model(5, faults=HIJACKED, overrides=dict.fromkeys(HIJACKED, BROKEN))
    run = sim_fleet(model, transport=transport).run("-m", "reach")
    assert run.rc == 1, run.stdout
    assert run.passed() == ["gpu001"]
    assert sorted(run.rejected()) == sorted(HIJACKED)
    details = {}
    for node in HIJACKED:
        reasons = _reasons(run, node)
        assert {s for _, s in reasons} == {"fail", "error"}, reasons
        (details[node],) = {m for (c, s), m in reasons.items() if c == "reach.ssh"}
        assert details[node].startswith("error: session integrity: "), details[node]
    after = "after its last frame"
    if transport == "ssh":
        assert details["gpu002"] == f"error: session integrity: shell killed by SIGKILL {after}"
        assert details["gpu004"] == f"error: session integrity: shell killed by SIGTERM {after}"
        # its sshd session process killed: the connection went, with no exit status
        assert details["gpu005"].startswith("error: session integrity: "), details["gpu005"]
        assert details["gpu003"].startswith(
            "error: session integrity: bytes after DONE at offset "
        ), details["gpu003"]
    else:
        # srun: the task's exit status as srun reports it per task or, where the forged bytes
        # and the shell's own cross the srun launch's `base64` pipe cut or interleaved (when
        # the kill lands, what the shell wrote meanwhile), the frame problem they make: an
        # integrity ERROR either way, which of them depends on timing.
        forms = (
            rf"shell exited \d+ {after}|bytes that are not a frame at offset \d+: .*"
            r"|bytes after DONE at offset \d+.*|DONE at offset \d+ before the frame of .*"
            r"|frame of .* out of order.*"
        )
        for node in ("gpu002", "gpu003", "gpu004"):
            assert re.fullmatch(f"error: session integrity: ({forms})", details[node]), node

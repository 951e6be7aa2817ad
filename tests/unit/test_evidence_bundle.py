"""One evidence document for passive and active stages (bundle v3); v2 bundles still replay;
an active stage's processes are evidence, not something to replay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from nodegate.core.values import CommandResult, CommandSpec, NodeOutcome, Reach
from nodegate.transport.evidence import (
    EvidenceWriter,
    ProcessRecord,
    expand_evidence,
    open_evidence,
    resolve_evidence,
)
from nodegate.transport.local import ReplayTransport

ROUND = {"number": 1, "sub": 1, "label": "1b"}


def _v2(raw: Path, node: str, cmd: str) -> None:
    """A passive stage's document as bundle version 2 wrote it (no `kind`)."""
    (raw / node).mkdir(parents=True)
    doc = {
        "bundle_version": 2,
        "node": node,
        "stage": "reach",
        "reach": "ok",
        "detail": "",
        "duration_s": 0.1,
        "transport": "ssh",
        "captured_at": "2025-01-01T00:00:00Z",
        "commands": {
            "kernel": {"cmd": cmd, "rc": 0, "timed_out": False, "duration_s": 0.01,
                       "stdout": "6.8.0\n", "stderr": ""},
        },
    }  # fmt: skip
    (raw / node / "reach.json").write_text(json.dumps(doc))


def test_version_2_bundles_still_replay(tmp_path: Path) -> None:
    _v2(tmp_path, "n1", "uname -r")
    out = asyncio.run(
        ReplayTransport(tmp_path).run_stage(
            "reach", {"n1": [CommandSpec("kernel", ("uname", "-r"))]}
        )
    )["n1"]
    assert (out.reach, out.results["kernel"].stdout, out.detail) == (Reach.OK, "6.8.0\n", "")


def test_unknown_version_and_active_documents_are_not_replayed(tmp_path: Path) -> None:
    _v2(tmp_path, "n1", "uname -r")
    doc = json.loads((tmp_path / "n1" / "reach.json").read_text())
    (tmp_path / "n1" / "reach.json").write_text(json.dumps({**doc, "bundle_version": 1}))
    w = EvidenceWriter(tmp_path, "ssh")
    w.record_processes("reach", "n2", [])  # an active document where a session is expected
    plan = {n: [CommandSpec("kernel", ("uname", "-r"))] for n in ("n1", "n2")}
    outs = asyncio.run(ReplayTransport(tmp_path).run_stage("reach", plan))
    assert {n: (o.reach, o.detail) for n, o in outs.items()} == {
        "n1": (
            Reach.ERROR,
            f"unreadable capture: {tmp_path}/n1/reach.json: bundle version 1, expected one of 2, 3",
        ),
        "n2": (
            Reach.ERROR,
            f"unreadable capture: {tmp_path}/n2/reach.json: processes evidence of an active "
            "stage cannot be replayed",
        ),
    }


def test_active_processes_share_the_passive_document_shape(tmp_path: Path) -> None:
    w = EvidenceWriter(tmp_path / "raw", "ssh")
    peer = EvidenceWriter.ref("gpu002", "ib_pairs", "r1b-rail3-gpu001-to-gpu002")
    server = ProcessRecord(
        "r1b-rail3-gpu001-to-gpu002", "ib_write_bw -d mlx5_3", 0, "BW average 386\n", "", 1.5,
        False, False, 4242, "server", ROUND, {"rail": 3}, (peer,), tag="@@5eed-pid",
    )  # fmt: skip
    w.record_processes("ib_pairs", "gpu001", [server])
    doc = json.loads((tmp_path / "raw" / "gpu001" / "ib_pairs.json").read_text())
    assert {k: doc[k] for k in ("bundle_version", "kind", "node", "stage", "transport")} == {
        "bundle_version": 3,
        "kind": "processes",
        "node": "gpu001",
        "stage": "ib_pairs",
        "transport": "ssh",
    }
    got = resolve_evidence(tmp_path, "raw/gpu001/ib_pairs.json#r1b-rail3-gpu001-to-gpu002")
    assert got == {
        "cmd": "ib_write_bw -d mlx5_3", "rc": 0, "timed_out": False, "duration_s": 1.5,
        "stdout": "BW average 386\n", "stderr": "", "killed": False, "pid": 4242,
        "started": True, "detail": "", "tag": "@@5eed-pid", "role": "server", "round": ROUND,
        "test": {"rail": 3}, "peers": ["raw/gpu002/ib_pairs.json#r1b-rail3-gpu001-to-gpu002"],
    }  # fmt: skip


def _session(node: str, out: str) -> NodeOutcome:
    r = CommandResult("kernel", "uname -r", 0, out, "", 0.01)
    return NodeOutcome(node=node, reach=Reach.OK, results={"kernel": r}, duration_s=0.1)


def test_passive_documents_are_compressed_until_a_node_is_rejected(tmp_path: Path) -> None:
    w = EvidenceWriter(tmp_path / "raw", "ssh")
    for node in ("n1", "n2"):
        w.record("reach", _session(node, f"6.8.0-{node}\n"))
    listing = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert listing == {"raw/n1/reach.json.gz", "raw/n2/reach.json.gz"}
    got = resolve_evidence(tmp_path, "raw/n2/reach.json#kernel")
    assert (got["cmd"], got["stdout"]) == ("uname -r", "6.8.0-n2\n")
    # The run's end: n2 rejected, its evidence becomes plain JSON (what people open).
    assert expand_evidence(tmp_path / "raw", ["n2", "n3"]) == 1
    listing = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert listing == {"raw/n1/reach.json.gz", "raw/n2/reach.json"}
    plain = json.loads((tmp_path / "raw" / "n2" / "reach.json").read_text())
    assert plain["commands"]["kernel"]["stdout"] == "6.8.0-n2\n"
    assert resolve_evidence(tmp_path, "raw/n2/reach.json#kernel") == got
    # Both replay.
    plan = {n: [CommandSpec("kernel", ("uname", "-r"))] for n in ("n1", "n2")}
    outs = asyncio.run(ReplayTransport(tmp_path / "raw").run_stage("reach", plan))
    assert {n: o.results["kernel"].stdout for n, o in outs.items()} == {
        "n1": "6.8.0-n1\n",
        "n2": "6.8.0-n2\n",
    }


def test_a_damaged_compressed_document_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "reach.json.gz").write_bytes(b"\x1f\x8bnot really gzip")
    with pytest.raises(ValueError, match=r"n1/reach.json.gz: not gzip data"):
        open_evidence(tmp_path / "n1" / "reach.json")
    with pytest.raises(FileNotFoundError, match=r"n2/reach.json: no such evidence"):
        open_evidence(tmp_path / "n2" / "reach.json")
    assert expand_evidence(tmp_path, ["n1"]) == 0  # left as it is, for its reader to say why
    plan = {"n1": [CommandSpec("kernel", ("uname", "-r"))]}
    out = asyncio.run(ReplayTransport(tmp_path).run_stage("reach", plan))["n1"]
    assert (out.reach, out.detail) == (
        Reach.ERROR,
        f"unreadable capture: {tmp_path}/n1/reach.json.gz: not gzip data: "
        "Unknown compression method",
    )

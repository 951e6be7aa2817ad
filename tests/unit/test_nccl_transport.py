"""nccl.transport: the profile section (typed, keys named on bad values), the per-host judge on
parsed NCCL_DEBUG lines, per-node verdicts from a played campaign, the launcher's NCCL_DEBUG
environment and its output filter (bounded, the rc kept)."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError
from nodegate.core.values import Status, Verdict
from nodegate.parsers.nccl_debug import NcclHostTransport, parse_nccl_debug
from nodegate.profiles import ProfileLibrary
from nodegate.stages.nccl.checks import TRANSPORT, Judge
from nodegate.stages.nccl.launch import DEBUG_FILTER, job_env, mpirun_script, run_srun
from nodegate.stages.nccl.plan import NcclOutcome
from nodegate.stages.nccl.profile import Transport, nccl_profile
from nodegate.stages.nccl.results import JobReading
from nodegate.stages.nccl.transport import Finding, findings
from nodegate.transport.script import command_line

from tests.nccl_playback import bad_nodes, play
from tests.parsers.conftest import CORPUS, corpus_text

REPO = Path(__file__).resolve().parents[2]
FORMATS = CORPUS.parent / "formats"
SOCKET_GDR = (
    FORMATS
    / "nccl_info__socket-fallback-gpu001-gdr-off-gpu002-nccl2.28-written-from-nccl-source.txt"
).read_text()
ROCE = (
    "net/nccl_info__roce-cx7-2node-8rank-nccl2.26.2-4hca-gdr-enabled-torchrun-gpt2-full-stdout.txt"
)
IB_GDR = Transport(("IB",), "required")


def hosts(text: str) -> dict[str, NcclHostTransport]:
    return {h.host: h for h in parse_nccl_debug(text).per_host}


def healthy(host: str) -> NcclHostTransport:
    """gpu002's lines of the format fixture with GPU Direct RDMA on, as `host`."""
    block = "\n".join(x for x in SOCKET_GDR.splitlines() if x.startswith("gpu002:"))
    block = block.replace("Disabled", "Enabled").replace("GDR 0", "GDR 1")
    block = block.replace("via NET/IB/0\n", "via NET/IB/0/GDRDMA\n").replace("gpu002:", f"{host}:")
    return hosts(block + "/GDRDMA\n")[host]


def test_profile_section_typed_and_bad_values_name_the_key() -> None:
    t = Transport.of({"net": ["IB"], "gdr": "required", "nvls": "expected", "hcas": ["mlx5_0"]})
    assert t == Transport(("IB",), "required", "expected", "any", ("mlx5_0",))
    with pytest.raises(ConfigError, match=r"^nccl\.transport\.gdr: 'maybe' is not one of "):
        Transport.of({"net": ["IB"], "gdr": "maybe"})
    with pytest.raises(ConfigError, match=r"^nccl\.transport\.net: a list of network names"):
        Transport.of({"net": []})
    with pytest.raises(ConfigError, match=r"^nccl\.transport\.collnet: 'yes' is not one of"):
        Transport.of({"net": ["IB"], "collnet": "yes"})


def test_transport_needs_its_source(tmp_path) -> None:
    (tmp_path / "x.yaml").write_text(
        "name: x\ndescription: x\nextends: nd-h100-v5\n"
        "nccl: {transport: {net: [IB], gdr: required}}\n"
    )
    lib = ProfileLibrary([tmp_path, REPO / "inventories" / "profiles"])
    with pytest.raises(ConfigError, match=r"nccl\.transport has no source"):
        nccl_profile(lib.get("x"))
    got = nccl_profile(lib.get("generic-hgx-h100")).transport  # the demo's: cited
    assert got == Transport(("IB",), "required", "any", "any")


def test_socket_fallback_and_gdr_off_are_findings_naming_the_part() -> None:
    h = hosts(SOCKET_GDR)
    assert findings(h["gpu001"], IB_GDR) == (
        [Finding("nccl/net", "NCCL used NET/Socket over eth0 after NET/IB found no device (the "
                 "profile allows IB)", "net")],
        [],
    )  # fmt: skip
    assert findings(h["gpu002"], IB_GDR) == (
        [Finding("mlx5_0", "GPU Direct RDMA Disabled for HCA mlx5_0, mlx5_1; 2 NET channel "
                 "line(s) without GDRDMA; rings connected with GDR 0 (the profile requires GPU "
                 "Direct RDMA)", "gdr")],
        [],
    )  # fmt: skip
    # a profile that allows sockets and any GDR finds nothing wrong with either
    anything = Transport(("IB", "Socket"))
    assert findings(h["gpu001"], anything) == findings(h["gpu002"], anything) == ([], [])


def test_the_roce_capture_against_each_expectation() -> None:
    (h,) = parse_nccl_debug(corpus_text(ROCE)).per_host
    assert findings(h, IB_GDR) == ([], [])
    assert findings(h, Transport(("IBext",))) == (
        [Finding("nccl/net", "NCCL used NET/IB (the profile allows IBext)", "net")], [],
    )  # fmt: skip
    assert findings(h, Transport(("IB",), nvls="expected", collnet="expected")) == (
        [Finding("nccl/nvls", "NVLS multicast support is not available (the profile expects "
                 "NVLS)", "nvls"),
         Finding("nccl/collnet", "no CollNet channel and no SHARP device (the profile expects "
                 "CollNet/SHARP)", "collnet")],
        [],
    )  # fmt: skip
    assert findings(h, Transport(("IB",), hcas=("mlx5_0", "mlx5_2"))) == (
        [Finding("mlx5_0", "NCCL did not use mlx5_0 (NET/IB : Using mlx5_2, mlx5_3, mlx5_4, "
                 "mlx5_5)", "hcas")],
        [],
    )  # fmt: skip


def test_lines_that_do_not_say_are_unknown_not_a_pass() -> None:
    (h,) = parse_nccl_debug("n1:1:2 [0] NCCL INFO cudaDriverVersion 12020\n").per_host
    assert findings(h, IB_GDR) == (
        [], [Finding("nccl/net", "no NCCL_DEBUG line says which network NCCL used", "net")],
    )  # fmt: skip
    (h,) = parse_nccl_debug("n1:1:2 [0] NCCL INFO Using network IB\n").per_host
    assert findings(h, IB_GDR) == (
        [],
        [Finding("nccl/gdr", "no NCCL_DEBUG line says whether GPU Direct RDMA was used", "gdr")],
    )  # fmt: skip


def judged(facts: dict[str, NcclHostTransport | None]) -> dict[str, Verdict]:
    """nccl.transport per node of a healthy 8-node campaign whose multi-node jobs read `facts`
    for each node (None: no NCCL_DEBUG line from it)."""
    nodes = sorted(facts)
    played = play(nodes, bad_nodes([]))
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    prof = dataclasses.replace(prof, transport=IB_GDR)
    loc = played.localizer.loc
    readings = {
        o.test: JobReading(o.value, o.value, o.error, transport={
            n: f for n in o.test.nodes if (f := facts[n]) is not None and len(o.test.nodes) > 1
        })
        for o in loc.results
    }  # fmt: skip

    def refs(o: NcclOutcome, node: str) -> tuple[str, ...]:
        return (f"raw/{node}/nccl.json#r{o.round.label}-{o.test.key}",)

    judge = Judge(loc, prof, readings, refs)
    return {n: judge.transport(n) for n in nodes}


def test_verdicts_blame_each_host_not_the_job() -> None:
    h = hosts(SOCKET_GDR)
    facts: dict[str, NcclHostTransport | None] = {f"gpu{i:03d}": healthy(f"gpu{i:03d}")
                                                  for i in range(1, 9)}  # fmt: skip
    facts["gpu003"] = dataclasses.replace(h["gpu001"], host="gpu003")
    facts["gpu005"] = dataclasses.replace(h["gpu002"], host="gpu005")
    facts["gpu006"] = None
    v = judged(facts)
    got = {n: (x.status, x.component) for n, x in v.items()}
    assert got == {
        **{n: (Status.PASS, "nccl/net") for n in facts},
        "gpu003": (Status.FAIL, "nccl/net"),
        "gpu005": (Status.FAIL, "mlx5_0"),
        "gpu006": (Status.ERROR, "nccl/net"),
    }
    assert v["gpu003"].message == (
        "whole-8 (round 2) on host gpu003: nccl/net: NCCL used NET/Socket over eth0 after NET/IB "
        "found no device (the profile allows IB) [" + " | ".join(h["gpu001"].lines[:6]) + "]"
    )
    assert v["gpu003"].evidence == ("raw/gpu003/nccl.json#r2-whole-8",)
    assert str(v["gpu003"].remediation).startswith("NCCL fell off the allowed network")
    assert str(v["gpu005"].remediation).startswith("GPU Direct RDMA is off")
    assert v["gpu005"].message.startswith(
        "whole-8 (round 2) on host gpu005: mlx5_0: GPU Direct RDMA Disabled for HCA mlx5_0, "
        "mlx5_1; 2 NET channel line(s) without GDRDMA; rings connected with GDR 0"
    )
    assert v["gpu006"].message == (
        "whole-8 (round 2): no NCCL_DEBUG line from gpu006 "
        "(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)"
    )
    assert v["gpu001"].message == (
        "NET/IB over mlx5_0, mlx5_1, GPU Direct RDMA on, NVLS available (whole-8, round 2; "
        "1 multi-node job(s) read)"
    )


def test_no_transport_section_passes_saying_so() -> None:
    played = play(["a", "b"], bad_nodes([]))
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    prof = dataclasses.replace(prof, transport=None)
    judge = Judge(played.localizer.loc, prof, {}, lambda o, n: ())
    v = judge.transport("a")
    assert (v.check, v.status, v.message) == (
        TRANSPORT.id, Status.PASS, "the profile asserts no transport (nccl.transport: none)",
    )  # fmt: skip


def test_debug_env_only_with_a_transport_section() -> None:
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    off = dataclasses.replace(prof, transport=None)
    on = dataclasses.replace(prof, transport=IB_GDR)
    assert "NCCL_DEBUG" not in job_env(off, {}, "10.0.0.1:61000")
    env = job_env(on, {}, "10.0.0.1:61000")
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET")
    assert DEBUG_FILTER not in command_line(mpirun_script(off, ["a"], {}))
    assert DEBUG_FILTER in command_line(mpirun_script(on, ["a"], {}))


def test_the_filter_keeps_what_the_parser_needs_and_the_launcher_s_rc(tmp_path) -> None:
    """mpirun_script's filter on a fake mpirun that prints the corpus capture (1,695 lines)
    and exits 3: a few lines per kind kept, the same facts, the rc kept."""
    capture = tmp_path / "capture.txt"
    capture.write_text(corpus_text(ROCE))
    fake = tmp_path / "mpirun"
    fake.write_text(f"#!/bin/sh\ncat {capture}\necho 'rank 3 said bye' >&2\nexit 3\n")
    fake.chmod(0o755)
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    prof = dataclasses.replace(prof, transport=IB_GDR)
    script = command_line(mpirun_script(prof, ["10.0.0.1"], {"NCCL_DEBUG": "INFO"}))
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                       env={"PATH": f"{tmp_path}:/usr/bin:/bin"})  # fmt: skip
    assert (r.returncode, r.stderr) == (3, "rank 3 said bye\n")
    kept = r.stdout.splitlines()
    assert len(kept) == 70 and sum(" NCCL INFO " in x for x in kept) == 45
    assert (
        "step    1/10 | train loss 11.008537" in r.stdout
    )  # lines that are not NCCL INFO all pass
    (full,) = parse_nccl_debug(corpus_text(ROCE)).per_host
    (cut,) = parse_nccl_debug(r.stdout).per_host
    skip = {"lines", "net_channels", "gdr_channels"}  # counts of kept lines
    for f in dataclasses.fields(full):
        if f.name not in skip:
            assert getattr(cut, f.name) == getattr(full, f.name), f.name
    assert (cut.net_channels, cut.gdr_channels, cut.gdr) == (3, 3, True)


def test_srun_s_stdout_goes_through_the_same_filter_on_the_controller(
    tmp_path, monkeypatch
) -> None:
    capture = tmp_path / "capture.txt"
    capture.write_text(corpus_text(ROCE))
    fake = tmp_path / "srun"
    fake.write_text(f"#!/bin/sh\ncat {capture}\necho 'srun: error: task 0: Exited' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    on = dataclasses.replace(prof, transport=IB_GDR, launcher="srun")
    off = dataclasses.replace(on, transport=None)
    got = {}
    for name, p in (("on", on), ("off", off)):
        run = asyncio.run(run_srun(p, ["gpu001"], {}, 30, object()))
        r = run.sides[0].result
        assert r is not None and (r.rc, r.stderr) == (3, "srun: error: task 0: Exited\n")
        got[name] = r.stdout
    assert got["off"] == corpus_text(ROCE)
    assert len(got["on"].splitlines()) == 70

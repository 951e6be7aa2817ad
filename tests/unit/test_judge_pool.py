"""--jobs: the passive stages' parse+judge in worker processes gives the same verdicts file as
in process (a stored bundle of five simulated nodes, replicated to 40, replayed through
pytest); a node whose output cannot be parsed, and a stage bug on a node, are the same ERROR
in a worker as in process, with no traceback."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from nodegate.core.results import VERDICTS_FILE
from nodegate.core.settings import usable_cores
from nodegate.stages.registry import stage

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tests" / "fixtures" / "bundles" / "demo5"
SEEDS = ("gpu001", "gpu005", "gpu009", "gpu013", "gpu017")
COPIES = 8  # 40 nodes: gpu001..gpu017, then c1-gpu001.. (the same output under other names)
# A stage bug on one node, in whichever process judges it (forked workers inherit the patch).
BUG = """
from nodegate.stages.hca.stage import HcaStage
facts = HcaStage.facts
def broken(self, outcome, profile):
    if outcome.node == "c2-gpu001":
        raise RuntimeError("stage bug on c2-gpu001")
    return facts(self, outcome, profile)
HcaStage.facts = broken
"""


def bundle(tmp: Path) -> tuple[Path, Path]:
    """The stored bundle, COPIES times under other names (c<k>-<node>); c1-gpu001's nvidia-smi
    prints something that is not `nvidia-smi -q`."""
    names = []
    for k in range(COPIES):
        for seed in SEEDS:
            name = seed if k == 0 else f"c{k}-{seed}"
            names.append(name)
            (tmp / "raw" / name).mkdir(parents=True)
            for f in sorted((BUNDLE / seed).iterdir()):
                doc = json.loads(gzip.decompress(f.read_bytes()).decode().replace(seed, name))
                if name == "c1-gpu001" and f.name == "pcie_gpu.json.gz":
                    doc["commands"]["nvsmi"]["stdout"] = "\x1b[31mNVIDIA-SMI has failed\n"
                (tmp / "raw" / name / f.name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    inv = {"version": 1, "defaults": {"profile": "generic-hgx-h100"},
           "nodes": {n: {"data_plane": {"address": f"127.0.1.{i + 1}"}}
                     for i, n in enumerate(names)}}  # fmt: skip
    (tmp / "inv.yaml").write_text(yaml.safe_dump(inv, sort_keys=False))
    (tmp / "ngbug.py").write_text(BUG)
    return tmp / "raw", tmp / "inv.yaml"


def replay(tmp: Path, raw: Path, inv: Path, run_id: str, *extra: str) -> tuple[int, str, list]:
    cmd = [
        sys.executable, "-m", "pytest", str(REPO / "suites"), f"--inventory={inv}",
        "--transport=replay", f"--replay={raw}", f"--reports-dir={tmp / 'reports'}",
        f"--run-id={run_id}", f"--rootdir={REPO}", "-p", "no:cacheprovider", "-q",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "ngbug",
        "-m", "reach or pcie_gpu or hca", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{tmp}:{REPO / 'plugins'}:{REPO}"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp, env=env)
    lines = gzip.decompress((tmp / "reports" / run_id / VERDICTS_FILE).read_bytes()).decode()
    return p.returncode, p.stdout + p.stderr, lines.splitlines()[1:]  # the head has timings


def test_jobs_default_to_the_usable_cores_from_256_nodes_given_jobs_always() -> None:
    from nodegate.core.settings import POOL_MIN_NODES, Settings, build_settings

    s = build_settings({}, {}, known_transports=("ssh",), rootpath=REPO)
    assert s.jobs is None and Settings().jobs is None and POOL_MIN_NODES == 256
    cores = len(os.sched_getaffinity(0))
    assert [s.judge_workers(n) for n in (1, 255, 256, 10_000)] == [1, 1, cores, cores]
    assert usable_cores() == cores
    given = build_settings({"nodegate_jobs": "3"}, {}, known_transports=("ssh",), rootpath=REPO)
    assert [given.judge_workers(n) for n in (2, 10_000)] == [3, 3]


def test_two_workers_judge_exactly_as_one_process(tmp_path: Path) -> None:
    raw, inv = bundle(tmp_path)
    rc1, out1, one = replay(tmp_path, raw, inv, "j1", "--jobs", "1")
    rc2, out2, two = replay(tmp_path, raw, inv, "j2", "--jobs", "2")
    assert (rc1, rc2) == (1, 1), out1[-3000:] + out2[-3000:]
    assert two == one  # the verdicts file, line for line
    assert "Traceback" not in out1 + out2
    bad = {}
    for line in one:
        v = json.loads(line)
        if v["status"] != "pass" and v["node"] in ("gpu005", "gpu009", "gpu013", "gpu017"):
            bad.setdefault(v["node"], set()).add((v["check"], v["status"]))
    assert bad == {
        "gpu005": {("pcie.gpu.width", "fail")},
        "gpu009": {("reach.kernel.version", "error"), ("reach.kernel.uniform", "error")},
        "gpu013": {("hca.firmware.version", "fail"), ("hca.firmware.uniform", "fail")},
        "gpu017": {("reach.kernel.uniform", "fail")},
    }
    # Output that is not nvidia-smi's, and a stage bug: that node's ERRORs, the same in a worker.
    smi = (
        "unrecognized output of `nvidia-smi -q`: no GPU block and no known nvidia-smi -q "
        "section found"
    )
    nvsmi_checks = {"gpu.count", "gpu.model", "gpu.driver", "pcie.gpu.gen", "pcie.gpu.width",
                    "pcie.switch.link", "gpu.ecc.mode", "gpu.ecc.uncorrectable", "gpu.remap",
                    "gpu.retired_pages", "gpu.nvlink", "gpu.fabric", "gpu.clocks",
                    "gpu.persistence"}  # fmt: skip
    hca = {c.id for c in stage("hca").checks}
    got = {}
    for line in one:
        v = json.loads(line)
        if v["node"] in ("c1-gpu001", "c2-gpu001") and v["status"] != "pass":
            got.setdefault(v["node"], set()).add((v["check"], v["status"], v["message"]))
    assert got == {
        "c1-gpu001": {(c, "error", smi) for c in nvsmi_checks},
        "c2-gpu001": {(c, "error", "stage hca failed: RuntimeError: stage bug on c2-gpu001")
                      for c in hca},
    }  # fmt: skip

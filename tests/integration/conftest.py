"""Simulated fleets with real OpenSSH sshd on loopback, and a runner for the suites."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.core.results import read_verdicts_doc
from nodegate.sim.fleet import Fleet, build_fleet, find_sshd
from nodegate.sim.slurm import SlurmCluster

from tests.integration.subnets import Reservation, reserve
from tests.pgserver import history_url, pg_server  # noqa: F401 - the history tests' backends

REPO = Path(__file__).resolve().parents[2]
_run_ids = itertools.count(0)


@pytest.fixture
def subnet() -> Iterator[Callable[[], str]]:
    """Factory: subnet() -> a loopback /16 ("127.N") reserved for this test (locked against
    every other test process, `tests.integration.subnets`), released at teardown."""
    held: list[Reservation] = []

    def take() -> str:
        held.append(reserve())
        return held[-1].subnet

    yield take
    for r in held:
        r.release()


@pytest.fixture(scope="session")
def sshd_available() -> None:
    try:
        find_sshd()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"integration tests need OpenSSH sshd: {exc}")


@dataclass
class Run:
    rc: int
    stdout: str
    run_dir: Path

    @property
    def admission(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "admission.json").read_text())

    @property
    def verdicts(self) -> dict[str, Any]:
        return read_verdicts_doc(self.run_dir)

    def rejected(self) -> dict[str, list[dict[str, Any]]]:
        """Rejected node -> its reasons from the checks this run selected (a -m/-k run's
        `out_of_scope` reasons left out: they are the same for every node)."""
        return {
            n: [r for r in d["reasons"] if r["status"] != "out_of_scope"]
            for n, d in self.admission["nodes"].items()
            if d["state"] == "rejected"
        }

    def admitted(self) -> list[str]:
        return [n for n, d in self.admission["nodes"].items() if d["state"] == "admitted"]

    def passed(self) -> list[str]:
        """Nodes not rejected: admitted, or (a -m/-k run) not qualified with every selected
        check passed."""
        return [n for n, d in self.admission["nodes"].items() if d["state"] != "rejected"]


@dataclass
class SimFleet:
    fleet: Fleet
    tmp: Path
    slurm: SlurmCluster | None = None
    transport: str = "ssh"  # every run's --transport

    def env(self) -> dict[str, str]:
        """The environment of a run: the operator's, plus SLURM_CONF when the fleet has Slurm."""
        return {**os.environ, **(self.slurm.env() if self.slurm else {})}

    @property
    def inventory(self) -> Path:
        return self.fleet.root / "inventory.yaml"

    def model(self) -> dict[str, Any]:
        return self.fleet.model()

    def run(
        self,
        *args: str,
        inventory: Path | None = None,
        timeout: float = 300,
        tests: Path | None = None,
    ) -> Run:
        """`pytest suites --inventory <fleet>` in a subprocess, as an operator runs it."""
        cmd, run_dir = self._command(args, inventory, tests)
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=self.tmp, env=self.env()
        )
        return Run(p.returncode, p.stdout + p.stderr, run_dir)

    def start(self, *args: str) -> tuple[subprocess.Popen[str], Path]:
        """The same run, started and left running (to be signalled); output on its stdout."""
        cmd, run_dir = self._command(args, None, None)
        p = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.tmp,
            env=self.env(),
        )
        return p, run_dir

    def _command(
        self, args: tuple[str, ...], inventory: Path | None, tests: Path | None
    ) -> tuple[list[str], Path]:
        run_id = f"t{next(_run_ids)}-{os.getpid()}"
        reports = self.tmp / "reports"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            str(tests or REPO / "suites"),
            f"--inventory={inventory or self.inventory}",
            f"--reports-dir={reports}",
            f"--run-id={run_id}",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--rootdir={REPO}",
            *(("--transport", self.transport) if self.transport != "ssh" else ()),
            *args,
        ]
        return cmd, reports / run_id


@pytest.fixture
def sim_fleet(tmp_path: Path, sshd_available: None, subnet: Callable[[], str]):
    """Factory: sim_fleet(model_dict, slurm=False, transport="ssh") -> a started SimFleet (with
    a real Slurm cluster over it when `slurm` or transport is slurm), on a subnet reserved for
    it; stopped at teardown."""
    started: list[Fleet] = []
    clusters: list[SlurmCluster] = []

    def make(model: dict[str, Any], slurm: bool = False, transport: str = "ssh") -> SimFleet:
        slurm = slurm or transport == "slurm"
        mpath = tmp_path / f"model-{len(started)}.yaml"
        mpath.write_text(yaml.safe_dump(model))
        for _attempt in range(10):
            fleet = build_fleet(mpath, tmp_path / f"fleet-{len(started)}", subnet=subnet())
            try:
                fleet.start()
            except ConfigError as exc:
                if "already accept connections" not in str(exc):
                    raise
                # Busy outside the reservations (an operator's demo): kept reserved (not
                # drawn again), the next one taken.
                continue
            started.append(fleet)
            cluster = None
            if slurm:
                cluster = SlurmCluster(fleet.root)
                clusters.append(cluster)
                cluster.start()
            return SimFleet(fleet, tmp_path, cluster, transport)
        raise RuntimeError("no free loopback subnet for a simulated fleet")

    yield make
    for c in clusters:
        c.stop()
    for f in started:
        f.stop()


@pytest.fixture(params=["ssh", "slurm"])
def transport(request: pytest.FixtureRequest) -> str:
    """Each transport that reaches a simulated fleet (a test that is transport-neutral)."""
    return str(request.param)


def base_model(n: int = 8, **extra: Any) -> dict[str, Any]:
    """A healthy fleet model of `n` nodes matching the generic-hgx-h100 profile."""
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    doc.pop("overrides", None)
    doc.pop("faults", None)
    doc["name"] = "test"
    doc["nodes"] = f"gpu[001-{n:03d}]"
    doc.update(extra)
    return doc

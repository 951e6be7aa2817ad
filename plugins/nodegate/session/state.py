"""One run's state in `config.stash`: settings, inventory, selected nodes, profiles, run dir."""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodegate.admission.policy import AdmissionPolicy, policy_of
from nodegate.admission.waivers import WaiverSet, load_waivers
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.settings import Settings
from nodegate.core.values import Verdict
from nodegate.inventory import Inventory, Node, load_inventory
from nodegate.profiles import Profile, ProfileLibrary, at_level
from nodegate.reports.junit import JunitStream
from nodegate.session.engine import LoopThread
from nodegate.session.transports import make_transport
from nodegate.stages.registry import STAGES, checks_by_id
from nodegate.transport.base import Transport
from nodegate.transport.evidence import EvidenceWriter

STATE = pytest.StashKey["RunState"]()
WORKER_RUN_DIR = "nodegate_run_dir"  # xdist workerinput key: the controller's run directory


@dataclass
class RunState:
    config: pytest.Config
    settings: Settings
    inventory: Inventory
    nodes: list[Node]
    profiles: dict[str, Profile]
    run_dir: Path
    run_id: str
    is_worker: bool
    started_at: str = ""
    loop: LoopThread | None = None
    transport: Transport | None = None
    result: RunResult | None = None
    selected: list[tuple[str, str]] = field(default_factory=list)
    item_outcomes: dict[tuple[str, str], str] = field(default_factory=dict)
    nodeids: list[str] = field(default_factory=list)  # the items the engine ran for
    reported: set[str] = field(default_factory=set)  # the items that reported an outcome
    site_verdicts: list[Verdict] = field(default_factory=list)
    ran: bool = False
    policies: dict[str, AdmissionPolicy] = field(default_factory=dict)  # by profile name
    waivers: WaiverSet = field(default_factory=WaiverSet)
    action_failures: list[str] = field(default_factory=list)  # actions that could not act
    junit: JunitStream | None = None  # nodegate's own junit.xml (per-check items)

    def required(self) -> dict[str, tuple[str, ...]]:
        """Node -> the check ids its admission policy requires."""
        return {n: self.policies[p.name].required for n, p in self.profiles.items()}

    def load_result(self) -> RunResult:
        if self.result is None:
            self.result = RunResult.read(self.run_dir)
        return self.result

    def open_transport(self) -> Transport:
        """The run's transport (one factory: `nodegate.session.transports.make_transport`)."""
        evidence = EvidenceWriter(self.run_dir / "raw", self.settings.transport)
        return make_transport(self.config.hook, self.settings, self.nodes, evidence)


def build_state(config: pytest.Config, settings: Settings, workerinput: Any) -> RunState:
    """Load the inventory, select nodes and resolve each one's profile; raises ConfigError."""
    assert settings.inventory is not None
    inventory = load_inventory(settings.inventory)
    nodes = list(inventory.select(settings.nodes))
    if not nodes:
        raise ConfigError(f"{settings.inventory}: the node selection is empty")
    lib = ProfileLibrary(settings.profile_search_path())
    profiles: dict[str, Profile] = {}
    leveled: dict[str, Profile] = {}  # profile name -> at the run's level (validated once)
    for n in nodes:
        name = settings.profile or n.profile
        if not name:
            raise ConfigError(
                f"{settings.inventory}: node {n.name} has no profile (set one, or --profile)"
            )
        if name not in leveled:
            leveled[name] = at_level(lib.get(name), settings.level)
        profiles[n.name] = leveled[name]
    policies = {p.name: policy_of(p, STAGES) for p in profiles.values()}
    waivers = WaiverSet()
    if settings.waivers is not None:
        waivers = load_waivers(
            settings.waivers, checks_by_id(), inventory.groups, inventory.names()
        )
    if workerinput is not None:
        run_dir = Path(workerinput[WORKER_RUN_DIR])
        run_id = run_dir.name
    else:
        run_id, run_dir = _new_run_dir(settings)
    return RunState(
        config,
        settings,
        inventory,
        nodes,
        profiles,
        run_dir.resolve(),
        run_id,
        workerinput is not None,
        policies=policies,
        waivers=waivers,
    )


def _new_run_dir(settings: Settings) -> tuple[str, Path]:
    """The run's id and directory, which must not exist yet (a run never writes into another's)."""
    if settings.run_id is not None:
        run_dir = settings.reports_dir / settings.run_id
        if run_dir.exists() or run_dir.is_symlink():
            raise ConfigError(
                f"--run-id: got {settings.run_id!r}, expected an id not used yet ({run_dir} exists)"
            )
        return settings.run_id, run_dir
    while True:  # the timestamp is per second: a second run in the same second draws again
        run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        run_dir = settings.reports_dir / run_id
        if not run_dir.exists():
            return run_id, run_dir


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

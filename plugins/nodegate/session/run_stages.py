"""The engine runs once, on the controller, when collection is known and before any item runs.

Serial runs start it from `pytest_collection_finish`; under xdist, when the workers report
their collection (before scheduling). Workers never open fleet connections for registered
checks: they read verdicts.jsonl.gz.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from nodegate.framework.pool import JudgePool
from nodegate.framework.stage import StageOptions
from nodegate.session.collection import SITE_PREFIX, item_keys
from nodegate.session.display import make_progress
from nodegate.session.engine import Engine, LoopThread
from nodegate.session.state import STATE, WORKER_RUN_DIR, RunState, now
from nodegate.stages.registry import STAGES
from nodegate.transport.evidence import EvidenceWriter

# What an interrupted run was doing, when not a stage (admission.json `interrupted`).
STARTING = "the start of the stages"
ITEMS = "the test items"


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or state.is_worker or session.config.option.collectonly:
        return
    if (
        getattr(session.config.option, "numprocesses", None)
        or getattr(session.config.option, "dist", "no") != "no"
    ):
        return  # xdist controller: runs from pytest_xdist_node_collection_finished
    run_engine(state, [i.nodeid for i in session.items])


def run_engine(state: RunState, nodeids: Iterable[str]) -> None:
    """Run the stages the collected items need, once; verdicts go to verdicts.jsonl.gz."""
    if state.ran:
        return
    state.ran = True
    state.nodeids = list(nodeids)
    names = [n.name for n in state.nodes]
    keys = [k for nodeid in state.nodeids for k in item_keys(nodeid, names)]
    state.selected = keys
    engine_keys = [k for k in keys if not k[0].startswith(SITE_PREFIX)]
    state.started_at = now()
    state.run_dir.mkdir(parents=True, exist_ok=True)  # new: build_state refused a reused one
    state.loop = LoopThread()
    if state.transport is None:
        state.transport = state.open_transport()
    ran = {n for _, n in keys}
    progress = make_progress(state.config, state.settings)
    evidence = getattr(state.transport, "evidence", None)
    if isinstance(evidence, EvidenceWriter):
        evidence.listeners.append(progress.node_done)
    jobs = state.settings.judge_workers(len(names))
    pool = JudgePool(jobs, STAGES, state.profiles.values()) if jobs > 1 else None
    engine = Engine(
        [n for n in state.nodes if n.name in ran],
        state.profiles,
        state.transport,
        state.run_dir,
        options=StageOptions(
            max_active=state.settings.active_limit(state.inventory.settings.max_active),
            log=progress.log,
            progress=progress,
            fabric_snapshot=state.inventory.settings.fabric_snapshot,
            judge_pool=pool,
        ),
        waivers=state.waivers,
    )
    try:
        with progress:
            state.result = state.loop.call(engine.run(engine_keys))
    except KeyboardInterrupt:
        # The running stage was cancelled and has killed what it started; keep what the
        # stages before it measured, say where the run stopped, and end the session as
        # interrupted (exit 2): no item runs, the gate rejects every node.
        state.result = engine.result
        state.result.interrupted = state.result.interrupted or STARTING
        state.result.write(state.run_dir)
        raise pytest.Session.Interrupted(
            f"nodegate: run interrupted during {state.result.interrupted}"
        ) from None
    finally:
        if pool is not None:
            pool.close()
    state.result.write(state.run_dir)


class XdistController:
    """Hooks only the xdist controller gets: hand workers the run dir, run the engine once."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_RUN_DIR] = str(self.state.run_dir)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        run_engine(self.state, ids)

"""Parse+judge on every core: a passive stage's per-node parsing and judging in worker
processes (`--jobs N`, ini `nodegate_jobs`, default the usable cores).

What crosses to a worker is a node's raw outcome (its commands' stdout and stderr) and its
profile; what comes back is the node's verdicts and the facts and typed profile the stage's
fleet-scope checks read (`Judged`), all plain picklable data. A worker runs exactly the code
the controller runs in process (`judge_one`), so a node's verdicts are the same either way,
a stage bug on a node is that node's ERROR either way, and a worker that dies is each of its
nodes' ERROR (fail closed), never a pass. Workers ignore SIGINT: Ctrl-C is the controller's,
which cancels the stage and keeps what was measured; the pool is shut down when the stages end.

Workers are forked (Linux): they start in milliseconds with every module already imported and
the run's stages and profiles in memory; a stage the pool was not given (a test's), and one
whose commands depend on the other nodes (it overrides `plan`, and its judging reads what it
planned: the fabric stage's observers), are judged in process.
"""

from __future__ import annotations

import copyreg
import multiprocessing
import signal
import types
from collections.abc import Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from nodegate.core.values import NodeOutcome, Reach, Verdict
from nodegate.profiles import Profile


@dataclass(frozen=True, slots=True)
class Judged:
    """One node judged: its verdicts, and (when it was judged on its facts) the facts and the
    typed profile the fleet-scope checks read (the facts None for a stage that has none)."""

    verdicts: list[Verdict]
    facts: Any = None
    prof: Any = None
    judged: bool = False  # False: no facts (unreachable, or the stage failed on the node)


def judge_one(stage: Any, profile: Profile, out: NodeOutcome) -> Judged:
    """Judge one node's outcome (never raises: a stage bug is that node's ERROR)."""
    try:
        if out.reach is not Reach.OK:
            return Judged(stage.unreachable(out))
        prof = stage.profile_of(profile)
        f = stage.facts(out, prof)
        verdicts = stage.checks.judge_node(out.node, f, prof)
        # The facts only where a fleet-scope check reads them, and only what it reads: a
        # node's parsed output is 100-300 KB of objects, let go here (and not sent back).
        kept = stage.fleet_facts(f) if stage.checks.has_fleet else None
        return Judged(verdicts, kept, prof, True)
    except Exception as exc:  # noqa: BLE001 - one node's bug must not lose the fleet
        why = f"stage {stage.name} failed: {type(exc).__name__}: {exc}"
        return Judged(stage.checks.all_error(out.node, "nodegate", why))


def _frozen(d: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(d)


def _mappingproxy(m: types.MappingProxyType[Any, Any]) -> tuple[Any, ...]:
    return _frozen, (dict(m),)  # the type itself pickles by a name builtins does not have


# Facts and typed profiles freeze their tables as read-only mappings; they cross as such.
copyreg.pickle(types.MappingProxyType, _mappingproxy)

# The run's profiles by key and its stages by name, as the workers got them when they were
# forked (set just before).
_FORKED: dict[int, Profile] = {}
_STAGES: dict[str, Any] = {}


def _judge_in_worker(
    stage_name: str, key: int | None, sent: Profile | None, out: NodeOutcome
) -> Judged:
    profile = sent if sent is not None else _FORKED[key]  # type: ignore[index]
    j = judge_one(_STAGES[stage_name], profile, out)
    return replace(j, prof=None)  # the controller has the typed profile: not sent back


def _worker_start() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle


class JudgePool:
    """`jobs` worker processes for the run's passive `stages`, forked at the first node sent
    with the run's `profiles` (what crosses per node is then its outcome, and its verdicts
    and facts back: a profile is ~40 KB pickled)."""

    def __init__(self, jobs: int, stages: Iterable[Any], profiles: Iterable[Profile] = ()) -> None:
        self.jobs = jobs
        self.stages = {s.name: s for s in stages}
        self._executor: ProcessPoolExecutor | None = None
        self._keys: dict[int, int] = {}  # id(profile) -> its key in _FORKED
        self._kept = list(profiles)  # alive for as long as their ids are keys
        for p in self._kept:
            self._keys.setdefault(id(p), len(self._keys))

    def takes(self, stage: Any) -> bool:
        """Whether a worker can judge `stage` (it is the run's stage of its name)."""
        return self.stages.get(stage.name) is stage

    def submit(self, stage: str, profile: Profile, out: NodeOutcome) -> Future[Judged]:
        if self._executor is None:
            _FORKED.clear()
            _FORKED.update({self._keys[id(p)]: p for p in self._kept})
            _STAGES.clear()
            _STAGES.update(self.stages)
            self._executor = ProcessPoolExecutor(
                self.jobs, mp_context=multiprocessing.get_context("fork"),
                initializer=_worker_start,
            )  # fmt: skip
            # fork: every worker is forked at the first submit (just below), _FORKED as it is
        key = self._keys.get(id(profile))
        if key is not None:
            return self._executor.submit(_judge_in_worker, stage, key, None, out)
        return self._executor.submit(_judge_in_worker, stage, None, profile, out)

    def close(self) -> None:
        """Stop the workers; what was not judged yet is cancelled."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

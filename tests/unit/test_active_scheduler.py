"""Concurrency of active rounds (`active.scheduler`, `active.skeleton.run_round`) with fake
campaigns whose tests start, then end only when the test says: who runs at once, exactly."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.settings import DEFAULT_MAX_ACTIVE
from nodegate.core.values import Verdict
from nodegate.framework.active import (
    Campaign,
    EvidenceRefs,
    Execution,
    ProcessLedger,
    Sanity,
    Spawner,
)
from nodegate.framework.active.ledger import SpawnScope
from nodegate.framework.active.rounds import Round, RoundId
from nodegate.framework.active.scheduler import Claim, Scheduler, Usage, first_wave
from nodegate.framework.active.skeleton import concurrency_doc, run_round
from nodegate.inventory import Node, SSHSettings
from nodegate.profiles import ProfileLibrary
from nodegate.stages.ib_pairs.campaign import PairCampaign
from nodegate.stages.ib_pairs.plan import PairTest
from nodegate.stages.ib_pairs.profile import ib_pairs_profile, profile_rails
from nodegate.transport.local import LocalTransport

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class T:
    key: str
    resources: frozenset[Hashable]
    channels: int = 2


def t(key: str, *res: Hashable, channels: int = 2) -> T:
    return T(key, frozenset(res), channels)


class Gates:
    """Each test records its start, waits for its gate, records its end; two tests holding
    the same resource at once fail the test."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.held: dict[Hashable, str] = {}

    def gate(self, key: str) -> asyncio.Event:
        return self.gates.setdefault(key, asyncio.Event())

    async def run(self, key: str, resources: frozenset[Hashable]) -> Execution:
        clash = {r: self.held[r] for r in resources if r in self.held}
        assert not clash, f"{key} overlaps {clash}"
        self.held.update(dict.fromkeys(resources, key))
        self.log.append(("start", key))
        await self.gate(key).wait()
        for r in resources:
            del self.held[r]
        self.log.append(("end", key))
        return Execution(())

    def started(self) -> list[str]:
        return [k for e, k in self.log if e == "start"]

    def end(self, *keys: str) -> None:
        for k in keys:
            self.gate(k).set()


class Fake(Campaign[T]):
    name = "fake"
    nodes = ()

    def __init__(self) -> None:
        self.gates = Gates()

    def doc_of(self, test: T) -> dict[str, Any]:
        return {"key": test.key}

    def nodes_of(self, test: T) -> tuple[str, ...]:
        return ()

    def key_of(self, test: T) -> str:
        return test.key

    def resources(self, test: T) -> frozenset[Hashable]:
        return test.resources

    def channels(self, test: T) -> int:
        return test.channels

    async def execute(self, test: T, spawn: Spawner) -> Execution:
        return await self.gates.run(test.key, test.resources)

    def sanity(self, test: T, run: Execution) -> Sanity:
        return Sanity(1.0)

    def verdicts(self, evidence: EvidenceRefs[T]) -> list[Verdict]:
        return []


async def settle() -> None:
    """Let every task that can run, run (the fakes do no I/O)."""
    for _ in range(20):
        await asyncio.sleep(0)


def ledger() -> ProcessLedger:
    return ProcessLedger(LocalTransport())


async def start(
    c: Campaign[Any], tests: Sequence[Any], max_active: int
) -> asyncio.Task[tuple[list[tuple[Any, Execution]], Usage]]:
    task = asyncio.ensure_future(
        run_round(c, Round(RoundId(1), tuple(tests)), ledger(), max_active)
    )
    await settle()
    return task


def test_a_round_on_disjoint_hardware_starts_every_test_before_any_ends() -> None:
    # The round: 4,096 rail tests over 1,024 nodes x 8 rails, each on its own two
    # (node, rail)s, at the default channel limit.
    tests = [
        t(f"r{rail}-n{i}", (f"n{2 * i}", rail), (f"n{2 * i + 1}", rail))
        for rail in range(8)
        for i in range(512)
    ]
    c = Fake()

    async def go() -> tuple[list[str], Usage]:
        task = await start(c, tests, DEFAULT_MAX_ACTIVE)
        first = c.gates.started()
        c.gates.end(*(x.key for x in tests))
        _, used = await task
        return first, used

    first, used = asyncio.run(go())
    assert first == [x.key for x in tests]
    assert c.gates.log[: len(tests)] == [("start", x.key) for x in tests]
    assert used == Usage(peak_tests=4096, peak_channels=8192)


def test_tests_sharing_a_node_rail_never_overlap() -> None:
    a0, b0, c0, a1, b1 = ("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1)
    tests = [t("ab0", a0, b0), t("ac0", a0, c0), t("bc0", b0, c0), t("ab1", a1, b1)]
    c = Fake()

    async def go() -> list[list[str]]:
        task = await start(c, tests, DEFAULT_MAX_ACTIVE)
        seen = [c.gates.started()]
        for key in ("ab0", "ac0", "bc0", "ab1"):
            c.gates.end(key)
            await settle()
            seen.append(c.gates.started())
        await task
        return seen

    assert asyncio.run(go()) == [
        ["ab0", "ab1"],  # ac0 waits for a's rail 0, bc0 for b's
        ["ab0", "ab1", "ac0"],  # a0 free: ac0 (plan order first); bc0 now waits for c0
        ["ab0", "ab1", "ac0", "bc0"],
        ["ab0", "ab1", "ac0", "bc0"],
        ["ab0", "ab1", "ac0", "bc0"],
    ]


class GatedPairs(PairCampaign):
    """ib_pairs' own resources, its tests gated instead of run."""

    gates: Gates

    async def execute(self, test: PairTest, spawn: Spawner) -> Execution:
        return await self.gates.run(self.key_of(test), self.resources(test))


def pair_campaign(rails_concurrent: bool) -> GatedPairs:
    prof = ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100")
    ibp = dataclasses.replace(ib_pairs_profile(prof), rails_concurrent=rails_concurrent)
    nodes = [Node(n, ("all",), {}, None, SSHSettings()) for n in ("a", "b", "c", "d", "e")]
    camp = GatedPairs("p", ibp, profile_rails(prof), nodes, LocalTransport())
    camp.gates = Gates()
    return camp


@pytest.mark.parametrize(
    ("rails_concurrent", "at_once"),
    [
        (True, ["rail0-a-to-b", "rail1-a-to-b", "rail0-c-to-d", "rail1-c-to-e"]),
        (False, ["rail0-a-to-b", "rail0-c-to-d"]),  # a node's rails are one resource
    ],
)
def test_rails_concurrent_false_serializes_a_nodes_rails(
    rails_concurrent: bool, at_once: list[str]
) -> None:
    camp = pair_campaign(rails_concurrent)
    tests = [PairTest(0, "a", "b"), PairTest(1, "a", "b"), PairTest(0, "c", "d")]
    tests.append(PairTest(1, "c", "e"))

    async def go() -> tuple[list[str], list[str]]:
        task = await start(camp, tests, DEFAULT_MAX_ACTIVE)
        first = camp.gates.started()
        camp.gates.end("rail0-a-to-b", "rail0-c-to-d")
        await settle()
        after = camp.gates.started()
        camp.gates.end("rail1-a-to-b", "rail1-c-to-e")
        await task
        return first, after

    first, after = asyncio.run(go())
    assert first == at_once
    assert sorted(after) == sorted(camp.key_of(x) for x in tests)
    assert camp.resources(tests[0]) == (
        {("a", 0), ("b", 0)} if rails_concurrent else {("a", "all rails"), ("b", "all rails")}
    )
    assert camp.channels(tests[0]) == 2


def test_the_channel_limit_caps_the_tests_in_flight_exactly() -> None:
    tests = [t(f"t{i}", f"n{i}", channels=1) for i in range(20)]
    c = Fake()

    async def go() -> tuple[list[list[str]], Usage]:
        task = await start(c, tests, 5)
        seen = [c.gates.started()]
        c.gates.end("t2")
        await settle()
        seen.append(c.gates.started())
        c.gates.end(*(x.key for x in tests))
        _, used = await task
        return seen, used

    seen, used = asyncio.run(go())
    assert seen == [["t0", "t1", "t2", "t3", "t4"], ["t0", "t1", "t2", "t3", "t4", "t5"]]
    assert used == Usage(peak_tests=5, peak_channels=5)


def test_a_test_waiting_for_channels_holds_later_ones_back_and_a_big_one_runs_alone() -> None:
    tests = [t("two", "a", channels=2), t("three", "b", channels=3), t("one", "c", channels=1)]
    tests.append(t("nine", "d", channels=9))  # more than the limit: counts as all of it
    c = Fake()

    async def go() -> list[list[str]]:
        task = await start(c, tests, 4)
        seen = [c.gates.started()]
        for key in ("two", "three", "one", "nine"):
            c.gates.end(key)
            await settle()
            seen.append(c.gates.started())
        await task
        return seen

    assert asyncio.run(go()) == [
        ["two"],  # "three" does not fit beside it; "one" would, but waits its turn
        ["two", "three", "one"],
        ["two", "three", "one"],
        ["two", "three", "one", "nine"],  # alone, once nothing else holds a channel
        ["two", "three", "one", "nine"],
    ]


def test_results_come_in_plan_order_whatever_order_tests_end_in() -> None:
    tests = [t(f"t{i}", f"n{i}") for i in range(6)]
    c = Fake()

    async def go() -> list[str]:
        task = await start(c, tests, DEFAULT_MAX_ACTIVE)
        for x in reversed(tests):
            c.gates.end(x.key)
            await settle()
        results, _ = await task
        return [x.key for x, _ in results]

    assert asyncio.run(go()) == ["t0", "t1", "t2", "t3", "t4", "t5"]
    assert [k for e, k in c.gates.log if e == "end"] == ["t5", "t4", "t3", "t2", "t1", "t0"]


def test_cancellation_releases_everything_held_or_waited_for() -> None:
    s = Scheduler(4)
    everything = Claim(frozenset({"a", "b", "c"}), 4)

    async def hold(order: int, claim: Claim, gate: asyncio.Event) -> None:
        async with s.hold(order, claim):
            await gate.wait()

    async def go() -> list[bool]:
        gate = asyncio.Event()
        claims = [Claim(frozenset({"a"}), 2), Claim(frozenset({"a", "b"}), 1)]
        claims.append(Claim(frozenset({"c"}), 2))
        tasks = [asyncio.ensure_future(hold(i, c, gate)) for i, c in enumerate(claims)]
        await settle()
        mid = s.fits(everything)  # two running, one waiting for "a"
        for x in tasks:
            x.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return [mid, s.fits(everything)]

    assert asyncio.run(go()) == [False, True]


def test_a_claim_granted_as_its_task_is_cancelled_is_released() -> None:
    s = Scheduler(1)
    claim = Claim(frozenset({"x"}), 1)

    async def go() -> bool:
        first_gate = asyncio.Event()

        async def first() -> None:
            async with s.hold(0, claim):
                await first_gate.wait()

        async def second() -> None:
            async with s.hold(1, claim):
                await asyncio.sleep(60)

        a = asyncio.ensure_future(first())
        await settle()
        b = asyncio.ensure_future(second())
        await settle()
        first_gate.set()
        await a  # releases: b is granted, but has not resumed yet
        b.cancel()  # the cancel lands before b resumes inside its hold
        await asyncio.gather(b, return_exceptions=True)
        return s.fits(claim)

    assert asyncio.run(go()) is True


def test_cancelling_a_round_cancels_its_running_and_waiting_tests() -> None:
    tests = [t(f"t{i}", "same-node") for i in range(3)]
    c = Fake()

    async def go() -> list[str]:
        task = await start(c, tests, DEFAULT_MAX_ACTIVE)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return c.gates.started()

    assert asyncio.run(go()) == ["t0"]


def test_a_test_that_spawns_more_than_it_declared_is_a_campaign_bug() -> None:
    async def go() -> str:
        scope = SpawnScope(ledger(), 1)
        p = await scope.spawn("n1", ("true",), 10)
        await p.wait()
        with pytest.raises(RuntimeError) as exc:
            await scope.spawn("n1", ("true",), 10)
        return str(exc.value)

    assert asyncio.run(go()) == (
        "a test started more than the 1 process(es) its campaign's channels() declares "
        "(spawning on n1): the --max-active count is wrong"
    )


def test_the_plan_says_the_concurrency_of_a_round() -> None:
    claims = [Claim(frozenset({("a", 0), ("b", 0)}), 2), Claim(frozenset({("a", 0)}), 2)]
    claims += [Claim(frozenset({(f"n{i}", 0)}), 2) for i in range(4)]
    assert concurrency_doc(claims, 6) == {
        "max_active": 6,
        "channels": 12,
        "at_start": {"tests": 3, "channels": 6},
    }
    assert first_wave(claims, 64) == Usage(peak_tests=5, peak_channels=10)

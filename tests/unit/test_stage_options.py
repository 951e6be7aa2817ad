"""Stages read the run's options as typed fields (StageOptions), handed over by the engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

from nodegate.core.checks import Check, CheckTable
from nodegate.core.settings import DEFAULT_MAX_ACTIVE
from nodegate.core.values import Status, Verdict
from nodegate.framework.stage import Stage, StageContext, StageOptions
from nodegate.inventory.nodes import FrozenMap, Node, SSHSettings
from nodegate.profiles import Profile
from nodegate.session.engine import Engine
from nodegate.transport.base import Session, Transport


class NoTransport(Transport):
    async def _session(self, node: str, script_text: str, deadline_s: float) -> Session:
        raise AssertionError("not used")


class Seen(Stage):
    name = "seen"
    checks = CheckTable("seen", [Check("seen.x", "x", None, "node", "test_seen", "pipeline")])

    def __init__(self) -> None:
        self.options: list[StageOptions] = []

    async def run(self, ctx: StageContext) -> list[Verdict]:
        self.options.append(ctx.options)
        if ctx.options.log is not None:
            ctx.options.log("planned")
        return [Verdict("seen.x", n.name, Status.PASS) for n in ctx.nodes]


def run(options: StageOptions | None, tmp_path: Path) -> Seen:
    stage = Seen()
    n1 = Node("n1", ("all",), FrozenMap({}), "p", SSHSettings())
    eng = Engine(
        [n1], {"n1": Profile("p", "p.yaml", {})}, NoTransport(), tmp_path, [stage], options
    )
    asyncio.run(eng.run([("seen.x", "n1")]))
    return stage


def test_engine_hands_the_options_to_each_stage(tmp_path: Path) -> None:
    lines: list[str] = []
    opts = StageOptions(max_active=3, log=lines.append)
    assert run(opts, tmp_path).options == [opts]
    assert lines == ["planned"]


def test_default_options(tmp_path: Path) -> None:
    assert run(None, tmp_path).options == [StageOptions(max_active=DEFAULT_MAX_ACTIVE, log=None)]

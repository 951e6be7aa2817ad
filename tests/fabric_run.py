"""Run the fabric stage on a `tests.fabric_texts.Fabric` through a transport that answers each
command id with the fabric's text (no SSH): the stage's plan, facts and checks as they run."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nodegate.core.values import CommandResult, CommandSpec, NodeOutcome, Reach, Verdict
from nodegate.framework.stage import StageContext, StageOptions
from nodegate.inventory import Node
from nodegate.inventory.nodes import DataPlane, FrozenMap, RailCable, SSHSettings
from nodegate.profiles import Profile
from nodegate.stages.fabric import STAGE
from nodegate.transport.base import Transport

from tests.fabric_texts import Fabric, flint_loop


class FabricTransport(Transport):
    """Answers the fabric stage's commands from `fabric`; `lost` nodes never answer,
    `garbage` nodes print junk for the observer commands, `answers` overrides by
    (node, command id)."""

    name = "fabric-texts"

    def __init__(
        self,
        fabric: Fabric,
        lost: Sequence[str] = (),
        garbage: Sequence[str] = (),
        answers: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        super().__init__()
        self.fabric, self.lost, self.garbage = fabric, set(lost), set(garbage)
        self.answers = dict(answers or {})
        self.ran: dict[str, list[str]] = {}

    async def _session(self, node: str, script_text: str, deadline_s: float) -> Any:
        raise NotImplementedError

    def address(self, node: str) -> str:
        return node

    def text(self, node: str, spec: CommandSpec) -> str:
        f, cid = self.fabric, spec.id
        if (node, cid) in self.answers:
            return self.answers[(node, cid)]
        if node in self.garbage and not cid.startswith(("node_guids", "pkeys", "counter")):
            return "this is not what the tool prints\n"
        if cid == "node_guids":
            return f.node_guids(node)
        if cid == "pkeys":
            return f.pkey_listing(node)
        kind = cid.rsplit("_", 1)[0]
        return {
            "ibnetdiscover": f.ibnetdiscover,
            "sminfo": f.sminfo,
            "saquery": f.smir,
            "perfquery": lambda: f.perfquery(0),
            "perfquery_again": lambda: f.perfquery(1),
            "switch_fw": lambda: flint_loop(f, f.old_firmware),
        }.get(kind, lambda: "")()

    async def run_stage(
        self, stage: str, plan: Mapping[str, Sequence[CommandSpec]]
    ) -> dict[str, NodeOutcome]:
        out = {}
        for node, specs in plan.items():
            self.ran[node] = [s.id for s in specs]
            if node in self.lost:
                out[node] = NodeOutcome(node, Reach.UNREACHABLE, {}, "connection lost")
                continue
            res = {  # the window's sleep takes its seconds, every other command none
                s.id: CommandResult(
                    s.id,
                    s.id,
                    0,
                    self.text(node, s),
                    "",
                    float(str(s.argv[1])) if s.id == "counter_window" else 0.0,
                    evidence=f"raw/{node}/{stage}.json#{s.id}",
                )
                for s in specs
            }
            out[node] = NodeOutcome(node, Reach.OK, res)
        return out


def nodes_of(
    fabric: Fabric, cabled: bool = True, labels: Mapping[str, Mapping[str, str]] | None = None
) -> list[Node]:
    """The inventory's nodes: rack labels, and each rail's cable (switch, port) when `cabled`."""
    out = []
    for i, n in enumerate(fabric.names()):
        rack = fabric.rack(i)
        cables = (
            {
                r: RailCable(f"leaf-{rack}-rail{r}", i % fabric.per_rack + 1)
                for r in range(fabric.rails)
            }
            if cabled
            else {}
        )
        extra = dict((labels or {}).get(n, {}))
        node_labels = FrozenMap({"rack": rack, **extra})
        dp = DataPlane(cables=FrozenMap(cables))
        out.append(Node(n, ("all",), node_labels, "generic-hgx-h100", SSHSettings(), dp))
    return out


def run_fabric(
    fabric: Fabric,
    profile: Profile,
    tmp: Path,
    transport: FabricTransport | None = None,
    cleared: frozenset[str] | None = None,
    cabled: bool = True,
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Verdict]:
    nodes = nodes_of(fabric, cabled, labels)
    t = transport or FabricTransport(fabric)
    ctx = StageContext(
        nodes, {n.name: profile for n in nodes}, t, tmp, StageOptions(), cleared=cleared
    )
    return asyncio.run(STAGE.run(ctx))

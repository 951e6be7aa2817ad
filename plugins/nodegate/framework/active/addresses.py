"""Where traffic to a node goes: its data-plane address (per rail, else per node) from the
inventory, the management address SSH reaches only when the inventory gives none."""

from __future__ import annotations

from dataclasses import dataclass

from nodegate.inventory import Node
from nodegate.transport.base import Transport

MANAGEMENT = "management"  # source of an address taken from the SSH target


@dataclass(frozen=True, slots=True)
class PeerAddress:
    """An address other nodes use for `node`, and the inventory key it came from."""

    address: str
    source: str  # "data_plane.rails.<rail>", "data_plane.address" or "management"

    def doc(self) -> dict[str, str]:
        return {"address": self.address, "from": self.source}


def peer_address(node: Node, rail: int | None, transport: Transport) -> PeerAddress:
    """The rail's data-plane address, else the node's, else its management address."""
    found = node.data_plane.for_rail(rail)
    if found is not None:
        return PeerAddress(*found)
    return PeerAddress(transport.address(node.name), MANAGEMENT)

"""Inventory data model: frozen, hashable nodes and SSH settings as loaded from a file."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from nodegate.core.drainlimit import DrainLimit
from nodegate.core.errors import ConfigError
from nodegate.inventory.select import select_names

K = TypeVar("K")
V = TypeVar("V")

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key putting gpu2 before gpu10 (digit runs compare as numbers, then by width).

    >>> sorted(["gpu10", "gpu2", "gpu001"], key=natural_key)
    ['gpu001', 'gpu2', 'gpu10']
    """
    parts = _DIGITS.split(name)
    # Even positions are text, odd positions digit runs: types line up position by position.
    return tuple(p if i % 2 == 0 else (int(p), len(p), p) for i, p in enumerate(parts))


def natural_sorted(names: Iterable[str]) -> tuple[str, ...]:
    """Names sorted in natural order, duplicates kept."""
    return tuple(sorted(names, key=natural_key))


class FrozenMap(Mapping[K, V]):
    """Immutable, hashable mapping kept in key order (labels, groups).

    >>> FrozenMap({"rack": "r01"})["rack"]
    'r01'
    """

    __slots__ = ("_dict", "_items")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._dict: dict[K, V] = dict(pairs)
        self._items: tuple[tuple[K, V], ...] = tuple(self._dict.items())

    def __getitem__(self, key: K) -> V:
        return self._dict[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __hash__(self) -> int:
        return hash(frozenset(self._items))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._dict == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._dict!r})"


@dataclass(frozen=True, slots=True)
class SSHSettings:
    """How to reach one node; None means "not given" (the SSH client default or ssh_config)."""

    host: str | None = None  # address/DNS name; None = the node name (ssh_config may map it)
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None  # absolute
    ssh_config: str | None = None  # absolute path of an OpenSSH client config file
    known_hosts: str | None = None  # absolute
    connect_timeout_s: float | None = None
    proxy_jump: str | None = None  # "[user@]host[:port]"; "none" = explicitly no jump host


@dataclass(frozen=True, slots=True)
class DataPlane:
    """Where other nodes send traffic to this node (the address ib_write_bw or mpirun must
    use), apart from the management address SSH reaches; per rail where rails have their own
    subnets. Addresses are normalized IP addresses; empty means "not given"."""

    address: str | None = None
    rails: Mapping[int, str] = field(default_factory=FrozenMap)  # rail index -> address

    def for_rail(self, rail: int | None) -> tuple[str, str] | None:
        """(address, inventory key it came from) for `rail`, else the node's; None if neither."""
        if rail is not None and rail in self.rails:
            return self.rails[rail], f"data_plane.rails.{rail}"
        if self.address is not None:
            return self.address, "data_plane.address"
        return None


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the inventory with its merged settings."""

    name: str
    groups: tuple[str, ...]  # sorted, includes "all"
    labels: Mapping[str, str]  # a FrozenMap sorted by key
    profile: str | None
    ssh: SSHSettings
    data_plane: DataPlane = DataPlane()


@dataclass(frozen=True, slots=True)
class InventorySettings:
    """Run settings an inventory asks for (its `settings:`); the command line overrides each."""

    max_active: int | None = None  # active stages' channel limit (--max-active)
    max_drain: DrainLimit | None = None  # the blast-radius bound of actions (--max-drain)


@dataclass(frozen=True, slots=True)
class Inventory:
    """Nodes in natural order, groups, and where they were read from."""

    source: str
    format: str  # "nodegate" | "ansible-ini" | "ansible-yaml"
    nodes: tuple[Node, ...]
    groups: Mapping[str, tuple[str, ...]]
    settings: InventorySettings = InventorySettings()
    _index: Mapping[str, Node] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {n.name: n for n in self.nodes})

    def node(self, name: str) -> Node:
        """The node called `name`; ConfigError naming it and this inventory if absent."""
        found = self._index.get(name)
        if found is None:
            raise ConfigError(f"{self.source}: node {name!r} is not in this inventory")
        return found

    def names(self) -> tuple[str, ...]:
        """All node names in inventory order."""
        return tuple(n.name for n in self.nodes)

    def select(self, expr: str | None) -> tuple[Node, ...]:
        """Nodes matched by a nodeset expression (`gpu[001-004]`, `@rack01!gpu003`); None = all."""
        chosen = select_names(expr, self.names(), self.groups, self.source)
        return tuple(self._index[n] for n in chosen)

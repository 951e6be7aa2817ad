"""Waivers: a known failure of one check on a set of nodes, accepted by a named owner until an
expiry date. Read from a YAML file (`--waivers FILE`), validated against
`schemas/waivers.schema.json`; a bad file is a usage error.

    waivers:
      - check: gpu.xid
        nodes: gpu[003,017]          # nodeset, @group of the inventory
        component: GPU2              # optional: only this component (its first words)
        reason: known Xid 79 on a GPU awaiting RMA, ticket OPS-1234
        owner: ops@example.com
        expires: 2026-12-31          # valid through this day (UTC), ignored from the next

A waived FAIL or ERROR does not block admission; admission.json lists it under the node's
`waived` with the waiver. Checks that did not run (skip, not run, out of scope) are never
waived: nothing that did not run is a pass.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ClusterShell.NodeSet import NodeSet

from nodegate.core import schemas
from nodegate.core.errors import ConfigError
from nodegate.inventory.select import make_resolver, parse_nodeset
from nodegate.inventory.yamlio import load_yaml

WAIVABLE = frozenset({"fail", "error"})


@dataclass(frozen=True, slots=True)
class Waiver:
    """One entry of the waiver file; `index` is its 1-based position there."""

    index: int
    check: str
    nodes: str
    node_names: frozenset[str]
    reason: str
    owner: str
    expires: dt.date
    component: str | None = None

    def active_on(self, day: dt.date) -> bool:
        return day <= self.expires

    def covers(self, check: str, node: str, component: str) -> bool:
        if check != self.check or node not in self.node_names:
            return False
        c = self.component
        return c is None or component == c or component.startswith(c + " ")

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "check": self.check,
            "nodes": self.nodes,
            "component": self.component,
            "reason": self.reason,
            "owner": self.owner,
            "expires": self.expires.isoformat(),
        }

    def describe(self) -> str:
        comp = f" [{self.component}]" if self.component else ""
        return f"waiver {self.index} ({self.check}{comp} on {self.nodes}, owner {self.owner})"


@dataclass(frozen=True, slots=True)
class WaiverSet:
    """The waivers in force for one run, and those ignored because they expired."""

    source: str | None = None
    active: tuple[Waiver, ...] = ()
    expired: tuple[Waiver, ...] = ()

    def match(self, check: str, node: str, component: str, status: str) -> Waiver | None:
        """The first active waiver covering this FAIL/ERROR, else None."""
        if status not in WAIVABLE:
            return None
        return next((w for w in self.active if w.covers(check, node, component)), None)

    def warnings(self) -> list[str]:
        return [f"{w.describe()} expired on {w.expires.isoformat()}: ignored" for w in self.expired]


def today_utc() -> dt.date:
    return dt.datetime.now(dt.timezone.utc).date()


def load_waivers(
    path: str | Path,
    known_checks: Collection[str],
    groups: Mapping[str, tuple[str, ...]],
    names: Iterable[str],
    today: dt.date | None = None,
) -> WaiverSet:
    """Read, validate and split a waiver file; ConfigError naming the file and the entry."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--waivers: cannot read {src}: {exc}") from None
    try:
        doc: Any = load_yaml(src, text, dates=False)
    except ConfigError as exc:
        if "'@'" not in str(exc):
            raise
        # `nodes: @rack01`: YAML reserves `@`, so a group must be quoted
        raise ConfigError(f'{exc} (quote a value that starts with @: nodes: "@rack01")') from None
    errors = schemas.problems("waivers", doc)
    if errors:
        raise ConfigError(f"{src}: {schemas.where(errors[0])}: {errors[0].message}")
    inventory = list(names)
    resolver = make_resolver(groups, inventory)
    known_nodes = frozenset(inventory)
    day = today or today_utc()
    active: list[Waiver] = []
    expired: list[Waiver] = []
    for i, entry in enumerate(doc.get("waivers") or [], start=1):
        w = _waiver(src, i, entry, known_checks, resolver, known_nodes)
        (active if w.active_on(day) else expired).append(w)
    return WaiverSet(src, tuple(active), tuple(expired))


def _waiver(
    src: str,
    i: int,
    entry: Mapping[str, Any],
    known: Collection[str],
    resolver: object,
    inventory: frozenset[str],
) -> Waiver:
    where = f"{src}: waivers.{i - 1}"
    check = entry["check"]
    if check not in known:
        raise ConfigError(f"{where}.check: {check!r} is not a registered check id")
    try:
        expires = dt.date.fromisoformat(entry["expires"])
    except ValueError as exc:  # `month must be in 1..12`
        raise ConfigError(f"{where}.expires: {entry['expires']!r}: {exc}") from None
    nodes = entry["nodes"]
    names = frozenset(parse_nodeset(nodes, resolver, f"{where}.nodes"))
    unknown = names - inventory
    if unknown:
        # A waiver for a node the inventory does not have waives nothing: a typo, or the
        # wrong inventory; either way the operator must hear it, not find it listed as active.
        raise ConfigError(
            f"{where}.nodes: {nodes!r}: {NodeSet.fromlist(sorted(unknown))} not in the inventory"
        )
    return Waiver(
        i, check, nodes, names, entry["reason"], entry["owner"], expires, entry.get("component")
    )

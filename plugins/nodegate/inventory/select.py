"""Node selection (`--nodes`): ClusterShell nodesets and `@group`s over one inventory."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
from ClusterShell.NodeUtils import GroupResolver, GroupSource
from ClusterShell.RangeSet import RangeSetException

from nodegate.core.errors import ConfigError
from nodegate.core.names import MAX_NODES, check_expression, too_many

_OPERATORS = ",!&^"
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?(?:/(\d+))?")


class UnknownGroupError(Exception):
    """A `@group` the source does not define (ClusterShell would silently give no nodes)."""

    def __init__(self, group: str) -> None:
        super().__init__(group)
        self.group = group


class StrictGroupSource(GroupSource):  # type: ignore[misc]  # ClusterShell is untyped
    """GroupSource over a dict that raises on unknown groups instead of returning no nodes.

    Members are folded (gpu[001-128]) lazily, once per group: ClusterShell parses what a
    source returns, and parsing thousands of single names costs far more than one range.
    """

    def __init__(self, groups: Mapping[str, Iterable[str]], all_nodes: Iterable[str]) -> None:
        super().__init__("inventory", {}, None)
        self._members = groups
        self._all = all_nodes
        self._folded: dict[str, str] = {}

    def members(self, group: str) -> Iterable[str]:
        """Node names of `group`; UnknownGroupError if it does not exist."""
        if group not in self._members:
            raise UnknownGroupError(group)
        return self._members[group]

    def resolv_map(self, group: str) -> str:
        """Folded members of `group`."""
        if group not in self._folded:
            self._folded[group] = fold(self.members(group))
        return self._folded[group]

    def resolv_list(self) -> list[str]:
        """All group names."""
        return list(self._members)

    def resolv_all(self) -> str:
        """All nodes (for `@*`)."""
        if "*" not in self._folded:
            self._folded["*"] = fold(self._all)
        return self._folded["*"]


def fold(names: Iterable[str]) -> str:
    """Fold node names into one hostlist expression: gpu1,gpu2,gpu3 -> gpu[1-3]."""
    return str(NodeSet.fromlist(list(names), resolver=RESOLVER_NOGROUP))


def make_resolver(groups: Mapping[str, Iterable[str]], all_nodes: Iterable[str]) -> object:
    """A ClusterShell GroupResolver resolving `@name` from `groups` (and `@*`)."""
    return GroupResolver(StrictGroupSource(groups, all_nodes))


def _range_size(text: str) -> int:
    """Names in one bracket range ('1-64', '7', '1-64/2'); 1 when malformed (ClusterShell says)."""
    m = _RANGE.fullmatch(text)
    if m is None:
        return 1
    low, high, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
    return max(0, (high - low) // max(step, 1) + 1)


def nodeset_bound(expr: str) -> int:
    """At most how many names `expr` expands to, counted from its ranges without expanding them
    (`@group` operands count 1: a group holds nodes already defined).

    >>> nodeset_bound("gpu[001-064],ib[1-4]-[1-2]!gpu003")
    73
    """
    total = 0
    for _, operand in split_operands(expr):
        size = 1
        for body in _BRACKET.findall(operand):
            size *= sum(_range_size(r) for r in body.split(","))
        total += size
    return total


def parse_nodeset(expr: str, resolver: object, where: str, limit: int = MAX_NODES) -> list[str]:
    """Expand a nodeset expression; ConfigError prefixed by `where` if malformed or if it would
    expand to more than `limit` names (checked before anything is expanded)."""
    check_expression(where, expr)
    bound = nodeset_bound(expr)
    if bound > limit:
        raise ConfigError(f"{where}: {expr!r} {too_many(bound, limit)}")
    try:
        return [str(n) for n in NodeSet(expr, resolver=resolver)]
    except UnknownGroupError as exc:
        raise ConfigError(f"{where}: unknown group '@{exc.group}'") from None
    except (NodeSetException, RangeSetException) as exc:
        raise ConfigError(f"{where}: bad nodeset expression {expr!r}: {exc}") from None


def split_operands(expr: str) -> list[tuple[str, str]]:
    """Split at top-level nodeset operators: 'a,b!c' -> [('', 'a'), (',', 'b'), ('!', 'c')]."""
    parts: list[tuple[str, str]] = []
    depth, op, start = 0, "", 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch in _OPERATORS and depth == 0:
            parts.append((op, expr[start:i]))
            op, start = ch, i + 1
    parts.append((op, expr[start:]))
    return parts


def select_names(
    expr: str | None,
    names: tuple[str, ...],
    groups: Mapping[str, tuple[str, ...]],
    source: str,
) -> tuple[str, ...]:
    """Names selected by `expr`, in the order of `names`; None or blank selects all.

    >>> select_names("@r1!n2", ("n1", "n2", "n3"), {"r1": ("n1", "n2")}, "inv.yaml")
    ('n1',)
    """
    if expr is None or not expr.strip():
        return names
    where = f"{source}: node selection {expr!r}"
    resolver = make_resolver(groups, names)
    known = set(names)
    cleaned: list[str] = []
    for op, raw in split_operands(expr):
        operand = raw.strip()
        if not operand:
            raise ConfigError(f"{where}: empty operand around {op or 'start'!r}")
        if any(ch.isspace() for ch in operand):
            raise ConfigError(f"{where}: whitespace inside {operand!r} (separate nodes with ',')")
        # Check every operand, even one that is subtracted: a typo must not pass silently.
        unknown = [n for n in parse_nodeset(operand, resolver, where) if n not in known]
        if unknown:
            raise ConfigError(f"{where}: {fold(unknown)} not in this inventory")
        cleaned.append(op + operand)
    chosen = set(parse_nodeset("".join(cleaned), resolver, where))
    return tuple(n for n in names if n in chosen)

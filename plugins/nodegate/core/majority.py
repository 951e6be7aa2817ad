"""The fleet majority of a value (kernel, driver, firmware): one helper, one tie rule."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Majority:
    """How a value is spread over a fleet. A tie for first place means no majority: every
    node in it fails (a mixed fleet breaks jobs, and nodegate will not pick a side)."""

    ranked: tuple[tuple[str, int], ...]  # (value, nodes), most common first, then by value

    @classmethod
    def of(cls, values: Iterable[str | None]) -> Majority:
        """Values of the nodes that reported one (None = no value, not counted)."""
        counts = Counter(v for v in values if v is not None)
        return cls(tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))

    @property
    def total(self) -> int:
        return sum(n for _, n in self.ranked)

    @property
    def tie(self) -> bool:
        return len(self.ranked) > 1 and self.ranked[0][1] == self.ranked[1][1]

    @property
    def top(self) -> str | None:
        """The majority value; None on a tie or when nobody reported."""
        return None if self.tie or not self.ranked else self.ranked[0][0]

    @property
    def top_count(self) -> int:
        return self.ranked[0][1] if self.ranked else 0

    def agrees(self, value: str | None) -> bool:
        return value is not None and self.top is not None and value == self.top

    def histogram(self, sep: str = ", ", fmt: str = "{value} ({n})") -> str:
        """`5.15.0-105-generic (28), 5.15.0-91-generic (1)`."""
        return sep.join(fmt.format(value=v, n=n) for v, n in self.ranked)

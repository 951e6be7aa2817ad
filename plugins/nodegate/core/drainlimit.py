"""The blast-radius bound of actions: how many nodes one run may take out of service.

Written `N` (nodes), `P%` (of the run's nodes, rounded down) or, in a profile or inventory,
`{nodes: N, percent: P}`: whichever of the two is larger. The shipped default is 10 % or 8
nodes, whichever is larger (`_admission.yaml`; DEFAULT when a profile says nothing).

>>> DrainLimit.parse("10%").of(32), DrainLimit(8, 10.0).of(32), DrainLimit(8, 10.0).of(1024)
(3, 8, 102)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_SPELLING = re.compile(r"(\d+)|(\d+(?:\.\d+)?)%")
EXPECTED = "a whole number of nodes >= 0 (8) or a share of the run's nodes (10%)"


@dataclass(frozen=True, slots=True)
class DrainLimit:
    """At most `nodes`, or `percent` of the run's nodes, whichever is larger (None: not set)."""

    nodes: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, text: str) -> DrainLimit:
        """`8` or `10%`; ValueError (saying what is accepted) otherwise."""
        m = _SPELLING.fullmatch(text.strip())
        if m is None:
            raise ValueError(EXPECTED)
        if m.group(1) is not None:
            return cls(nodes=int(m.group(1)))
        pct = float(m.group(2))
        if not 0 < pct <= 100:
            raise ValueError(EXPECTED)
        return cls(percent=pct)

    @classmethod
    def of_data(cls, value: Any) -> DrainLimit:
        """From a profile or inventory (schema-checked): 8, "10%" or {nodes: 8, percent: 10}."""
        if isinstance(value, Mapping):
            pct = value.get("percent")
            return cls(value.get("nodes"), None if pct is None else float(pct))
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(nodes=value)
        return cls.parse(str(value))

    def of(self, fleet: int) -> int:
        """The bound for a run over `fleet` nodes."""
        by_share = math.floor(fleet * self.percent / 100) if self.percent is not None else 0
        return max(self.nodes or 0, by_share)

    def describe(self) -> str:
        """`8 nodes`, `10%`, `10% or 8 nodes, whichever is larger`."""
        pct = None if self.percent is None else f"{self.percent:g}%"
        count = None if self.nodes is None else f"{self.nodes} node{'s' * (self.nodes != 1)}"
        if pct and count:
            return f"{pct} or {count}, whichever is larger"
        return pct or count or "0 nodes"


DEFAULT = DrainLimit(nodes=8, percent=10.0)

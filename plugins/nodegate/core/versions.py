"""Version rules from profiles: glob allow-lists and numeric min/max bounds."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def numeric_key(version: str) -> tuple[int, ...]:
    """Leading numeric components of a version, for ordering.

    Compares what every versioning scheme on a node shares: '5.15.0-105-generic' -> (5, 15, 0, 105),
    '535.161.08' -> (535, 161, 8), '23.10-1.1.9.0' -> (23, 10, 1, 1, 9, 0). Text after the
    first alphabetic chunk (flavour suffixes like '-generic', '.el9') does not order.
    """
    out: list[int] = []
    for chunk in re.findall(r"\d+|[A-Za-z]+", version):
        if not chunk.isdigit():
            break
        out.append(int(chunk))
    return tuple(out)


def _cmp(a: str, b: str) -> int:
    ka, kb = numeric_key(a), numeric_key(b)
    n = max(len(ka), len(kb))
    ka, kb = ka + (0,) * (n - len(ka)), kb + (0,) * (n - len(kb))
    return (ka > kb) - (ka < kb)


@dataclass(frozen=True, slots=True)
class VersionRule:
    """A profile's rule for one installed version: `allowed` globs (empty: any), numeric
    `min`/`max` bounds (a shorter bound pads with zeros: 23.10 == 23.10.0), and whether the
    part is `required` (absent then fails; absent and not required passes).

    >>> VersionRule.of({"required": True, "min": "535.104.05"}).holds("535.161.08")
    True
    """

    required: bool = True
    allowed: tuple[str, ...] = ()
    min: str | None = None
    max: str | None = None

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> VersionRule:
        """From a validated profile mapping `{required: true, allowed: [globs], min: v, max: v}`;
        `required` defaults to true (fail closed)."""
        lo, hi = doc.get("min"), doc.get("max")
        return cls(
            required=bool(doc.get("required", True)),
            allowed=tuple(str(a) for a in doc.get("allowed") or ()),
            min=None if lo is None else str(lo),
            max=None if hi is None else str(hi),
        )

    def holds(self, observed: str | None) -> bool:
        """True when `observed` matches a glob (if any) and lies within the bounds."""
        if observed is None:
            return False
        if self.allowed and not any(fnmatch.fnmatchcase(observed, a) for a in self.allowed):
            return False
        if self.min is not None and _cmp(observed, self.min) < 0:
            return False
        return self.max is None or _cmp(observed, self.max) <= 0

    def expected(self) -> str:
        """`one of 5.15.0-*-generic and >= 5.15.0-88`; `any` when the rule constrains nothing."""
        parts: list[str] = []
        if self.allowed:
            parts.append("one of " + ", ".join(self.allowed))
        if self.min is not None:
            parts.append(f">= {self.min}")
        if self.max is not None:
            parts.append(f"<= {self.max}")
        return " and ".join(parts) if parts else "any"

    def judge(self, observed: str | None) -> tuple[bool, str]:
        """(holds, expected): `(False, ">= 28.39.1002")`."""
        return self.holds(observed), self.expected()

"""Profile thresholds as data: a value, its unit and its direction.

A threshold in a profile is a mapping with exactly one direction key and an optional unit:
`{min: 360, unit: Gb/s}`, `{max: 0, unit: errors}`, `{equal: 16, unit: lanes}`,
`{one_of: [PIX, PXB, PHB]}`. Check code asks `t.holds(observed)` and shows `t.expected()`;
it never writes a comparison operator of its own (ReFrame's references, as data).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodegate.core.errors import ConfigError

Direction = Literal["min", "max", "equal", "one_of"]
DIRECTIONS: tuple[Direction, ...] = ("min", "max", "equal", "one_of")
_SYMBOL = {"min": ">= ", "max": "<= ", "equal": "", "one_of": "one of "}


@dataclass(frozen=True, slots=True)
class Threshold:
    """One judged value: `observed` passes when it satisfies `direction` against `value`."""

    direction: Direction
    value: Any  # a number or a string; a tuple for one_of
    unit: str | None = None

    @classmethod
    def from_profile(cls, doc: Any, where: str) -> Threshold:
        """Build from a profile mapping (already schema-validated); `where` names the key path."""
        if not isinstance(doc, Mapping):
            raise ConfigError(f"{where}: a threshold is a mapping like {{min: 5, unit: GT/s}}")
        keys = [k for k in DIRECTIONS if k in doc]
        extra = set(doc) - set(DIRECTIONS) - {"unit"}
        if len(keys) != 1 or extra:
            raise ConfigError(
                f"{where}: a threshold has exactly one of {', '.join(DIRECTIONS)} and an "
                f"optional unit (got {', '.join(map(str, doc)) or 'nothing'})"
            )
        d = keys[0]
        value = doc[d]
        if d == "one_of":
            if not isinstance(value, (list, tuple)) or not value:
                raise ConfigError(f"{where}.one_of: a non-empty list")
            value = tuple(value)
        elif d in ("min", "max") and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise ConfigError(f"{where}.{d}: a number (got {value!r})")
        unit = doc.get("unit")
        return cls(d, value, None if unit is None else str(unit))

    def holds(self, observed: Any) -> bool:
        """True when `observed` satisfies the threshold; None (absent) never does."""
        if observed is None:
            return False
        if self.direction == "min":
            return bool(observed >= self.value)
        if self.direction == "max":
            return bool(observed <= self.value)
        if self.direction == "equal":
            return bool(observed == self.value)
        return observed in self.value

    def expected(self) -> str:
        """What a verdict shows as expected: `>= 360`, `<= 0`, `16`, `one of PIX, PXB`."""
        if self.direction == "one_of":
            shown = ", ".join(_fmt(v) for v in self.value)
        else:
            shown = _fmt(self.value)
        return _SYMBOL[self.direction] + shown

    def describe(self) -> str:
        """`expected()` with the unit: `>= 360 Gb/s`."""
        return self.expected() + (f" {self.unit}" if self.unit else "")

    def to_json(self) -> dict[str, Any]:
        """`{"direction": "min", "value": 360, "unit": "Gb/s"}` (a one_of value as a list)."""
        value = list(self.value) if self.direction == "one_of" else self.value
        return {"direction": self.direction, "value": value, "unit": self.unit}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Threshold:
        """The inverse of `to_json`."""
        direction = d["direction"]
        if direction not in DIRECTIONS:
            raise ValueError(f"threshold direction {direction!r}: not one of {DIRECTIONS}")
        value = d["value"]
        return cls(direction, tuple(value) if direction == "one_of" else value, d.get("unit"))


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)

"""A profile's `regression:` section, typed: which changes from a baseline are regressions.

regression:
  metrics:                                  # numbers, per check id
    ib_pairs.rail.bandwidth: {better: higher, max_change_pct: 3}
    gpu.ecc.uncorrectable: {better: lower, max_change: 0}
  versions:                                 # text facts, per check id
    hca.firmware.version: not_lower         # or `unchanged`

A number or fact of a check not listed is reported when it changes, never judged.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodegate.core.errors import ConfigError
from nodegate.core.versions import numeric_key
from nodegate.profiles import Profile

SECTION = "regression"
SITE_PREFIX = "site."  # site checks have no registry entry (nodegate.session.collection)


@dataclass(frozen=True, slots=True)
class MetricRule:
    """How far a number may move the worse way: `max_change` in its unit or `max_change_pct`
    of the baseline's number.

    >>> MetricRule("higher", None, 3.0).regressed(386.0, 366.7)
    True
    """

    better: Literal["higher", "lower"]
    max_change: float | None
    max_change_pct: float | None

    def worse_by(self, before: float, after: float) -> float:
        """How far `after` moved the worse way from `before` (<= 0: not worse)."""
        return before - after if self.better == "higher" else after - before

    def regressed(self, before: float, after: float) -> bool:
        worse = self.worse_by(before, after)
        if worse <= 0:
            return False
        if self.max_change is not None:
            return worse > self.max_change
        assert self.max_change_pct is not None
        return worse > abs(before) * self.max_change_pct / 100

    def describe(self) -> str:
        """`may drop at most 3 %`, `may rise at most 0`."""
        way = "drop" if self.better == "higher" else "rise"
        size = f"{self.max_change_pct:g} %" if self.max_change is None else f"{self.max_change:g}"
        return f"may {way} at most {size}"


VersionRule = Literal["unchanged", "not_lower"]


def version_regressed(rule: VersionRule, before: str, after: str) -> bool:
    """`unchanged`: any change; `not_lower`: a lower version by its numeric components.

    >>> version_regressed("not_lower", "28.41.1000", "28.37.1014")
    True
    """
    if before == after:
        return False
    if rule == "unchanged":
        return True
    return numeric_key(after) < numeric_key(before)


def describe_version_rule(rule: VersionRule) -> str:
    return "may not change" if rule == "unchanged" else "may not go down"


@dataclass(frozen=True, slots=True)
class RegressionRules:
    """The typed `regression:` section of one profile."""

    metrics: Mapping[str, MetricRule]
    versions: Mapping[str, VersionRule]

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> RegressionRules:
        """From the schema-validated section."""
        metrics = {
            check: MetricRule(
                r["better"],
                None if r.get("max_change") is None else float(r["max_change"]),
                None if r.get("max_change_pct") is None else float(r["max_change_pct"]),
            )
            for check, r in doc["metrics"].items()
        }
        return cls(metrics, dict(doc["versions"]))


def regression_rules(profile: Profile, known_checks: Collection[str]) -> RegressionRules:
    """The profile's rules; ConfigError when it has none or names a check nodegate lacks."""
    if not isinstance(profile.data.get(SECTION), Mapping):
        raise ConfigError(
            f"--compare-to: profile {profile.name} ({profile.source}) has no {SECTION}: section "
            "(which changes are regressions)"
        )
    rules = profile.typed(SECTION, RegressionRules.of)
    for part, names in (("metrics", rules.metrics), ("versions", rules.versions)):
        for check in names:
            if check not in known_checks and not check.startswith(SITE_PREFIX):
                raise ConfigError(
                    f"profile {profile.name} ({profile.source}): {SECTION}.{part}.{check}: "
                    "no such check"
                )
    return rules

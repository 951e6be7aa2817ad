"""Version rules from profiles: glob allow-lists and numeric min/max bounds."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
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


def check_version(observed: str, rule: Mapping[str, Any]) -> tuple[bool, str]:
    """(ok, expectation text) of `observed` against {allowed: [globs], min: v, max: v}."""
    parts: list[str] = []
    ok = True
    allowed = rule.get("allowed")
    if allowed:
        parts.append("one of " + ", ".join(str(a) for a in allowed))
        ok &= any(fnmatch.fnmatchcase(observed, str(a)) for a in allowed)
    if rule.get("min") is not None:
        parts.append(f">= {rule['min']}")
        ok &= _cmp(observed, str(rule["min"])) >= 0
    if rule.get("max") is not None:
        parts.append(f"<= {rule['max']}")
        ok &= _cmp(observed, str(rule["max"])) <= 0
    return ok, " and ".join(parts) if parts else "any"

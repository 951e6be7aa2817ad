"""The failures perftest reports in its own words (cannot connect, rdma_cm, QP, bad options)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Failure lines, first match names the kind; messages are quoted verbatim (perftest prints them
# to stderr, often run together on one line before perftest PR #228: fail-couldnt-connect-*).
_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("connect", re.compile(r"Couldn't connect to \S+")),
    ("exchange", re.compile(r"Couldn't read remote address|Failed to exchange data")),
    ("rdma_cm", re.compile(r"Unexpected CM event|rdma_client function|rdma_server function")),
    ("rdma_cm", re.compile(r"Unable to read to socket/rdma_cm|rdma_cm event")),
    ("modify_qp", re.compile(r"[Ff]ailed to modify QP|Couldn't modify QP")),
    ("socket", re.compile(r"Unable to (init|open) .*socket|Couldn't create socket")),
    ("usage", re.compile(r"cannot be used without|Parser function exited with Error")),
    (
        "resources",
        re.compile(r"[Cc]ouldn't (allocate|create|register|get|init)\b|Failed to create"),
    ),
)


@dataclass(frozen=True, slots=True)
class PerftestFailure:
    """A run that perftest itself reported as failed; kind names the first failure line's class."""

    kind: str
    message: str
    messages: tuple[str, ...]
    warnings: tuple[str, ...]


def find_failure(lines: list[str], warnings: list[str]) -> PerftestFailure | None:
    """The run's failure, named by its first failure line; None when perftest reported none."""
    found: list[tuple[str, str]] = []
    for line in lines:
        for kind, pattern in _FAILURES:
            if pattern.search(line):
                found.append((kind, line))
                break
    if not found:
        return None
    return PerftestFailure(found[0][0], found[0][1], tuple(m for _, m in found), tuple(warnings))

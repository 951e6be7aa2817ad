"""Fixtures shared by the unit tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

# The history tests' backends (a SQLite file; a real PostgreSQL server), shared with the
# integration tests.
from tests.pgserver import history_url, pg_server  # noqa: F401


@pytest.fixture
def python_signals() -> Iterator[None]:
    """SIGINT raising KeyboardInterrupt and SIGTERM at its default, restored afterwards: a
    test of interrupt handling installs what it tests (a suite started in the background
    inherits SIGINT ignored, and Python then installs no handler of its own)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)

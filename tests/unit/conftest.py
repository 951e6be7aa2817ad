"""Fixtures shared by the unit tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


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


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """One real PostgreSQL server for the session's history tests (`tests.pgserver`)."""
    from tests.pgserver import start_pg

    server = start_pg()
    yield server
    server.stop()


_DBS = iter(range(1, 1_000_000))


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A fresh, empty history database of each backend: a SQLite file in the test's directory,
    or a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    server = request.getfixturevalue("pg_server")
    name = f"h{next(_DBS)}"
    server.createdb(name)
    return str(server.url(name))

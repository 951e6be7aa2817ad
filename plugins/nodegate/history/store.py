"""Opening the history database: URL checks, the engine, schema revisions (Alembic).

`open_store(url)` connects, refuses a database of a newer schema, migrates an older one, and
raises `HistoryError` (a usage error: exit 4) naming the URL, its password never shown:

>>> shown_url("postgresql+psycopg://ops:s3cret@db.example/nodegate")
'postgresql+psycopg://ops:***@db.example/nodegate'
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from nodegate.core.errors import ConfigError
from nodegate.history.schema import HEAD, METADATA

MIGRATIONS = Path(__file__).with_name("migrations")
HISTORY_FILE = "history.sqlite"  # the default store, beside the run directories
OFF = "off"  # --history off: no history
DIALECTS = ("sqlite", "postgresql+psycopg")
SQLITE_WAIT_S = 30.0  # how long a write waits for a SQLite file another run holds locked
PG_CONNECT_TIMEOUT_S = 10
# Two controllers migrating one PostgreSQL at once: the second waits for the first.
_PG_MIGRATION_LOCK = 0x6E6F6465  # "node"
_USERINFO = re.compile(r"(://[^:/@]*:).*@")  # to the last @: an unquoted @ in it too


class HistoryError(ConfigError):
    """The history database cannot be used (unreachable, locked, newer schema, bad URL)."""


def shown_url(text: str) -> str:
    """The URL as messages show it: any password replaced by `***`."""
    return _USERINFO.sub(r"\1***@", text)


def default_url(reports_dir: Path) -> str:
    return f"sqlite:///{reports_dir / HISTORY_FILE}"


def parse_url(text: str) -> URL:
    """A history URL, checked: `sqlite:///PATH` or `postgresql+psycopg://...`."""
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise HistoryError(
            f"--history: got {shown_url(text)!r}, expected {OFF!r}, sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB"
        ) from None
    name = url.drivername
    if name == "postgresql":  # the driver nodegate ships with
        url = url.set(drivername="postgresql+psycopg")
    elif name not in DIALECTS:
        raise HistoryError(
            f"--history: got {shown_url(text)!r}: driver {name!r} is not one of "
            f"{', '.join(DIALECTS)}"
        )
    if url.drivername == "sqlite" and not url.database:
        raise HistoryError(f"--history: got {shown_url(text)!r}, expected sqlite:///PATH (a file)")
    return url


@dataclass
class Store:
    """An open, migrated history database."""

    engine: Engine
    shown: str  # the URL without its password
    password: str | None

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def scrub(self, text: str) -> str:
        """A message from the driver, the password (if it holds it) taken out."""
        return text.replace(self.password, "***") if self.password else text

    def fail(self, what: str, exc: BaseException) -> HistoryError:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        why = first[0]
        if self.dialect == "sqlite" and "locked" in why:
            why += f" (another run holds the file; waited {self._wait_s():g} s)"
        return HistoryError(f"history {self.shown}: {what}: {self.scrub(why)}")

    def _wait_s(self) -> float:
        return float(self.engine.url.query.get("timeout", SQLITE_WAIT_S))  # type: ignore[arg-type]

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """One write transaction (SQLite: BEGIN IMMEDIATE, waiting for another writer)."""
        with self.engine.connect() as conn:
            conn = conn.execution_options(nodegate_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def close(self) -> None:
        self.engine.dispose()


def open_store(text: str, *, migrate: bool = True) -> Store:
    """Connect to the history at `text`, check its schema and (`migrate`) bring it to HEAD."""
    url = parse_url(text)
    shown = shown_url(text)  # as given (not re-encoded), the password out
    if url.drivername == "sqlite":
        folder = Path(str(url.database)).parent
        if not folder.is_dir():
            raise HistoryError(f"history {shown}: directory {folder} does not exist")
    store = Store(_engine(url), shown, url.password)
    try:
        with store.reading() as conn:
            current = _current(conn)
        _check_known(store, current)
        if current != HEAD and migrate:
            with store.writing() as conn:
                _migrate(store, conn)
        elif current != HEAD:
            raise HistoryError(
                f"history {shown}: schema revision {current or 'none'}, this nodegate reads "
                f"{HEAD} (run a nodegate command that writes to migrate it)"
            )
    except HistoryError:
        store.close()
        raise
    except (SQLAlchemyError, DBAPIError, OSError) as exc:
        store.close()
        raise store.fail("cannot open the database", exc) from None
    return store


def _engine(url: URL) -> Engine:
    if url.drivername == "sqlite":
        if "timeout" not in url.query:
            url = url.update_query_dict({"timeout": str(SQLITE_WAIT_S)})
        engine = sa.create_engine(url)

        @event.listens_for(engine, "connect")
        def _connect(dbapi: Any, _record: Any) -> None:
            dbapi.isolation_level = None  # transactions begun below, not by pysqlite
            cur = dbapi.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA cache_size=-65536")  # 64 MiB: a big run's index pages stay in
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("nodegate_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine
    return sa.create_engine(
        url, pool_pre_ping=True, connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S}
    )


def _current(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    heads = MigrationContext.configure(conn).get_current_heads()
    if len(heads) > 1:
        return ",".join(heads)
    if not heads and sa.inspect(conn).has_table("runs"):
        return "unversioned"
    return heads[0] if heads else None


def _script() -> Any:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg, ScriptDirectory.from_config(cfg)


def _check_known(store: Store, current: str | None) -> None:
    if current is None or current == HEAD:
        return
    _cfg, script = _script()
    known = {r.revision for r in script.walk_revisions()}
    if current not in known:
        raise HistoryError(
            f"history {store.shown}: schema revision {current!r} is not one this nodegate "
            f"knows (its newest: {HEAD}): written by a newer nodegate? Upgrade nodegate; the "
            "database is left as it is"
        )


def _migrate(store: Store, conn: Connection) -> None:
    """Upgrade to HEAD inside the caller's transaction (PostgreSQL: under an advisory lock,
    so that a second controller waits, then finds the schema done)."""
    from alembic.runtime.environment import EnvironmentContext

    if store.dialect == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
    current = _current(conn)
    _check_known(store, current)
    if current == HEAD:
        return
    cfg, script = _script()

    def upgrade(rev: Any, _context: Any) -> Any:
        return script._upgrade_revs(HEAD, rev)

    with EnvironmentContext(cfg, script, fn=upgrade, destination_rev=HEAD) as env:
        env.configure(connection=conn, target_metadata=METADATA)
        env.run_migrations()


def migrate_to(text: str, revision: str) -> None:
    """Create or upgrade the database at `text` to `revision` exactly (tests: an older schema)."""
    from alembic.runtime.environment import EnvironmentContext

    store = Store(_engine(parse_url(text)), shown_url(text), None)
    cfg, script = _script()

    def upgrade(rev: Any, _context: Any) -> Any:
        return script._upgrade_revs(revision, rev)

    try:
        with (
            store.writing() as conn,
            EnvironmentContext(cfg, script, fn=upgrade, destination_rev=revision) as env,
        ):
            env.configure(connection=conn, target_metadata=METADATA)
            env.run_migrations()
    finally:
        store.close()

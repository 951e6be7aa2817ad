"""A real PostgreSQL server for the history tests (Debian `postgresql`): its own data
directory and Unix socket in a temporary directory, no TCP listener, started and stopped by
PID. PostgreSQL refuses to run as root: as root, initdb and postgres run as `postgres` (or
`nobody`) through setpriv, the directory theirs.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
START_DEADLINE_S = 60


def pg_bin(name: str) -> Path | None:
    for d in BIN_DIRS:
        if (d / name).is_file():
            return d / name
    return None


def _as_user() -> tuple[list[str], pwd.struct_passwd | None]:
    """The command prefix that drops root, and that user (None: not root)."""
    if os.geteuid() != 0:
        return [], None
    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise RuntimeError("running as root needs setpriv (util-linux) to drop to " + name)
        return [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"], user
    raise RuntimeError("running as root, and no postgres or nobody user to run PostgreSQL as")


@dataclass
class PgServer:
    """One running server; `url(db)` is its SQLAlchemy URL over the Unix socket."""

    root: Path
    proc: subprocess.Popen[bytes]
    user: str = "nodegate"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    def url(self, db: str = "nodegate", password: str | None = None) -> str:
        auth = f"{self.user}:{password}" if password else self.user
        return f"postgresql+psycopg://{auth}@/{db}?host={self.socket_dir}"

    def createdb(self, name: str) -> None:
        import psycopg

        with psycopg.connect(
            host=str(self.socket_dir), user=self.user, dbname="postgres", autocommit=True
        ) as c:
            c.execute(f'CREATE DATABASE "{name}"')

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def start_pg() -> PgServer:
    initdb, postgres = pg_bin("initdb"), pg_bin("postgres")
    if initdb is None or postgres is None:
        raise RuntimeError("no PostgreSQL server under /usr/lib/postgresql (apt: postgresql)")
    prefix, user = _as_user()
    root = Path(tempfile.mkdtemp(prefix="nodegate-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if user is not None:
        for p in (root, sock):
            os.chown(p, user.pw_uid, user.pw_gid)
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"}
    subprocess.run(
        [*prefix, str(initdb), "-D", str(data), "-U", "nodegate", "-A", "trust", "-E", "UTF8",
         "--no-sync"],
        check=True, capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    log = (root / "postgres.log").open("wb")
    if user is not None:
        os.chown(root / "postgres.log", user.pw_uid, user.pw_gid)
    proc = subprocess.Popen(
        [*prefix, str(postgres), "-D", str(data), "-k", str(sock), "-c", "listen_addresses=",
         "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
         "-c", "max_connections=40"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    log.close()
    server = PgServer(root, proc)
    deadline = time.monotonic() + START_DEADLINE_S
    while not (sock / ".s.PGSQL.5432").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            text = (root / "postgres.log").read_text(errors="replace")
            server.stop()
            raise RuntimeError(f"PostgreSQL did not start: {text[-2000:]}")
        time.sleep(0.05)
    _wait_ready(server, deadline)
    server.createdb("nodegate")
    return server


def _wait_ready(server: PgServer, deadline: float) -> None:
    import psycopg

    while True:
        try:
            sock = str(server.socket_dir)
            psycopg.connect(host=sock, user=server.user, dbname="postgres").close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One real PostgreSQL server for the session's history tests (`tests.pgserver`)."""
    server = start_pg()
    yield server
    server.stop()


_DBS = iter(range(1, 1_000_000))


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty history database of each backend: a SQLite file in the test's directory,
    or a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    server = request.getfixturevalue("pg_server")
    name = f"h{next(_DBS)}"
    server.createdb(name)
    return str(server.url(name))

"""The history store on both backends (a SQLite file; a real PostgreSQL server): a run's rows,
import of run directories (idempotent), interrupted runs, infrastructure findings, schema
revisions (a newer refused, an older migrated), unreachable and locked databases, and two
controllers writing at once."""

from __future__ import annotations

import gzip
import sqlite3
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from nodegate.core.errors import ConfigError
from nodegate.history import queries
from nodegate.history import schema as t
from nodegate.history.ingest import import_run
from nodegate.history.store import HistoryError, migrate_to, open_store

from tests.history_runs import BW, RAIL3, T0, bw, make_run, record, run_dir, ssh

NODES = ["gpu001", "gpu002", "gpu003"]


def healthy_and_one_slow(run_id: str, slow: float = 350.0, at=T0):
    vs = [ssh(n) for n in NODES] + [bw("gpu001", 392.5), bw("gpu002", slow), bw("gpu003", 391)]
    return make_run(run_id, vs, NODES, at)


def count(store, table) -> int:
    with store.reading() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_a_run_is_stored_with_its_decisions_verdicts_and_numbers(history_url: str) -> None:
    store = open_store(history_url)
    record(store, healthy_and_one_slow("r1"))
    with store.reading() as conn:
        (run,) = queries.runs(conn)
        states = {n["node"]: (n["state"], n["rejections"], n["last_reason"])
                  for n in queries.node_states(conn, now=T0.replace(tzinfo=None))}  # fmt: skip
        series = queries.series(conn, "gpu002", BW, "mlx5_3")
    assert (run["run_id"], run["state"], run["exit_code"], run["profiles"]) == (
        "r1", "complete", 1, "generic-hgx-h100")  # fmt: skip
    assert (run["nodes"], run["admitted"], run["rejected"], run["started_at"]) == (
        3, 2, 1, "2026-11-01T08:00:00+00:00")  # fmt: skip
    assert states == {
        "gpu001": ("admitted", 0, None),
        "gpu002": ("rejected", 1, f"{BW} [{RAIL3}] FAIL: 350.0 Gb/s below the floor"),
        "gpu003": ("admitted", 0, None),
    }
    assert series == [{
        "run_id": "r1", "at": "2026-11-01T08:00:00+00:00", "run_state": "complete",
        "component": RAIL3, "value": 350.0, "unit": "Gb/s", "status": "fail",
        "threshold": {"direction": "min", "value": 360.0},
    }]  # fmt: skip
    assert (count(store, t.verdicts), count(store, t.measurements)) == (6, 3)
    store.close()


def test_import_back_fills_a_run_directory_and_again_changes_nothing(
    history_url: str, tmp_path: Path
) -> None:
    d = run_dir(tmp_path / "reports", healthy_and_one_slow("r-old"))
    store = open_store(history_url)
    first = import_run(store, d)
    again = import_run(store, d)
    assert (first.run_id, first.verdicts, first.measurements, first.replaced) == (
        "r-old", 6, 3, False)  # fmt: skip
    assert (again.verdicts, again.replaced) == (6, True)
    assert [count(store, tb) for tb in (t.runs, t.decisions, t.verdicts, t.measurements)] == [
        1, 3, 6, 3]  # fmt: skip
    with store.reading() as conn:
        assert [r["source"] for r in queries.runs(conn)] == ["import"]
    store.close()


def test_a_bad_run_directory_is_named_and_writes_nothing(history_url: str, tmp_path: Path) -> None:
    store = open_store(history_url)
    with pytest.raises(ConfigError) as e:
        import_run(store, tmp_path / "nope")
    assert str(e.value) == f"history import {tmp_path / 'nope'}: not a directory"
    d = run_dir(tmp_path / "reports", healthy_and_one_slow("r-cut"))
    path = d / "verdicts.jsonl.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    path.write_bytes(gzip.compress("\n".join([*lines[:4], '{"check": ']).encode()))
    with pytest.raises(ConfigError) as e:
        import_run(store, d)
    assert str(e.value).startswith(f"history import {path}: not a verdicts file (line 5: ")
    assert count(store, t.runs) == 0  # the half-read run was rolled back
    whole = gzip.compress("\n".join(lines).encode())
    path.write_bytes(whole[: len(whole) // 2])  # a copy cut short
    with pytest.raises(ConfigError) as e:
        import_run(store, d)
    assert str(e.value) == (f"history import {path}: not a verdicts file (line 2: Compressed "
                            "file ended before the end-of-stream marker was reached)")  # fmt: skip
    assert count(store, t.runs) == 0
    v1 = run_dir(tmp_path / "old", healthy_and_one_slow("r-v1"), v1=True)
    text = (v1 / "verdicts.json").read_text()
    (v1 / "verdicts.json").write_text(text[: len(text) // 2])
    with pytest.raises(ConfigError) as e:
        import_run(store, v1)
    assert str(e.value).startswith(f"history import {v1 / 'verdicts.json'}: not a verdicts file")
    assert count(store, t.runs) == 0
    store.close()


def test_a_run_directory_written_before_verdicts_jsonl_gz_imports_the_same(
    history_url: str, tmp_path: Path
) -> None:
    store = open_store(history_url)
    new = import_run(store, run_dir(tmp_path / "new", healthy_and_one_slow("r-old")))
    old = import_run(store, run_dir(tmp_path / "old", healthy_and_one_slow("r-old"), v1=True))
    assert (old.run_id, old.verdicts, old.measurements, old.replaced) == ("r-old", 6, 3, True)
    assert (new.verdicts, new.measurements) == (6, 3)
    store.close()


def test_an_interrupted_run_is_recorded_as_interrupted(history_url: str) -> None:
    store = open_store(history_url)
    made = make_run("r-int", [ssh(n) for n in NODES], NODES, T0, interrupted="ib_pairs")
    record(store, made, exit_code=2)
    with store.reading() as conn:
        (run,) = queries.runs(conn)
        timeline = queries.timeline(conn, "gpu001")
    assert (run["state"], run["interrupted_during"], run["exit_code"]) == (
        "interrupted", "ib_pairs", 2)  # fmt: skip
    assert [(e["state"], e["reason"]) for e in timeline] == [
        ("rejected", "run.interrupted NOT_RUN: run interrupted during ib_pairs")
    ]
    store.close()


def test_infrastructure_findings_are_stored_when_admission_has_them(history_url: str) -> None:
    store = open_store(history_url)
    made = healthy_and_one_slow("r-fabric")
    made.doc["infrastructure"] = [{
        "component": ["leaf03 port 17", "spine01 port 4"], "check": "fabric.link.state",
        "observed": "Down", "expected": "Active", "remediation": "reseat the cable",
    }]  # fmt: skip
    record(store, made)
    record(store, healthy_and_one_slow("r-plain"))  # no section: nothing, and no error
    with store.reading() as conn:
        rows = conn.execute(sa.select(t.infrastructure.c.component, t.infrastructure.c.check,
                                      t.infrastructure.c.observed)).all()  # fmt: skip
    assert rows == [("leaf03 port 17 <-> spine01 port 4", "fabric.link.state", "Down")]
    store.close()


def test_a_newer_schema_is_refused_and_an_older_one_migrated(history_url: str) -> None:
    migrate_to(history_url, "0001_initial")
    with pytest.raises(HistoryError) as e:
        open_store(history_url, migrate=False)
    assert "schema revision 0001_initial, this nodegate reads 0002_infrastructure_flags" in str(
        e.value
    )
    store = open_store(history_url)  # migrated: the tables of 0002 are there, runs go in
    record(store, healthy_and_one_slow("r-after"))
    assert count(store, t.flags) == 0 and count(store, t.runs) == 1
    with store.writing() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
    store.close()
    with pytest.raises(HistoryError) as e:
        open_store(history_url)
    assert "schema revision '0099_from_the_future' is not one this nodegate knows" in str(e.value)
    assert "the database is left as it is" in str(e.value)


def test_an_unreachable_database_is_named_without_its_password(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://ops:s3cret@/nodegate?host={tmp_path / 'no-server'}"
    with pytest.raises(HistoryError) as e:
        open_store(url)
    msg = str(e.value)
    assert msg.startswith("history postgresql+psycopg://ops:***@/nodegate?host=")
    assert "cannot open the database" in msg and "s3cret" not in msg
    with pytest.raises(HistoryError) as e:
        open_store(f"sqlite:///{tmp_path / 'missing' / 'h.sqlite'}")
    assert str(e.value).endswith(f"directory {tmp_path / 'missing'} does not exist")
    with pytest.raises(HistoryError) as e:
        open_store("mysql://root:hunter2@db/x")
    assert str(e.value) == (
        "--history: got 'mysql://root:***@db/x': driver 'mysql' is not one of sqlite, "
        "postgresql+psycopg"
    )


def test_a_locked_sqlite_file_waits_then_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    open_store(f"sqlite:///{path}").close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another run, writing
    store = open_store(f"sqlite:///{path}?timeout=0.3")  # reading is not blocked (WAL)
    with pytest.raises(HistoryError) as e:
        record(store, healthy_and_one_slow("r-locked"))
    assert str(e.value) == (
        f"history sqlite:///{path}?timeout=0.3: writing run r-locked: database is locked "
        "(another run holds the file; waited 0.3 s)"
    )
    # Released while it waits: the write goes through.
    store_wait = open_store(f"sqlite:///{path}?timeout=30")
    timer = threading.Timer(0.2, lambda: holder.execute("COMMIT"))
    timer.start()
    record(store_wait, healthy_and_one_slow("r-waited"))
    timer.join()
    assert count(store_wait, t.runs) == 1
    for s in (store, store_wait):
        s.close()
    holder.close()


def test_two_controllers_writing_at_once_lose_no_row(history_url: str) -> None:
    stores = [open_store(history_url) for _ in range(2)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def controller(i: int) -> None:
        try:
            barrier.wait()
            for k in range(3):  # new nodes and components both sides at once
                names = [f"gpu{n:03d}" for n in range(10 * k, 10 * k + 8)]
                vs = [ssh(n) for n in names] + [bw(n, 390.0 + i, f"mlx5_{k} port 1") for n in names]
                made = make_run(f"c{i}-{k}", vs, sorted({v.node for v in vs}), T0)
                record(stores[i], made)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=controller, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert errors == []
    assert [count(stores[0], tb) for tb in (t.runs, t.decisions, t.verdicts, t.measurements)] == [
        6, 48, 96, 48]  # fmt: skip
    assert count(stores[0], t.nodes) == 24 and count(stores[0], t.components) == 4
    for s in stores:
        s.close()


def test_the_revisions_build_exactly_the_tables_the_code_writes(history_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    store = open_store(history_url)
    with store.reading() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), t.METADATA)
    store.close()
    assert diff == []

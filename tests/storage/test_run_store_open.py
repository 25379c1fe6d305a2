"""Opening a run store: a second opener that waits while the first migrates a new file does not migrate again,
and a store that fails to open leaves no connection behind."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from aios_rl.contracts.errors import StorageError
from aios_rl.storage import db
from aios_rl.storage.db import MIGRATIONS, RunStore


def test_an_opener_that_waited_on_a_migration_does_not_run_it_again(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    first = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    first.execute("PRAGMA journal_mode=WAL")
    first.execute("BEGIN IMMEDIATE")  # the first opener, mid-migration: it holds the write lock
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            first.execute(statement)
    first.execute("PRAGMA user_version=1")
    opened: list[object] = []
    second = threading.Thread(target=lambda: opened.append(_open(path)))
    second.start()
    time.sleep(0.5)  # the second opener has read version 0 and waits for the lock
    first.execute("COMMIT")
    second.join(timeout=30)
    first.close()
    assert opened == [len(MIGRATIONS)]


def _open(path: Path) -> object:
    """The schema version a store opened at ``path`` ends at, or the error it raised."""
    try:
        store = RunStore(path)
    except StorageError as exc:
        return exc
    try:
        return store.schema_version
    finally:
        store.close()


def test_a_store_from_a_newer_aios_rl_is_refused_and_its_connection_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "control.db"
    RunStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    made: list[sqlite3.Connection] = []
    real = db.connect_wal

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(db, "connect_wal", connect)
    with pytest.raises(StorageError, match="newer than this aios-rl"):
        RunStore(path)
    assert len(made) == 1
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        made[0].execute("SELECT 1")


def test_a_run_directory_that_is_a_file_is_a_storage_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.write_text("not a directory")  # e.g. `shell train --run` given a file by mistake
    with pytest.raises(StorageError, match="cannot create"):
        RunStore(run / "control.db")


def test_a_corrupt_store_is_a_storage_error_when_read(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    with RunStore(path) as store:
        for i in range(100):
            store.append_event(f"e{i}", "kind", {"blob": "x" * 300}, "now")
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    for offset in range(2 * 4096, len(data), 4096):  # the header page stays intact: the file still opens
        data[offset : offset + 100] = b"\xff" * 100
    path.write_bytes(bytes(data))
    with RunStore(path) as store:
        for read in (lambda: list(store.events()), store.event_count, lambda: store.get_meta("key"),
                     store.latest_snapshot, store.episode_ids):
            with pytest.raises(StorageError, match="malformed"):
                read()

"""connect_wal waits out a lock on the switch to WAL, which SQLite itself answers at once with 'locked'."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from aios_rl.storage.sqlite_wal import connect_wal


def rollback_journal_file(path) -> sqlite3.Connection:
    """A file in the default journal mode, with a writer holding its RESERVED lock open.

    The switch to WAL reads the header first and then needs the write lock; SQLite does not call the
    busy handler to upgrade a transaction that already reads, so a second opener meets 'locked' at once.
    """
    setup = sqlite3.connect(path)
    setup.execute("CREATE TABLE t (x INTEGER)")
    setup.execute("INSERT INTO t VALUES (1)")
    setup.commit()
    setup.close()
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # RESERVED lock held until COMMIT
    return writer


def test_plain_sqlite_fails_at_once_where_connect_wal_waits(tmp_path):
    path = tmp_path / "old.db"
    writer = rollback_journal_file(path)
    plain = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        plain.execute("PRAGMA journal_mode=WAL")
    assert time.monotonic() - started < 2.0  # the busy timeout was not honoured
    plain.close()
    release = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    conn = connect_wal(path, timeout=5.0)
    waited = time.monotonic() - started
    release.join()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert 0.25 <= waited < 5.0
    conn.close()
    writer.close()


def test_gives_up_after_the_timeout(tmp_path):
    path = tmp_path / "old.db"
    writer = rollback_journal_file(path)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        connect_wal(path, timeout=0.5)
    assert 0.3 <= time.monotonic() - started < 2.0
    writer.close()


def test_a_database_that_cannot_use_wal_is_refused_not_returned_in_another_mode():
    """SQLite answers an impossible switch with the mode it kept (an in-memory or temporary database, a VFS
    without shared memory); the connection would otherwise come back without the WAL it promises."""
    from pathlib import Path

    with pytest.raises(sqlite3.OperationalError, match="journal mode memory, not wal"):
        connect_wal(Path(":memory:"), timeout=0.5)

"""Open a SQLite file for writing in WAL mode, safely when several connections open it at once.

Switching a file from the rollback journal to WAL needs an exclusive lock, and SQLite answers
``database is locked`` at once there instead of waiting through the busy timeout (measured here: about
1 in 20 races of eight openers on a file that was not yet in WAL mode failed). ``connect_wal`` retries
that one pragma with a short backoff until the same timeout has passed; every later statement waits
through SQLite's own busy handler as usual.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

__all__ = ["connect_wal", "rollback_if_open"]

_FIRST_BACKOFF_S = 0.005
_MAX_BACKOFF_S = 0.2


def connect_wal(path: Path, *, timeout: float = 30.0, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection to ``path`` in autocommit mode (``isolation_level=None``) with WAL journaling.

    Raises:
        sqlite3.OperationalError: the file is still locked after ``timeout`` seconds, WAL mode did not
            take (SQLite then keeps the old mode without an error), or another database error; callers wrap
            it in their own ``StorageError``.
    """
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout, check_same_thread=check_same_thread)
    deadline, backoff = time.monotonic() + timeout, _FIRST_BACKOFF_S
    try:
        while True:
            try:
                mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + backoff > deadline:
                    raise
                time.sleep(backoff)
                backoff = min(2 * backoff, _MAX_BACKOFF_S)
                continue
            if mode != "wal":  # SQLite keeps the old mode, without an error, where WAL is impossible
                raise sqlite3.OperationalError(
                    f"{path}: the database stays in journal mode {mode}, not wal (an in-memory database, "
                    "or a file system without shared memory); put it on a local disk"
                )
            return conn
    except BaseException:
        conn.close()
        raise


def rollback_if_open(conn: sqlite3.Connection) -> None:
    """Roll back a failed transaction unless SQLite already did (it does on a full disk, and a second
    ROLLBACK would then raise and hide that error); also closes one left open by a failed COMMIT."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")

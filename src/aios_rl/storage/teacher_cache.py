"""The teacher reply cache: a small SQLite file of its own (``RUN/teacher_cache.db`` by convention).

Keyed by ``sha256(backend, identity, prompt)``, the identity being what else makes the backend another judge
(its model, and for an HTTP backend its server and sampling settings, for a CLI tool its executable and
arguments); the value is the raw reply text and its cost, so a changed
parser re-reads cached replies instead of trusting old parses. It is a separate file, not a table in
``control.db``: the cache is written from many rollout threads while the control plane is the single
writer of ``control.db``, and a cache can be deleted at any time without touching the run's history.
``path=None`` keeps the cache in memory (tests, one-off calibrations).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from aios_rl.contracts.errors import StorageError
from aios_rl.storage.sqlite_wal import connect_wal

__all__ = ["CachedReply", "TeacherCache", "cache_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS teacher_cache (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    reply TEXT NOT NULL,
    cost_usd REAL,
    created_at TEXT NOT NULL
)
"""


def cache_key(backend: str, model: str, prompt: str) -> str:
    """sha256 hex of the canonical JSON of ``[backend, model, prompt]`` (no separator ambiguity)."""
    text = json.dumps([backend, model, prompt], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate hashes too


@dataclass(frozen=True)
class CachedReply:
    """One cached reply."""

    reply: str
    cost_usd: float | None


class TeacherCache:
    """Thread-safe reply cache in one SQLite file (or in memory when ``path`` is None)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            if path is None:
                self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            else:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._conn = connect_wal(Path(path), check_same_thread=False)
            self._conn.execute(_SCHEMA)
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StorageError(f"{path or ':memory:'}: cannot open the teacher cache: {exc}") from None

    def get(self, key: str) -> CachedReply | None:
        """The cached reply under ``key``, or None.

        Raises:
            StorageError: the cache file cannot be read (locked past the timeout, corrupt...).
        """
        with self._lock:
            sql = "SELECT reply, cost_usd FROM teacher_cache WHERE key = ?"
            try:
                row = self._conn.execute(sql, (key,)).fetchone()
            except sqlite3.DatabaseError as exc:
                where = self.path or ":memory:"
                raise StorageError(f"{where}: cannot read the teacher cache: {exc}") from None
        return CachedReply(str(row[0]), row[1]) if row else None

    def put(self, key: str, backend: str, model: str, reply: str, cost_usd: float | None) -> None:
        """Store (or replace) the reply under ``key``.

        Raises:
            StorageError: the cache file cannot be written (disk full, locked past the timeout...).
        """
        now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        with self._lock:
            try:
                self._conn.execute(
                    "INSERT INTO teacher_cache (key, backend, model, reply, cost_usd, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET reply = excluded.reply, cost_usd = excluded.cost_usd",
                    (key, backend, model, reply, cost_usd, now),
                )
            except sqlite3.DatabaseError as exc:
                where = self.path or ":memory:"
                raise StorageError(f"{where}: cannot write the teacher cache: {exc}") from None

    def __len__(self) -> int:
        """The number of cached replies.

        Raises:
            StorageError: the cache file cannot be read.
        """
        with self._lock:
            try:
                return int(self._conn.execute("SELECT COUNT(*) FROM teacher_cache").fetchone()[0])
            except sqlite3.DatabaseError as exc:
                where = self.path or ":memory:"
                raise StorageError(f"{where}: cannot read the teacher cache: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

"""The run store: one SQLite file per run (``RUN/control.db``), WAL mode, migrations by ``user_version``.

The control plane is event-sourced: every state change is an event row, written together with whatever
rows it carries (episodes, snapshots) in ONE transaction, so a process killed at any instant leaves either
all of an event or none of it. ``event_id`` is the primary key, which makes re-applying an event a no-op.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aios_rl.contracts.errors import StorageError
from aios_rl.storage.sqlite_wal import connect_wal, rollback_if_open

log = logging.getLogger(__name__)

# Each entry migrates user_version i -> i + 1. Never edit a released entry; append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE snapshots (
        seq INTEGER PRIMARY KEY,
        state TEXT NOT NULL
    );
    CREATE TABLE episodes (
        episode_id TEXT PRIMARY KEY,
        environment TEXT NOT NULL,
        task_id TEXT NOT NULL,
        event_seq INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX episodes_by_task ON episodes (environment, task_id);
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
)


@dataclass(frozen=True)
class StoredEvent:
    """One committed event row."""

    seq: int
    event_id: str
    kind: str
    payload: dict[str, Any]
    created_at: str


@dataclass(frozen=True)
class EpisodeRow:
    """An episode to store with an event: its JSON body plus the columns it is queried by."""

    episode_id: str
    environment: str
    task_id: str
    body: str


class RunStore:
    """SQLite-backed store of one run. Single writer (the control plane); readers may open it any time.

    Args:
        path: the database file; created with its parent directory when missing.
        synchronous: SQLite ``synchronous`` pragma. ``NORMAL`` in WAL mode never loses a committed
            transaction when the *process* dies (only an OS crash can drop the last few); ``FULL`` also
            survives power loss at the cost of an fsync per commit.
    """

    def __init__(self, path: Path, *, synchronous: str = "NORMAL") -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StorageError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the run directory {self.path.parent}: {exc}") from None
        try:
            self._conn = connect_wal(self.path)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"{self.path}: cannot open run store: {exc}") from None
        try:
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException as exc:
            self._conn.close()  # a store that failed to open holds no connection (nor its WAL) open
            if isinstance(exc, sqlite3.DatabaseError):
                raise StorageError(f"{self.path}: cannot open run store: {exc}") from None
            raise

    # -- schema ---------------------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        with self._reading():
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        self._check_version(self.schema_version)
        for version in range(self.schema_version, len(MIGRATIONS)):
            with self.transaction() as conn:
                # Read again under the write lock: another opener may have migrated while this one waited.
                if self.schema_version != version:
                    self._check_version(self.schema_version)
                    continue
                conn.executescript_in_tx(MIGRATIONS[version])  # type: ignore[attr-defined]
                conn.execute(f"PRAGMA user_version={version + 1}")
            log.info("migrated %s to schema version %d", self.path, version + 1)

    def _check_version(self, current: int) -> None:
        if current > len(MIGRATIONS):
            raise StorageError(
                f"{self.path}: schema version {current} is newer than this aios-rl ({len(MIGRATIONS)}); "
                "upgrade aios-rl to open this run"
            )

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn SQLite's errors while reading (a corrupt file, locked past the timeout) into StorageError."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"{self.path}: cannot read the run store: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[_Tx]:
        """One write transaction (``BEGIN IMMEDIATE``): committed on success, rolled back on error.

        Raises:
            StorageError: SQLite refused a statement or the commit (disk full, locked past the busy
                timeout, a constraint checked at commit); nothing of the transaction is kept.
        """
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield _Tx(self._conn)
                self._conn.execute("COMMIT")
            except BaseException:
                rollback_if_open(self._conn)  # a failed COMMIT included; not twice after SQLite's own
                raise
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"{self.path}: cannot write to the run store: {exc}") from exc

    # -- events ---------------------------------------------------------------------------------------

    def has_event(self, event_id: str) -> bool:
        with self._reading():
            row = self._conn.execute("SELECT 1 FROM events WHERE event_id = ?", (event_id,)).fetchone()
        return row is not None

    def append_event(
        self,
        event_id: str,
        kind: str,
        payload: dict[str, Any],
        created_at: str,
        *,
        episodes: Sequence[EpisodeRow] = (),
        snapshot: str | None = None,
        meta: Mapping[str, Any] | None = None,
        after_seq: int | None = None,
    ) -> int | None:
        """Commit one event with its episodes, (optionally) a state snapshot and meta values, atomically.

        ``after_seq`` (optional) is the last event the caller folded: when another process committed events
        after it, nothing is written and StorageError is raised, since the caller's state (and a snapshot of
        it) would leave those events out of the fold.

        Returns:
            The event's sequence number, or None when an event with this id was already committed
            (re-applying an event is a no-op).
        """
        with self.transaction() as tx:
            cur = tx.execute(
                "INSERT OR IGNORE INTO events (event_id, kind, payload, created_at) VALUES (?, ?, ?, ?)",
                (event_id, kind, json.dumps(payload, sort_keys=True), created_at),
            )
            if cur.rowcount == 0:
                return None
            seq = int(cur.lastrowid)
            if after_seq is not None:
                row = tx.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE seq < ?", (seq,)).fetchone()
                if int(row[0]) != after_seq:
                    raise StorageError(
                        f"{self.path}: another process committed events {after_seq + 1}..{row[0]} after this "
                        "writer read the run; nothing was written: reopen the run (one writer at a time)"
                    )
            for ep in episodes:
                tx.execute(
                    "INSERT INTO episodes (episode_id, environment, task_id, event_seq, body) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(episode_id) DO UPDATE SET "
                    "body = excluded.body, event_seq = excluded.event_seq",
                    (ep.episode_id, ep.environment, ep.task_id, seq, ep.body),
                )
            if snapshot is not None:
                tx.execute("INSERT INTO snapshots (seq, state) VALUES (?, ?)", (seq, snapshot))
                tx.execute("DELETE FROM snapshots WHERE seq < ?", (seq,))
            for key, value in (meta or {}).items():
                _put_meta(tx, key, value)
        return seq

    def events(self, after_seq: int = 0) -> Iterator[StoredEvent]:
        """Committed events in commit order, starting after ``after_seq``."""
        with self._reading():
            cur = self._conn.execute(
                "SELECT seq, event_id, kind, payload, created_at FROM events WHERE seq > ? ORDER BY seq",
                (after_seq,),
            )
            for seq, event_id, kind, payload, created_at in cur:
                yield StoredEvent(seq, event_id, kind, json.loads(payload), created_at)

    def event_count(self) -> int:
        with self._reading():
            return int(self._conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def latest_snapshot(self) -> tuple[int, str] | None:
        with self._reading():
            row = self._conn.execute("SELECT seq, state FROM snapshots ORDER BY seq DESC LIMIT 1").fetchone()
        return (int(row[0]), str(row[1])) if row else None

    # -- episodes -------------------------------------------------------------------------------------

    def episode_body(self, episode_id: str) -> str | None:
        with self._reading():
            sql = "SELECT body FROM episodes WHERE episode_id = ?"
            row = self._conn.execute(sql, (episode_id,)).fetchone()
        return str(row[0]) if row else None

    def episode_bodies(self, episode_ids: Sequence[str]) -> dict[str, str]:
        """Each stored episode's JSON body by id (ids not stored are left out)."""
        return self._episode_values(episode_ids, "body")

    def episode_policy_versions(self, episode_ids: Sequence[str]) -> dict[str, str]:
        """Each stored episode's ``policy_version`` by id, read by SQLite (``json_extract``) without bringing
        its body (megabytes for a long shell episode) into Python; ids not stored are left out."""
        return self._episode_values(episode_ids, "json_extract(body, '$.policy_version')")

    def _episode_values(self, episode_ids: Sequence[str], value: str) -> dict[str, str]:
        out: dict[str, str] = {}
        ids = list(episode_ids)
        for start in range(0, len(ids), 500):  # stay under SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self._reading():
                rows = self._conn.execute(
                    f"SELECT episode_id, {value} FROM episodes WHERE episode_id IN ({marks})", chunk
                ).fetchall()
            out.update({str(i): str(v) for i, v in rows})
        return out

    def episode_ids(self, environment: str | None = None) -> list[str]:
        with self._reading():
            if environment is None:
                rows = self._conn.execute("SELECT episode_id FROM episodes ORDER BY event_seq, episode_id")
            else:
                rows = self._conn.execute(
                    "SELECT episode_id FROM episodes WHERE environment = ? ORDER BY event_seq, episode_id",
                    (environment,),
                )
            return [str(r[0]) for r in rows]

    # -- run metadata (resolved config, versions) -----------------------------------------------------

    def set_meta(self, key: str, value: Any) -> None:
        with self.transaction() as tx:
            _put_meta(tx, key, value)

    def get_meta(self, key: str, default: Any = None) -> Any:
        with self._reading():
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Tx:
    """The connection as seen inside one transaction (only ``execute`` is allowed)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def executescript_in_tx(self, script: str) -> None:
        # executescript() would COMMIT first; run the statements one by one inside our transaction.
        for statement in script.split(";"):
            if statement.strip():
                self._conn.execute(statement)


def _put_meta(tx: _Tx, key: str, value: Any) -> None:
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(value, sort_keys=True)),
    )

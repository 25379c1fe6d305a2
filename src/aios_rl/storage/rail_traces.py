"""RAIL's intervention traces (z, b, y) in a ``rail_traces`` table of the run's ``control.db``.

Every realized intervention is one row: the 26-feature context z (JSON text, readable with ``sqlite3``),
the arm name, the realized gain y, the policy's raw hidden state (a little-endian float64 BLOB: exact and
about a quarter of JSON's size for a 4096-wide model, so the projection can be changed later), and where
it happened. The table is created with ``CREATE TABLE IF NOT EXISTS`` outside the run store's numbered
migrations, so it never moves the run's ``user_version``; WAL mode plus ``BEGIN IMMEDIATE`` and a busy
timeout let this writer share the file with the control plane's, one short transaction per append.

The rewards behind y are stored too: the group's rewards before the intervention, the branches' rewards
and the rewards of the episode branched from. Another gain definition (outcomes instead of rewards, say)
can then be scored on old traces without re-running rollouts. A table written before these columns
existed gets them with ``ALTER TABLE ... ADD COLUMN`` (in one transaction, so two openers cannot both add
them) when it is opened for writing; its old rows read back empty. ``read_only=True`` opens an existing
file without changing it (no table, no upgrade), for tools that inspect other runs.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from aios_rl.contracts.episode import utc_now
from aios_rl.contracts.errors import ContractError, StorageError
from aios_rl.storage.sqlite_wal import connect_wal, rollback_if_open

__all__ = ["RailTrace", "RailTraceStore"]

Mode = Literal["shadow", "live"]
_COLUMNS = (
    "created_at, task_id, group_id, step, mode, arm, y, z, hidden, "
    "base_rewards, branch_rewards, parent_reward"
)
# Columns added after the first release of the table: (type, default). An upgrade adds them with that
# default, and a read-only store selects the default where an old table lacks them.
_ADDED_COLUMNS = {
    "base_rewards": ("TEXT NOT NULL", "'[]'"),
    "branch_rewards": ("TEXT NOT NULL", "'[]'"),
    "parent_reward": ("REAL", "NULL"),
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rail_traces (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    task_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('shadow', 'live')),
    arm TEXT NOT NULL,
    y REAL NOT NULL,
    z TEXT NOT NULL,
    hidden BLOB NOT NULL,
    base_rewards TEXT NOT NULL DEFAULT '[]',
    branch_rewards TEXT NOT NULL DEFAULT '[]',
    parent_reward REAL
)
"""


@dataclass(frozen=True)
class RailTrace:
    """One realized intervention: context z (26,), arm b, realized gain y, and where it happened.

    Attributes:
        z: the context features the decision saw, shape ``(26,)``.
        arm: the arm's name (``Arm.name``), never the null arm.
        y: realized gain I(base ∪ branches) − I(base).
        hidden: the policy's raw hidden state at the branch step (may be empty).
        task_id / group_id / step: the task, its rollout group, and the trajectory step branched at.
        mode: the controller mode that made the decision.
        created_at: ISO-8601 UTC time.
        base_rewards: the group's rewards before the intervention (y's I(base)); may be empty.
        branch_rewards: the rewards of the intervention's branches; may be empty.
        parent_reward: the reward of the episode branched from, None when not recorded.
    """

    z: tuple[float, ...]
    arm: str
    y: float
    hidden: tuple[float, ...] = ()
    task_id: str = ""
    group_id: str = ""
    step: int = 0
    mode: Mode = "shadow"
    created_at: str = field(default_factory=utc_now)
    base_rewards: tuple[float, ...] = ()
    branch_rewards: tuple[float, ...] = ()
    parent_reward: float | None = None

    def __post_init__(self) -> None:
        problems = []
        parent = () if self.parent_reward is None else (self.parent_reward,)
        rewards = (*self.base_rewards, *self.branch_rewards, *parent)
        if not all(math.isfinite(v) for v in (*self.z, self.y, *self.hidden, *rewards)):
            problems.append("z, y, hidden and the rewards must be finite")
        if self.mode not in ("shadow", "live"):
            problems.append(f"mode: {self.mode!r}, expected 'shadow' or 'live'")
        if not self.arm:
            problems.append("arm: empty name")
        if self.step < 0:
            problems.append(f"step: {self.step}, expected >= 0")
        if problems:
            raise ContractError("invalid RAIL trace", problems)


class RailTraceStore:
    """Append-only store of :class:`RailTrace` rows in ``db_path`` (normally ``RUN/control.db``).

    Args:
        db_path: the SQLite file; created with its parent directory when missing (unless read-only).
        read_only: open an existing file without writing to it; ``append`` then raises StorageError and a
            file without the table reads as empty.
    """

    def __init__(self, db_path: Path, *, read_only: bool = False) -> None:
        self.path, self.read_only = Path(db_path), read_only
        self._lock = threading.Lock()
        try:
            if read_only:
                self._conn = sqlite3.connect(
                    f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
                )
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = connect_wal(self.path, check_same_thread=False)
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._create_or_upgrade()
            self._columns = {row[1] for row in self._conn.execute("PRAGMA table_info(rail_traces)")}
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StorageError(f"{self.path}: cannot open the RAIL trace table: {exc}") from None

    def _create_or_upgrade(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")  # the check and the ALTERs see no other writer in between
        try:
            self._conn.execute(_SCHEMA)
            present = {row[1] for row in self._conn.execute("PRAGMA table_info(rail_traces)")}
            for name, (kind, default) in _ADDED_COLUMNS.items():
                if name not in present:
                    self._conn.execute(f"ALTER TABLE rail_traces ADD COLUMN {name} {kind} DEFAULT {default}")
            self._conn.execute("COMMIT")
        except BaseException:
            rollback_if_open(self._conn)
            raise

    def append(self, trace: RailTrace) -> int:
        """Insert one trace in its own transaction; returns its row id."""
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only; cannot append a RAIL trace")
        row = (
            trace.created_at, trace.task_id, trace.group_id, trace.step, trace.mode, trace.arm,
            float(trace.y),
            json.dumps([float(v) for v in trace.z]), np.asarray(trace.hidden, dtype="<f8").tobytes(),
            json.dumps([float(v) for v in trace.base_rewards]),
            json.dumps([float(v) for v in trace.branch_rewards]),
            None if trace.parent_reward is None else float(trace.parent_reward),
        )
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    cur = self._conn.execute(
                        f"INSERT INTO rail_traces ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        row,
                    )
                    self._conn.execute("COMMIT")
                except BaseException:
                    rollback_if_open(self._conn)
                    raise
            except sqlite3.DatabaseError as exc:
                raise StorageError(f"{self.path}: cannot append a RAIL trace: {exc}") from None
        return int(cur.lastrowid)

    def all(self) -> list[RailTrace]:
        """Every stored trace, in insertion order."""
        if not self._columns:  # read-only, and the file has no trace table
            return []
        select = ", ".join(c if c in self._columns else _ADDED_COLUMNS[c][1] for c in _COLUMNS.split(", "))
        rows = self._read(f"SELECT {select} FROM rail_traces ORDER BY id")
        return [
            RailTrace(
                z=tuple(float(v) for v in json.loads(z)),
                arm=str(arm),
                y=float(y),
                hidden=tuple(np.frombuffer(hidden, dtype="<f8").tolist()),
                task_id=str(task_id),
                group_id=str(group_id),
                step=int(step),
                mode=mode,
                created_at=str(created_at),
                base_rewards=tuple(float(v) for v in json.loads(base)),
                branch_rewards=tuple(float(v) for v in json.loads(branches)),
                parent_reward=None if parent is None else float(parent),
            )
            for created_at, task_id, group_id, step, mode, arm, y, z, hidden, base, branches, parent in rows
        ]

    def last_id(self) -> int:
        """The row id of the newest trace (0 when there is none)."""
        if not self._columns:
            return 0
        return int(self._read("SELECT COALESCE(MAX(id), 0) FROM rail_traces")[0][0])

    def discard_after(self, row_id: int) -> int:
        """Delete the traces newer than ``row_id`` (an epoch's, when it was killed before its commit); returns
        how many."""
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only; cannot discard RAIL traces")
        with self._lock:
            try:
                cur = self._conn.execute("DELETE FROM rail_traces WHERE id > ?", (row_id,))
            except sqlite3.DatabaseError as exc:
                raise StorageError(f"{self.path}: cannot discard RAIL traces: {exc}") from None
        return int(cur.rowcount)

    def count(self) -> int:
        """Number of stored traces."""
        if not self._columns:
            return 0
        return int(self._read("SELECT COUNT(*) FROM rail_traces")[0][0])

    def _read(self, sql: str) -> list[tuple]:
        """The rows of one query; SQLite errors (a corrupt file, locked past the timeout) as StorageError."""
        with self._lock:
            try:
                return self._conn.execute(sql).fetchall()
            except sqlite3.DatabaseError as exc:
                raise StorageError(f"{self.path}: cannot read RAIL traces: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> RailTraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

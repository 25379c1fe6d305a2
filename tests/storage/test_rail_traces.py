"""RAIL trace store: exact round trips in a real SQLite file, WAL, coexistence with the run store."""

from __future__ import annotations

import math
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from aios_rl.contracts.errors import ContractError, StorageError
from aios_rl.storage.db import RunStore
from aios_rl.storage.rail_traces import RailTrace, RailTraceStore

# The table as the first release created it, before the reward columns.
_FIRST_SCHEMA = """
CREATE TABLE rail_traces (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL, task_id TEXT NOT NULL,
    group_id TEXT NOT NULL, step INTEGER NOT NULL, mode TEXT NOT NULL, arm TEXT NOT NULL, y REAL NOT NULL,
    z TEXT NOT NULL, hidden BLOB NOT NULL
)
"""


def make_trace(i: int, hidden_size: int = 64) -> RailTrace:
    rng = np.random.default_rng(i)
    return RailTrace(
        z=tuple(float(v) for v in rng.normal(size=26)),
        arm=f"m{1 + i % 3}-hot",
        y=float(rng.normal()) / 7,  # not exactly representable in decimal: checks exactness
        hidden=tuple(float(v) for v in rng.normal(size=hidden_size) * 1e3),
        task_id=f"task-{i % 4}",
        group_id=f"group-{i}",
        step=i,
        mode="live" if i % 2 else "shadow",
        base_rewards=tuple(float(v) for v in rng.normal(size=i % 5)),
        branch_rewards=tuple(float(v) for v in rng.normal(size=1 + i % 3)),
        parent_reward=None if i % 4 == 0 else float(rng.normal()),
    )


def test_round_trip_is_exact_and_ordered(tmp_path):
    path = tmp_path / "run" / "control.db"
    traces = [make_trace(i) for i in range(20)] + [make_trace(99, hidden_size=0)]
    with RailTraceStore(path) as store:
        ids = [store.append(t) for t in traces]
        assert ids == sorted(ids) and store.count() == 21
        assert store.all() == traces
    with RailTraceStore(path) as reopened:  # persisted, table not re-created
        assert reopened.all() == traces
        assert reopened.all()[-1].hidden == ()


def test_a_table_from_before_the_reward_columns_is_upgraded_and_its_rows_read_back_empty(tmp_path):
    path = tmp_path / "control.db"
    conn = sqlite3.connect(path)
    conn.execute(_FIRST_SCHEMA)
    conn.execute(
        "INSERT INTO rail_traces (created_at, task_id, group_id, step, mode, arm, y, z, hidden)"
        " VALUES ('2026-01-01T00:00:00+00:00', 't', 'g', 2, 'shadow', 'm1-hot', 0.25, ?, x'')",
        ("[" + ", ".join(["0.5"] * 26) + "]",),
    )
    conn.commit()
    conn.close()
    new = make_trace(3)
    with RailTraceStore(path) as store:
        store.append(new)
        old, again = store.all()
    assert (old.y, old.step, old.z) == (0.25, 2, (0.5,) * 26)
    assert (old.base_rewards, old.branch_rewards, old.parent_reward) == ((), (), None)
    assert again == new and new.branch_rewards and new.parent_reward is not None


def old_table(path, rows: int = 1) -> None:
    conn = sqlite3.connect(path)
    conn.execute(_FIRST_SCHEMA)
    for i in range(rows):
        conn.execute(
            "INSERT INTO rail_traces (created_at, task_id, group_id, step, mode, arm, y, z, hidden)"
            " VALUES ('2026-01-01T00:00:00+00:00', 't', 'g', ?, 'shadow', 'm1-hot', 0.25, ?, x'')",
            (i, "[" + ", ".join(["0.5"] * 26) + "]"),
        )
    conn.commit()
    conn.close()


def test_read_only_reads_old_tables_and_foreign_files_without_changing_them(tmp_path):
    path = tmp_path / "old.db"
    old_table(path, rows=2)
    before = path.read_bytes()
    with RailTraceStore(path, read_only=True) as store:
        traces = store.all()
        assert store.count() == 2 and [t.step for t in traces] == [0, 1]
        assert all((t.base_rewards, t.branch_rewards, t.parent_reward) == ((), (), None) for t in traces)
        with pytest.raises(StorageError, match="read-only"):
            store.append(make_trace(0))
    assert path.read_bytes() == before  # not upgraded
    other = tmp_path / "control.db"
    RunStore(other).close()  # a run without RAIL: no trace table
    with RailTraceStore(other, read_only=True) as store:
        assert store.all() == [] and store.count() == 0
    conn = sqlite3.connect(other)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert "rail_traces" not in tables
    with pytest.raises(StorageError):
        RailTraceStore(tmp_path / "missing.db", read_only=True)


def test_openers_racing_to_upgrade_an_old_table_all_succeed(tmp_path):
    path = tmp_path / "control.db"
    old_table(path)
    with ThreadPoolExecutor(max_workers=4) as pool:
        stores = list(pool.map(lambda _: RailTraceStore(path), range(8)))
    for i, store in enumerate(stores):
        store.append(make_trace(i))
    assert stores[0].count() == 9
    for store in stores:
        store.close()


def test_table_lives_in_control_db_next_to_the_run_store(tmp_path):
    path = tmp_path / "control.db"
    run = RunStore(path)
    version = run.schema_version
    store = RailTraceStore(path)
    store.append(make_trace(1))
    run.set_meta("k", 1)  # the control plane keeps writing to the same file
    store.append(make_trace(2))
    assert run.schema_version == version and run.get_meta("k") == 1 and store.count() == 2
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    query = "SELECT arm, mode, step, length(hidden) FROM rail_traces ORDER BY id LIMIT 1"
    row = conn.execute(query).fetchone()
    assert row == ("m2-hot", "live", 1, 64 * 8)  # float64 BLOB
    conn.close()
    store.close()
    run.close()
    # the run store opens a file the trace store created first
    other = tmp_path / "fresh.db"
    RailTraceStore(other).close()
    with RunStore(other) as again:
        assert again.schema_version == version


def test_each_append_commits_on_its_own(tmp_path):
    path = tmp_path / "control.db"
    store = RailTraceStore(path)
    store.append(make_trace(0))
    reader = sqlite3.connect(path)  # a second connection sees the row at once: it was committed
    assert reader.execute("SELECT COUNT(*) FROM rail_traces").fetchone()[0] == 1
    store.append(make_trace(1))
    assert reader.execute("SELECT COUNT(*) FROM rail_traces").fetchone()[0] == 2
    reader.close()
    store.close()


@pytest.mark.parametrize(
    "bad",
    [
        dict(y=math.nan), dict(z=(0.0, math.inf)), dict(mode="paused"), dict(arm=""), dict(step=-1),
        dict(base_rewards=(0.0, math.nan)), dict(branch_rewards=(math.inf,)), dict(parent_reward=-math.inf),
    ],
)
def test_invalid_traces_are_rejected_before_storage(bad):
    base = dict(z=(0.0,) * 26, arm="m1-default", y=0.1)
    with pytest.raises(ContractError):
        RailTrace(**{**base, **bad})


def test_a_full_disk_names_itself_and_the_store_appends_again_once_there_is_room(tmp_path):
    store = RailTraceStore(tmp_path / "control.db")
    store._conn.execute("PRAGMA max_page_count=6")  # the file cannot grow: SQLite's "disk is full"
    with pytest.raises(StorageError, match="disk is full"):
        for i in range(100):
            store.append(make_trace(i, hidden_size=512))
    stored = store.count()
    store._conn.execute("PRAGMA max_page_count=1000000")
    store.append(make_trace(0))
    assert store.count() == stored + 1
    store.close()


@pytest.mark.parametrize("read_only", [True, False])
def test_a_corrupt_file_is_a_storage_error_when_read(tmp_path, read_only):
    path = tmp_path / "control.db"
    with RailTraceStore(path) as store:
        for i in range(60):
            store.append(make_trace(i))
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    for offset in range(2 * 4096, len(data), 4096):  # the header page stays intact: the file still opens
        data[offset : offset + 100] = b"\xff" * 100
    path.write_bytes(bytes(data))
    with RailTraceStore(path, read_only=read_only) as store:
        for read in (store.all, store.count, store.last_id):
            with pytest.raises(StorageError, match="malformed"):
                read()

"""Writing to a run store that SQLite refuses (disk full, a failed commit): a StorageError that names the
real cause, and a store that still works once the cause is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aios_rl.contracts.errors import StorageError
from aios_rl.storage.db import EpisodeRow, RunStore


def test_a_full_disk_is_a_storage_error_naming_it_and_the_store_recovers(tmp_path: Path) -> None:
    with RunStore(tmp_path / "control.db") as store:
        store._conn.execute("PRAGMA max_page_count=8")  # the file cannot grow: SQLite's "disk is full"
        with pytest.raises(StorageError, match="disk is full"):
            for i in range(100):
                store.append_event(f"e{i}", "kind", {"blob": "x" * 2000}, "now")
        committed = store.event_count()
        store._conn.execute("PRAGMA max_page_count=1000000")
        assert store.append_event("after", "kind", {}, "now") is not None
        assert store.event_count() == committed + 1


def test_a_failed_commit_is_rolled_back_and_leaves_the_store_usable(tmp_path: Path) -> None:
    with RunStore(tmp_path / "control.db") as store:
        with store.transaction() as tx:
            tx.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
            tx.execute(
                "CREATE TABLE child (pid INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
            )
        with pytest.raises(StorageError, match="FOREIGN KEY"):
            with store.transaction() as tx:  # a deferred constraint fails at COMMIT, not at the insert
                tx.execute("INSERT INTO child (pid) VALUES (7)")
        store.set_meta("still", "writable")
        assert store.get_meta("still") == "writable"
        assert store._conn.execute("SELECT COUNT(*) FROM child").fetchone()[0] == 0


def test_policy_versions_are_read_from_the_stored_bodies(tmp_path: Path) -> None:
    """What the campaign's replay staleness reads of each lane episode, without loading its body."""
    rows = [EpisodeRow(f"e{i}", "shell", "t", json.dumps({"policy_version": f"ckpt-{i:04d}", "x": [i] * 50}))
            for i in range(3)]
    with RunStore(tmp_path / "control.db") as store:
        store.append_event("ev-1", "episodes.recorded", {}, "2026-12-06T00:00:00Z", episodes=rows)
        bodies = store.episode_bodies(["e0", "e2", "missing"])
        assert sorted(bodies) == ["e0", "e2"]
        assert store.episode_policy_versions(["e0", "e2", "missing"]) == {
            i: json.loads(body)["policy_version"] for i, body in bodies.items()
        }

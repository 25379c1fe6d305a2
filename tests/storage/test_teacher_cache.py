"""The teacher reply cache: keys, persistence across reopen, concurrent writers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from aios_rl.contracts.errors import StorageError
from aios_rl.storage.teacher_cache import TeacherCache, cache_key


def test_key_separates_backend_model_and_prompt() -> None:
    keys = {cache_key("claude", "m", "p"), cache_key("codex", "m", "p"), cache_key("claude", "n", "p"),
            cache_key("claude", "m", "q"), cache_key("claude", "mp", ""), cache_key("claude", "", "mp")}
    assert len(keys) == 6 and all(len(k) == 64 for k in keys)
    assert cache_key("a", "b", "c") == cache_key("a", "b", "c")


def test_persists_across_reopen_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "run" / "teacher_cache.db"
    cache = TeacherCache(path)
    cache.put("k", "claude", "m", "reply one", 0.5)
    cache.put("k", "claude", "m", "reply two", None)
    cache.close()
    reopened = TeacherCache(path)
    hit = reopened.get("k")
    assert hit is not None and (hit.reply, hit.cost_usd) == ("reply two", None)
    assert reopened.get("other") is None and len(reopened) == 1


def test_concurrent_writers(tmp_path: Path) -> None:
    cache = TeacherCache(tmp_path / "c.db")
    def writer(i: int) -> None:
        for j in range(50):
            cache.put(f"{i}-{j}", "b", "m", "r", 0.0)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(cache) == 400


def test_unusable_file_is_a_storage_error(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"garbage" * 100)
    with pytest.raises(StorageError, match="teacher cache"):
        TeacherCache(bad)


def test_counting_an_unreadable_cache_is_a_storage_error(tmp_path: Path) -> None:
    # get and put wrapped sqlite errors in StorageError; len() let the raw sqlite3 error out.
    cache = TeacherCache(tmp_path / "cache.db")
    cache.put("k", "claude", "m", "reply", None)
    assert len(cache) == 1
    cache.close()
    with pytest.raises(StorageError, match="cannot read the teacher cache"):
        cache.get("k")
    with pytest.raises(StorageError, match="cannot read the teacher cache"):
        len(cache)

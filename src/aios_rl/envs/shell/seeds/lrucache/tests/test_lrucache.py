import pytest

from lrucache import LRUCache


def filled(capacity=3, n=3):
    cache = LRUCache(capacity)
    for i in range(n):
        cache.put(f"k{i}", i)
    return cache


def test_init_rejects_zero_capacity():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_init_capacity_one_is_allowed():
    cache = LRUCache(1)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.keys() == ["b"]


def test_len_counts_entries():
    assert len(filled(5, 3)) == 3


def test_contains_present_and_absent():
    cache = filled()
    assert "k1" in cache
    assert "zz" not in cache


def test_get_returns_value():
    assert filled().get("k2") == 2


def test_get_missing_returns_default():
    assert filled().get("nope", -1) == -1


def test_get_counts_hits_and_misses():
    cache = filled()
    cache.get("k0")
    cache.get("k0")
    cache.get("x")
    assert (cache.hits, cache.misses) == (2, 1)


def test_get_refreshes_recency():
    cache = filled()
    cache.get("k0")
    cache.put("k3", 3)
    assert "k0" in cache
    assert "k1" not in cache


def test_peek_returns_value():
    assert filled().peek("k1") == 1


def test_peek_does_not_refresh():
    cache = filled()
    cache.peek("k0")
    cache.put("k3", 3)
    assert "k0" not in cache


def test_peek_does_not_count():
    cache = filled()
    cache.peek("k0")
    cache.peek("missing", None)
    assert (cache.hits, cache.misses) == (0, 0)


def test_put_evicts_oldest():
    cache = filled()
    cache.put("k3", 3)
    assert cache.keys() == ["k3", "k2", "k1"]


def test_put_counts_evictions():
    cache = filled(2, 5)
    assert cache.evictions == 3


def test_put_at_capacity_no_eviction():
    assert filled(3, 3).evictions == 0


def test_put_update_existing_moves_front():
    cache = filled()
    cache.put("k0", 100)
    assert cache.keys() == ["k0", "k2", "k1"]
    assert cache.get("k0") == 100


def test_put_update_does_not_grow():
    cache = filled()
    cache.put("k1", 11)
    assert len(cache) == 3
    assert cache.evictions == 0


def test_delete_present():
    cache = filled()
    assert cache.delete("k1") is True
    assert cache.keys() == ["k2", "k0"]


def test_delete_absent():
    assert filled().delete("zz") is False


def test_delete_frees_slot():
    cache = filled()
    cache.delete("k2")
    cache.put("k9", 9)
    assert cache.evictions == 0
    assert len(cache) == 3


def test_keys_most_recent_first():
    assert filled().keys() == ["k2", "k1", "k0"]


def test_keys_empty():
    assert LRUCache(2).keys() == []


def test_resize_shrink_evicts():
    cache = filled(4, 4)
    assert cache.resize(2) == 2
    assert cache.keys() == ["k3", "k2"]


def test_resize_grow_keeps_all():
    cache = filled()
    assert cache.resize(10) == 0
    cache.put("k3", 3)
    assert len(cache) == 4


def test_resize_rejects_zero():
    with pytest.raises(ValueError):
        filled().resize(0)


def test_hit_rate_zero_without_calls():
    assert LRUCache(1).hit_rate() == 0.0


def test_hit_rate_fraction():
    cache = filled()
    cache.get("k0")
    cache.get("k1")
    cache.get("k2")
    cache.get("zz")
    assert cache.hit_rate() == 0.75


def test_resize_to_one():
    cache = filled()
    assert cache.resize(1) == 2
    assert cache.keys() == ["k2"]


def test_resize_counts_only_new_evictions():
    cache = filled(2, 4)
    assert cache.resize(1) == 1
    assert cache.evictions == 3

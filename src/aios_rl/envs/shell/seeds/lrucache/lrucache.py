"""Least-recently-used cache with O(1) get/put and usage statistics."""

from typing import Any


class _Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key: Any, value: Any) -> None:
        self.key = key
        self.value = value
        self.prev: _Node | None = None
        self.next: _Node | None = None


class LRUCache:
    """A bounded mapping that evicts the least recently used entry when full.

    The linked list runs from the most recently used entry (after the head
    sentinel) to the least recently used one (before the tail sentinel).
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._map: dict[Any, _Node] = {}
        self._head = _Node(None, None)
        self._tail = _Node(None, None)
        self._head.next = self._tail
        self._tail.prev = self._head

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: Any) -> bool:
        return key in self._map

    def _unlink(self, node: _Node) -> None:
        node.prev.next = node.next
        node.next.prev = node.prev

    def _push_front(self, node: _Node) -> None:
        node.prev = self._head
        node.next = self._head.next
        self._head.next.prev = node
        self._head.next = node

    def _evict_over_capacity(self) -> None:
        while len(self._map) > self.capacity:
            oldest = self._tail.prev
            self._unlink(oldest)
            del self._map[oldest.key]
            self.evictions += 1

    def get(self, key: Any, default: Any = None) -> Any:
        """Return the value for ``key`` and mark it most recently used."""
        node = self._map.get(key)
        if node is None:
            self.misses += 1
            return default
        self.hits += 1
        self._unlink(node)
        self._push_front(node)
        return node.value

    def peek(self, key: Any, default: Any = None) -> Any:
        """Return the value for ``key`` without changing recency or statistics."""
        node = self._map.get(key)
        return default if node is None else node.value

    def put(self, key: Any, value: Any) -> None:
        """Insert or update ``key``; evicts the least recently used entry if full."""
        node = self._map.get(key)
        if node is not None:
            node.value = value
            self._unlink(node)
            self._push_front(node)
            return
        node = _Node(key, value)
        self._map[key] = node
        self._push_front(node)
        self._evict_over_capacity()

    def delete(self, key: Any) -> bool:
        """Remove ``key``; returns whether it was present."""
        node = self._map.pop(key, None)
        if node is None:
            return False
        self._unlink(node)
        return True

    def keys(self) -> list[Any]:
        """Keys from most to least recently used."""
        out = []
        node = self._head.next
        while node is not self._tail:
            out.append(node.key)
            node = node.next
        return out

    def resize(self, capacity: int) -> int:
        """Change the capacity, evicting old entries if needed; returns how many were evicted."""
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        before = self.evictions
        self.capacity = capacity
        self._evict_over_capacity()
        return self.evictions - before

    def hit_rate(self) -> float:
        """Fraction of ``get`` calls that were hits (0.0 before any call)."""
        total = self.hits + self.misses
        if total == 0:
            return 0.0
        return self.hits / total

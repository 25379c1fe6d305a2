"""Memo of sandboxed test runs: the same suite on the same files is run once per process.

Episodes of one task start from the same files, and a group of rollouts keeps reaching the same working
copies (the same patch applied, the same revert), so most test runs of a rollout group repeat one already
made. :class:`RunMemo` keeps the real result of each run, keyed by the command, the sandbox settings and
a digest of every file the command could read, and hands it back instead of running again.

Only runs that can be repeated exactly are kept: a run that timed out (its result depends on machine
load) or that changed the working copy (its effect on the files would be skipped) is never stored, nor one
with more than :data:`MAX_OUTPUT_BYTES` of output (test runs keep up to 4 MiB of it; remembering those
would break the memory bound below). A
stored run is reused only under a timeout at least ``1 / TIMEOUT_MARGIN`` times its recorded duration, so
a run that was close to its limit is run again rather than reported as finished. Results are what the
first run gave: its exact :class:`~aios_rl.envs.shell.sandbox.SandboxResult`, duration included, with the
test report it wrote (the environment keys a run by everything it ran, the reporter's code included).

The memo is an LRU of bounded size shared by every environment of the process (rollout workers are
threads), guarded by a lock. Its memory is at most ``capacity`` times :data:`MAX_OUTPUT_BYTES` (256 MiB
for 2048 runs); pytest output of the generated tasks is a few KiB, so in practice it holds tens of MiB.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

TIMEOUT_MARGIN = 0.5  # reuse a run only when it took at most half of the timeout asked for now
MAX_OUTPUT_BYTES = 128 * 1024  # a run with more stdout + stderr is run again rather than remembered


def tree_key(*parts: Any) -> str:
    """A sha256 digest of the given parts (commands, settings, file trees, test runs) by their ``repr``;
    the environment's file and progress digests use it too."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


class RunMemo:
    """A bounded, thread-safe LRU of run results; ``capacity`` 0 keeps nothing."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"run memo capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Hashable, tuple[Any, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, timeout_s: float) -> Any | None:
        """The stored value for ``key`` if its run took at most ``TIMEOUT_MARGIN * timeout_s``, else None."""
        with self._lock:
            item = self._items.get(key)
            if item is None or item[1] > TIMEOUT_MARGIN * timeout_s:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: Hashable, value: Any, duration_s: float) -> None:
        """Store ``value`` (what a run of ``duration_s`` seconds gave), evicting the least recently used."""
        if self.capacity == 0:
            return
        with self._lock:
            self._items[key] = (value, duration_s)
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every stored run and reset the counts."""
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


_SHARED: dict[int, RunMemo] = {}
_SHARED_LOCK = threading.Lock()


def shared_memo(capacity: int) -> RunMemo:
    """The process-wide memo of that capacity (one per capacity, so a config change starts afresh)."""
    with _SHARED_LOCK:
        memo = _SHARED.get(capacity)
        if memo is None:
            memo = _SHARED[capacity] = RunMemo(capacity)
        return memo

"""Token-bucket and sliding-window rate limiters with an injectable clock.

The clock is any zero-argument callable returning seconds as a float, so tests
can drive time by hand with :class:`ManualClock` instead of sleeping.
"""

from collections import deque
from typing import Callable

Clock = Callable[[], float]


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward; moving backwards is an error."""
        if seconds < 0:
            raise ValueError("time cannot go backwards")
        self.now += seconds


class TokenBucket:
    """Allows bursts up to ``capacity`` and a sustained ``rate`` tokens per second."""

    def __init__(self, capacity: float, rate: float, clock: Clock, initial: float | None = None) -> None:
        if capacity <= 0 or rate <= 0:
            raise ValueError("capacity and rate must be positive")
        self.capacity = capacity
        self.rate = rate
        self._clock = clock
        self._tokens = capacity if initial is None else min(initial, capacity)
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
            self._last = now

    def available(self) -> float:
        """Tokens that could be taken right now."""
        self._refill()
        return self._tokens

    def try_acquire(self, tokens: float = 1) -> bool:
        """Take ``tokens`` if enough are available; never blocks."""
        if tokens > self.capacity:
            return False
        self._refill()
        if self._tokens >= tokens:
            self._tokens -= tokens
            return True
        return False

    def wait_time(self, tokens: float = 1) -> float:
        """Seconds until ``tokens`` will be available; ``inf`` if above capacity."""
        if tokens > self.capacity:
            return float("inf")
        self._refill()
        missing = tokens - self._tokens
        if missing <= 0:
            return 0.0
        return missing / self.rate


class SlidingWindowLimiter:
    """At most ``limit`` events per key within any ``window`` seconds."""

    def __init__(self, limit: int, window: float, clock: Clock) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("limit must be >= 1 and window positive")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._events: dict[str, deque] = {}

    def _prune(self, key: str) -> deque:
        events = self._events.setdefault(key, deque())
        cutoff = self._clock() - self.window
        while events and events[0] <= cutoff:
            events.popleft()
        return events

    def allow(self, key: str) -> bool:
        """Record an event for ``key`` if under the limit; return whether it was allowed."""
        events = self._prune(key)
        if len(events) >= self.limit:
            return False
        events.append(self._clock())
        return True

    def remaining(self, key: str) -> int:
        """Events ``key`` may still make in the current window."""
        return self.limit - len(self._prune(key))

    def reset_at(self, key: str) -> float:
        """Time at which ``key`` gets a free slot again (now if it has one)."""
        events = self._prune(key)
        if len(events) < self.limit:
            return self._clock()
        return events[0] + self.window

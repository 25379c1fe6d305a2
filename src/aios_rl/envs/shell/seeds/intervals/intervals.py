"""Half-open interval arithmetic on ``(start, end)`` tuples.

An interval ``(start, end)`` covers every ``x`` with ``start <= x < end``. Lists of
intervals returned by this module are sorted, disjoint and non-adjacent.
"""

Interval = tuple[int, int]


def normalize(start: int, end: int) -> Interval:
    """Build an interval, rejecting ones whose end comes before their start.

    Raises:
        ValueError: if ``end < start``.
    """
    if end < start:
        raise ValueError(f"interval end {end} is before start {start}")
    return (start, end)


def length(interval: Interval) -> int:
    """Number of integer points covered by ``interval``."""
    start, end = interval
    return end - start


def overlaps(a: Interval, b: Interval) -> bool:
    """True when the two intervals share at least one point."""
    return a[0] < b[1] and b[0] < a[1]


def intersection(a: Interval, b: Interval) -> Interval | None:
    """The common part of two intervals, or ``None`` if they do not overlap."""
    start = max(a[0], b[0])
    end = min(a[1], b[1])
    if start >= end:
        return None
    return (start, end)


def merge(intervals: list[Interval]) -> list[Interval]:
    """Merge overlapping or touching intervals; empty intervals are dropped.

    Example:
        >>> merge([(5, 7), (1, 3), (3, 4)])
        [(1, 4), (5, 7)]
    """
    ordered = sorted(iv for iv in intervals if iv[1] > iv[0])
    merged: list[Interval] = []
    for start, end in ordered:
        if merged and start <= merged[-1][1]:
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: list[Interval]) -> int:
    """Number of points covered by the union of ``intervals``."""
    total = 0
    for interval in merge(intervals):
        total += length(interval)
    return total


def gaps(intervals: list[Interval], lower: int, upper: int) -> list[Interval]:
    """Pieces of ``[lower, upper)`` not covered by any interval."""
    result: list[Interval] = []
    cursor = lower
    for start, end in merge(intervals):
        if end <= lower or start >= upper:
            continue
        if start > cursor:
            result.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < upper:
        result.append((cursor, upper))
    return result


def insert(intervals: list[Interval], new: Interval) -> list[Interval]:
    """Add ``new`` to an already merged list and return the merged result."""
    before = [iv for iv in intervals if iv[1] < new[0]]
    after = [iv for iv in intervals if iv[0] > new[1]]
    middle = [iv for iv in intervals if new[0] <= iv[1] and iv[0] <= new[1]]
    start, end = new
    for iv in middle:
        start = min(start, iv[0])
        end = max(end, iv[1])
    return before + [(start, end)] + after


def find_containing(intervals: list[Interval], point: int) -> int:
    """Index of the interval of a merged list that contains ``point``, else -1."""
    lo = 0
    hi = len(intervals) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        start, end = intervals[mid]
        if point < start:
            hi = mid - 1
        elif point >= end:
            lo = mid + 1
        else:
            return mid
    return -1

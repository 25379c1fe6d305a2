"""Descriptive statistics on plain lists of numbers."""

import math


def _require_data(data: list[float], minimum: int = 1) -> None:
    if len(data) < minimum:
        raise ValueError(f"need at least {minimum} data point(s), got {len(data)}")


def mean(data: list[float]) -> float:
    """Arithmetic mean.

    Raises:
        ValueError: for an empty list.
    """
    _require_data(data)
    return sum(data) / len(data)


def median(data: list[float]) -> float:
    """Middle value; the mean of the two middle values for an even count."""
    _require_data(data)
    ordered = sorted(data)
    mid = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def mode(data: list[float]) -> float:
    """Most frequent value; the smallest one when several tie."""
    _require_data(data)
    counts: dict[float, int] = {}
    for value in data:
        counts[value] = counts.get(value, 0) + 1
    best_value = None
    best_count = 0
    for value in sorted(counts):
        if counts[value] > best_count:
            best_value = value
            best_count = counts[value]
    return best_value


def variance(data: list[float], sample: bool = True) -> float:
    """Sample variance (divides by n - 1) or population variance (divides by n)."""
    _require_data(data, 2 if sample else 1)
    centre = mean(data)
    squares = sum((x - centre) ** 2 for x in data)
    return squares / (len(data) - 1 if sample else len(data))


def stdev(data: list[float], sample: bool = True) -> float:
    """Square root of :func:`variance`."""
    return math.sqrt(variance(data, sample))


def percentile(data: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation between ranks.

    Raises:
        ValueError: if ``p`` is outside [0, 100] or the data is empty.
    """
    _require_data(data)
    if p < 0 or p > 100:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    ordered = sorted(data)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def histogram(data: list[float], bins: int, low: float, high: float) -> list[int]:
    """Counts in ``bins`` equal-width bins over ``[low, high]``.

    The last bin is closed so that ``high`` itself is counted; values outside
    the range are ignored.
    """
    if bins < 1 or high <= low:
        raise ValueError("need bins >= 1 and high > low")
    counts = [0] * bins
    width = (high - low) / bins
    for value in data:
        if value < low or value > high:
            continue
        index = int((value - low) / width)
        if index == bins:
            index = bins - 1
        counts[index] += 1
    return counts


def moving_average(data: list[float], window: int) -> list[float]:
    """Averages of every run of ``window`` consecutive values."""
    if window < 1:
        raise ValueError("window must be positive")
    if window > len(data):
        return []
    total = sum(data[:window])
    result = [total / window]
    for i in range(window, len(data)):
        total += data[i] - data[i - window]
        result.append(total / window)
    return result


def zscores(data: list[float]) -> list[float]:
    """Standardised values using the population standard deviation; zeros if constant."""
    centre = mean(data)
    spread = stdev(data, sample=False)
    if spread == 0:
        return [0.0 for _ in data]
    return [(x - centre) / spread for x in data]

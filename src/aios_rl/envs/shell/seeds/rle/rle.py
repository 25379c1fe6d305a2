"""Run-length, delta and zig-zag encodings for strings and integer sequences."""


def encode_runs(items: list) -> list[tuple[object, int]]:
    """Collapse consecutive equal items into ``(item, count)`` pairs."""
    runs: list[tuple[object, int]] = []
    for item in items:
        if runs and runs[-1][0] == item:
            runs[-1] = (item, runs[-1][1] + 1)
        else:
            runs.append((item, 1))
    return runs


def decode_runs(runs: list[tuple[object, int]]) -> list:
    """Inverse of :func:`encode_runs`.

    Raises:
        ValueError: for a run with a count below 1.
    """
    items: list = []
    for item, count in runs:
        if count < 1:
            raise ValueError(f"invalid run length {count}")
        items.extend([item] * count)
    return items


def encode(text: str) -> str:
    """Encode ``"aaab"`` as ``"3a1b"``; digits in the input are not supported.

    Raises:
        ValueError: if ``text`` contains a digit.
    """
    if any(ch.isdigit() for ch in text):
        raise ValueError("digits cannot be run-length encoded in this format")
    return "".join(f"{count}{ch}" for ch, count in encode_runs(list(text)))


def decode(encoded: str) -> str:
    """Inverse of :func:`encode`.

    Raises:
        ValueError: if a character is not preceded by a count or the text ends in digits.
    """
    out: list[str] = []
    count = ""
    for ch in encoded:
        if ch.isdigit():
            count += ch
            continue
        if not count:
            raise ValueError(f"missing count before {ch!r}")
        out.append(ch * int(count))
        count = ""
    if count:
        raise ValueError("dangling count at end of input")
    return "".join(out)


def longest_run(items: list) -> tuple[object, int]:
    """The item with the longest consecutive run and its length; first one on ties.

    Raises:
        ValueError: for an empty input.
    """
    if not items:
        raise ValueError("empty input has no runs")
    best_item, best_count = items[0], 0
    for item, count in encode_runs(items):
        if count > best_count:
            best_item, best_count = item, count
    return best_item, best_count


def delta_encode(values: list[int]) -> list[int]:
    """First value followed by the differences between neighbours."""
    if not values:
        return []
    deltas = [values[0]]
    for i in range(1, len(values)):
        deltas.append(values[i] - values[i - 1])
    return deltas


def delta_decode(deltas: list[int]) -> list[int]:
    """Inverse of :func:`delta_encode` (a running sum)."""
    values: list[int] = []
    total = 0
    for delta in deltas:
        total += delta
        values.append(total)
    return values


def zigzag(value: int) -> int:
    """Map signed to unsigned ints: 0, -1, 1, -2, 2 become 0, 1, 2, 3, 4."""
    return 2 * value if value >= 0 else -2 * value - 1


def unzigzag(value: int) -> int:
    """Inverse of :func:`zigzag`."""
    if value < 0:
        raise ValueError("zig-zag values are non-negative")
    return value // 2 if value % 2 == 0 else -(value + 1) // 2


def pack(values: list[int]) -> list[int]:
    """Delta encode then zig-zag, giving small non-negative numbers for smooth data."""
    return [zigzag(d) for d in delta_encode(values)]


def unpack(packed: list[int]) -> list[int]:
    """Inverse of :func:`pack`."""
    return delta_decode([unzigzag(p) for p in packed])

"""Conversion between integers and canonical Roman numerals (1 to 3999)."""

NUMERALS = (
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
)
VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
MAX_VALUE = 3999


def to_roman(number: int) -> str:
    """Canonical numeral for ``number``.

    Raises:
        ValueError: if ``number`` is outside 1-3999.
    """
    if number < 1 or number > MAX_VALUE:
        raise ValueError(f"{number} cannot be written as a Roman numeral")
    parts = []
    remaining = number
    for value, symbol in NUMERALS:
        count, remaining = divmod(remaining, value)
        parts.append(symbol * count)
    return "".join(parts)


def parse_roman(text: str) -> int:
    """Value of a numeral using the subtractive rule, without checking canonical form.

    Raises:
        ValueError: on characters that are not Roman digits or on empty input.
    """
    text = text.strip().upper()
    if not text:
        raise ValueError("empty numeral")
    total = 0
    for i in range(len(text)):
        if text[i] not in VALUES:
            raise ValueError(f"not a Roman digit: {text[i]!r}")
        value = VALUES[text[i]]
        if i + 1 < len(text) and text[i + 1] in VALUES and VALUES[text[i + 1]] > value:
            total -= value
        else:
            total += value
    return total


def from_roman(text: str) -> int:
    """Strictly parse a canonical numeral such as ``MCMXCIV``.

    Raises:
        ValueError: for non-canonical forms such as ``IIII`` or ``VX``.
    """
    value = parse_roman(text)
    if value < 1 or value > MAX_VALUE or to_roman(value) != text.strip().upper():
        raise ValueError(f"not a canonical Roman numeral: {text!r}")
    return value


def is_roman(text: str) -> bool:
    """True if ``text`` is a canonical numeral."""
    try:
        from_roman(text)
    except ValueError:
        return False
    return True


def add_roman(a: str, b: str) -> str:
    """Sum of two numerals as a numeral."""
    return to_roman(from_roman(a) + from_roman(b))


def subtract_roman(a: str, b: str) -> str:
    """Difference ``a - b`` as a numeral; raises ``ValueError`` unless it is positive."""
    return to_roman(from_roman(a) - from_roman(b))


def sort_numerals(numerals: list[str], reverse: bool = False) -> list[str]:
    """Sort numerals by value."""
    return sorted(numerals, key=from_roman, reverse=reverse)

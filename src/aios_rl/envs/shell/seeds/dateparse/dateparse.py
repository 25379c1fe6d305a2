"""Calendar arithmetic and date parsing on plain ``(year, month, day)`` tuples."""

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
THIRTY_DAY_MONTHS = (4, 6, 9, 11)

Date = tuple[int, int, int]


def is_leap_year(year: int) -> bool:
    """Gregorian leap year rule: every 4th year, except centuries not divisible by 400."""
    return (year % 4 == 0 and year % 100 != 0) or year % 400 == 0


def days_in_month(year: int, month: int) -> int:
    """Number of days in ``month`` (1-12) of ``year``.

    Raises:
        ValueError: for a month outside 1-12.
    """
    if month < 1 or month > 12:
        raise ValueError(f"month out of range: {month}")
    if month == 2:
        return 29 if is_leap_year(year) else 28
    if month in THIRTY_DAY_MONTHS:
        return 30
    return 31


def validate(year: int, month: int, day: int) -> Date:
    """Return the date as a tuple if it exists, else raise ``ValueError``."""
    if year < 1 or year > 9999:
        raise ValueError(f"year out of range: {year}")
    if day < 1 or day > days_in_month(year, month):
        raise ValueError(f"day out of range: {day}")
    return (year, month, day)


def parse_date(text: str) -> Date:
    """Parse ``2024-03-05``, ``05/03/2024`` (day first) or ``5 Mar 2024``.

    Raises:
        ValueError: when the text matches none of the formats or the date does not exist.
    """
    text = text.strip()
    if "-" in text:
        parts = text.split("-")
        if len(parts) != 3 or len(parts[0]) != 4:
            raise ValueError(f"bad ISO date: {text!r}")
        year, month, day = (int(p) for p in parts)
    elif "/" in text:
        parts = text.split("/")
        if len(parts) != 3:
            raise ValueError(f"bad day-first date: {text!r}")
        day, month, year = (int(p) for p in parts)
    else:
        parts = text.split()
        if len(parts) != 3:
            raise ValueError(f"unrecognised date: {text!r}")
        name = parts[1][:3].lower()
        if name not in MONTHS:
            raise ValueError(f"unknown month name: {parts[1]!r}")
        day, month, year = int(parts[0]), MONTHS.index(name) + 1, int(parts[2])
    return validate(year, month, day)


def day_of_year(year: int, month: int, day: int) -> int:
    """1-based position of the date within its year."""
    total = day
    for m in range(1, month):
        total += days_in_month(year, m)
    return total


def to_ordinal(year: int, month: int, day: int) -> int:
    """Days since 0001-01-01, which has ordinal 1 (same as ``date.toordinal``)."""
    y = year - 1
    return y * 365 + y // 4 - y // 100 + y // 400 + day_of_year(year, month, day)


def from_ordinal(ordinal: int) -> Date:
    """Inverse of :func:`to_ordinal`."""
    if ordinal < 1:
        raise ValueError(f"ordinal must be positive, got {ordinal}")
    year = max(1, (ordinal - 1) * 400 // 146097)
    while to_ordinal(year + 1, 1, 1) <= ordinal:
        year += 1
    while to_ordinal(year, 1, 1) > ordinal:
        year -= 1
    remaining = ordinal - to_ordinal(year, 1, 1) + 1
    month = 1
    while remaining > days_in_month(year, month):
        remaining -= days_in_month(year, month)
        month += 1
    return (year, month, remaining)


def add_days(date: Date, days: int) -> Date:
    """The date ``days`` days after ``date`` (before it when negative)."""
    return from_ordinal(to_ordinal(*date) + days)


def weekday(year: int, month: int, day: int) -> int:
    """Day of the week with Monday as 0 and Sunday as 6."""
    return (to_ordinal(year, month, day) + 6) % 7


def format_iso(date: Date) -> str:
    """Format as ``YYYY-MM-DD`` with zero padding."""
    year, month, day = date
    return f"{year:04d}-{month:02d}-{day:02d}"

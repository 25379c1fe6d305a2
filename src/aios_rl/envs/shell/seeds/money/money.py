"""Money arithmetic on integer cents, so that no binary floating point is involved."""

BASIS_POINTS = 10_000


def parse_amount(text: str) -> int:
    """Parse ``"$1,234.5"``, ``"-12.05"`` or ``"7"`` into cents.

    Raises:
        ValueError: on more than two decimals or characters that are not part of an amount.
    """
    cleaned = text.strip().replace(",", "").replace("$", "")
    negative = cleaned.startswith("-")
    if negative:
        cleaned = cleaned[1:]
    whole, _, frac = cleaned.partition(".")
    if not whole:
        whole = "0"
    if len(frac) > 2:
        raise ValueError(f"too many decimals in {text!r}")
    if not whole.isdigit() or (frac and not frac.isdigit()):
        raise ValueError(f"not an amount: {text!r}")
    cents = int(whole) * 100 + int(frac.ljust(2, "0"))
    return -cents if negative else cents


def format_cents(cents: int, symbol: str = "$") -> str:
    """Format cents as ``-$1,234.56``."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    digits = str(whole)
    groups = []
    while len(digits) > 3:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    groups.insert(0, digits)
    return f"{sign}{symbol}{','.join(groups)}.{frac:02d}"


def round_half_even(numerator: int, denominator: int) -> int:
    """Divide and round to the nearest integer, ties to the even neighbour.

    Raises:
        ZeroDivisionError: if ``denominator`` is zero.
    """
    if denominator < 0:
        numerator, denominator = -numerator, -denominator
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2 == 1):
        quotient += 1
    return quotient


def apply_rate(cents: int, basis_points: int) -> int:
    """``cents * basis_points / 10000`` rounded half to even (100 bp = 1 %)."""
    return round_half_even(cents * basis_points, BASIS_POINTS)


def add_tax(cents: int, basis_points: int) -> tuple[int, int]:
    """Return ``(tax, total)`` for a net amount and a tax rate in basis points."""
    tax = apply_rate(cents, basis_points)
    return tax, cents + tax


def allocate(cents: int, weights: list[int]) -> list[int]:
    """Split ``cents`` in proportion to ``weights`` so that the parts add up exactly.

    Each part gets its floor share; leftover cents go to the largest fractional
    remainders, earlier parts first on ties.

    Raises:
        ValueError: for an empty weight list, negative weights or a zero total weight.
    """
    if not weights or any(w < 0 for w in weights):
        raise ValueError("weights must be a non-empty list of non-negative integers")
    total = sum(weights)
    if total == 0:
        raise ValueError("weights must not all be zero")
    parts = []
    remainders = []
    for index, weight in enumerate(weights):
        share, rest = divmod(cents * weight, total)
        parts.append(share)
        remainders.append((-rest, index))
    leftover = cents - sum(parts)
    for _, index in sorted(remainders)[:leftover]:
        parts[index] += 1
    return parts


def split_evenly(cents: int, people: int) -> list[int]:
    """Split a bill between ``people``; the first ones pay the odd cents."""
    if people < 1:
        raise ValueError("need at least one person")
    base, extra = divmod(cents, people)
    return [base + 1 if i < extra else base for i in range(people)]

"""Text normalisation helpers for search indexing and display."""

import unicodedata

SMALL_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "but", "by", "for", "in", "nor", "of", "on", "or", "the", "to"}
)


def collapse_whitespace(text: str) -> str:
    """Replace every run of whitespace with a single space and trim both ends.

    Example:
        >>> collapse_whitespace("  a \\t b\\n")
        'a b'
    """
    out: list[str] = []
    pending = False
    for ch in text:
        if ch.isspace():
            pending = len(out) > 0
            continue
        if pending:
            out.append(" ")
            pending = False
        out.append(ch)
    return "".join(out)


def strip_accents(text: str) -> str:
    """Remove combining marks, so that ``"café"`` becomes ``"cafe"``."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = [ch for ch in decomposed if not unicodedata.combining(ch)]
    return unicodedata.normalize("NFC", "".join(kept))


def slugify(text: str, max_length: int = 50, separator: str = "-") -> str:
    """Turn a title into a lowercase ASCII slug of at most ``max_length`` characters.

    Words are runs of ASCII letters and digits; everything else separates words.
    A slug that is too long is cut at the last separator that fits, so no word is
    broken unless the first word alone is longer than ``max_length``.
    """
    base = strip_accents(text).lower()
    words: list[str] = []
    current: list[str] = []
    for ch in base:
        if ch.isascii() and ch.isalnum():
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    slug = separator.join(words)
    if len(slug) <= max_length:
        return slug
    cut = slug[:max_length]
    if slug[max_length] == separator:
        return cut
    last = cut.rfind(separator)
    if last > 0:
        return cut[:last]
    return cut


def truncate(text: str, width: int, ellipsis: str = "...") -> str:
    """Shorten ``text`` to at most ``width`` characters, ending with ``ellipsis``.

    Raises:
        ValueError: if ``width`` is smaller than the ellipsis itself.
    """
    if width < len(ellipsis):
        raise ValueError(f"width {width} is shorter than the ellipsis {ellipsis!r}")
    if len(text) <= width:
        return text
    return text[: width - len(ellipsis)].rstrip() + ellipsis


def title_case(text: str) -> str:
    """Headline-style title case: small words stay lowercase except first and last."""
    words = text.split()
    result: list[str] = []
    for index, word in enumerate(words):
        lower = word.lower()
        is_edge = index == 0 or index == len(words) - 1
        if lower in SMALL_WORDS and not is_edge:
            result.append(lower)
        else:
            result.append(lower[:1].upper() + lower[1:])
    return " ".join(result)


def wrap(text: str, width: int) -> list[str]:
    """Greedy word wrap into lines of at most ``width`` characters.

    Words longer than ``width`` are split into chunks of exactly ``width``.

    Raises:
        ValueError: if ``width`` is less than 1.
    """
    if width < 1:
        raise ValueError("width must be positive")
    lines: list[str] = []
    line = ""
    for word in text.split():
        while len(word) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:width])
            word = word[width:]
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line = line + " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines

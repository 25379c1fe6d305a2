"""A small RFC 4180 style CSV parser and writer."""


class CsvError(ValueError):
    """Raised for malformed CSV input, with the 1-based line number."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse(text: str, delimiter: str = ",", quote: str = '"') -> list[list[str]]:
    """Parse CSV text into rows of fields.

    Quoted fields may contain the delimiter, newlines and doubled quotes. A
    trailing newline does not produce an empty row.

    Raises:
        CsvError: on an unterminated quote or text right after a closing quote.
    """
    rows: list[list[str]] = []
    row: list[str] = []
    field: list[str] = []
    in_quotes = False
    after_quote = False
    line = 1
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if in_quotes:
            if ch == quote and i + 1 < n and text[i + 1] == quote:
                field.append(quote)
                i += 1
            elif ch == quote:
                in_quotes = False
                after_quote = True
            else:
                if ch == "\n":
                    line += 1
                field.append(ch)
        elif ch == delimiter:
            row.append("".join(field))
            field = []
            after_quote = False
        elif ch == "\n":
            row.append("".join(field))
            rows.append(row)
            row, field = [], []
            after_quote = False
            line += 1
        elif ch == "\r":
            pass
        elif after_quote:
            raise CsvError(f"unexpected {ch!r} after closing quote", line)
        elif ch == quote and not field:
            in_quotes = True
        else:
            field.append(ch)
        i += 1
    if in_quotes:
        raise CsvError("unterminated quoted field", line)
    if field or row or after_quote:
        row.append("".join(field))
        rows.append(row)
    return rows


def parse_line(line: str, delimiter: str = ",") -> list[str]:
    """Parse a single record; an empty line is one empty field."""
    rows = parse(line, delimiter)
    return rows[0] if rows else [""]


def to_dicts(rows: list[list[str]]) -> list[dict[str, str]]:
    """Use the first row as header and map every other row to a dict.

    Raises:
        CsvError: when a row has a different number of fields than the header.
    """
    if not rows:
        return []
    header = rows[0]
    records = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise CsvError(f"expected {len(header)} fields, got {len(row)}", number)
        records.append(dict(zip(header, row)))
    return records


def column(rows: list[list[str]], name: str) -> list[str]:
    """Values of the column called ``name`` (header row excluded).

    Raises:
        KeyError: if no header is called ``name``.
    """
    if not rows or name not in rows[0]:
        raise KeyError(name)
    index = rows[0].index(name)
    return [row[index] for row in rows[1:]]


def needs_quoting(field: str, delimiter: str = ",", quote: str = '"') -> bool:
    """True if writing ``field`` unquoted would change how it parses."""
    if field != field.strip(" "):
        return True
    return any(ch in field for ch in (delimiter, quote, "\n", "\r"))


def format_row(fields: list[str], delimiter: str = ",", quote: str = '"') -> str:
    """Serialise one row, quoting only the fields that need it."""
    out = []
    for field in fields:
        if needs_quoting(field, delimiter, quote):
            out.append(quote + field.replace(quote, quote + quote) + quote)
        else:
            out.append(field)
    return delimiter.join(out)

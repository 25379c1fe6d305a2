import pytest

from csvparse import CsvError, column, format_row, needs_quoting, parse, parse_line, to_dicts


def test_parse_simple_rows():
    assert parse("a,b\n1,2\n") == [["a", "b"], ["1", "2"]]


def test_parse_without_trailing_newline():
    assert parse("a,b\n1,2") == [["a", "b"], ["1", "2"]]


def test_parse_empty_fields():
    assert parse(",x,\n") == [["", "x", ""]]


def test_parse_quoted_delimiter():
    assert parse('"a,b",c') == [["a,b", "c"]]


def test_parse_doubled_quote():
    assert parse('"say ""hi""",x') == [['say "hi"', "x"]]


def test_parse_quoted_newline():
    assert parse('"line1\nline2",z\n') == [["line1\nline2", "z"]]


def test_parse_crlf():
    assert parse("a,b\r\nc,d\r\n") == [["a", "b"], ["c", "d"]]


def test_parse_custom_delimiter():
    assert parse("a;b;c", delimiter=";") == [["a", "b", "c"]]


def test_parse_empty_quoted_last_field():
    assert parse('a,""') == [["a", ""]]


def test_parse_quote_inside_unquoted_field_is_literal():
    assert parse('ab"c,d') == [['ab"c', "d"]]


def test_parse_unterminated_quote():
    with pytest.raises(CsvError) as info:
        parse('a\n"open,b\n')
    assert info.value.line == 3


def test_parse_text_after_closing_quote():
    with pytest.raises(CsvError) as info:
        parse('x\n"a"b,c')
    assert info.value.line == 2


def test_parse_empty_text():
    assert parse("") == []


def test_parse_line_fields():
    assert parse_line("1, 2 ,3") == ["1", " 2 ", "3"]


def test_parse_line_empty():
    assert parse_line("") == [""]


def test_to_dicts_maps_header():
    rows = [["id", "name"], ["1", "ann"], ["2", "bob"]]
    assert to_dicts(rows) == [{"id": "1", "name": "ann"}, {"id": "2", "name": "bob"}]


def test_to_dicts_header_only():
    assert to_dicts([["id"]]) == []


def test_to_dicts_no_rows():
    assert to_dicts([]) == []


def test_to_dicts_ragged_row_reports_line():
    with pytest.raises(CsvError) as info:
        to_dicts([["a", "b"], ["1", "2"], ["3"]])
    assert info.value.line == 3


def test_column_values():
    assert column([["a", "b"], ["1", "2"], ["3", "4"]], "b") == ["2", "4"]


def test_column_first():
    assert column([["a", "b"], ["1", "2"]], "a") == ["1"]


def test_column_missing_raises():
    with pytest.raises(KeyError):
        column([["a"]], "z")


def test_needs_quoting_plain():
    assert not needs_quoting("hello")


def test_needs_quoting_delimiter_and_quote():
    assert needs_quoting("a,b")
    assert needs_quoting('say "x"')


def test_needs_quoting_surrounding_space():
    assert needs_quoting(" padded")


def test_needs_quoting_newline():
    assert needs_quoting("a\nb")


def test_format_row_plain():
    assert format_row(["a", "b", "c"]) == "a,b,c"


def test_format_row_quotes_when_needed():
    assert format_row(["a,b", 'q"q', "x"]) == '"a,b","q""q",x'


def test_format_row_custom_delimiter():
    assert format_row(["a;b", "c"], delimiter=";") == '"a;b";c'


def test_format_row_round_trip():
    fields = ["x, y", 'he said "no"', "multi\nline", ""]
    assert parse(format_row(fields)) == [fields]


def test_parse_doubled_quote_at_end_is_unterminated():
    with pytest.raises(CsvError, match="unterminated"):
        parse('"ab""')

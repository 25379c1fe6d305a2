import pytest

from roman import add_roman, from_roman, is_roman, parse_roman, sort_numerals, subtract_roman, to_roman


def test_to_roman_one():
    assert to_roman(1) == "I"


def test_to_roman_subtractive_forms():
    assert [to_roman(n) for n in (4, 9, 40, 90, 400, 900)] == ["IV", "IX", "XL", "XC", "CD", "CM"]


def test_to_roman_year():
    assert to_roman(1994) == "MCMXCIV"


def test_to_roman_repeats():
    assert to_roman(38) == "XXXVIII"


def test_to_roman_uses_d():
    assert to_roman(2768) == "MMDCCLXVIII"


def test_to_roman_maximum():
    assert to_roman(3999) == "MMMCMXCIX"


def test_to_roman_zero_raises():
    with pytest.raises(ValueError):
        to_roman(0)


def test_to_roman_too_large_raises():
    with pytest.raises(ValueError):
        to_roman(4000)


def test_parse_roman_additive():
    assert parse_roman("XVI") == 16


def test_parse_roman_subtractive():
    assert parse_roman("XLIX") == 49


def test_parse_roman_lowercase_and_spaces():
    assert parse_roman(" mmxxiv ") == 2024


def test_parse_roman_non_canonical_allowed():
    assert parse_roman("IIII") == 4


def test_parse_roman_bad_digit():
    with pytest.raises(ValueError):
        parse_roman("XIZ")


def test_parse_roman_empty():
    with pytest.raises(ValueError):
        parse_roman("  ")


def test_from_roman_canonical():
    assert from_roman("MCMXCIV") == 1994


def test_from_roman_last_digit_counts():
    assert from_roman("VI") == 6


def test_from_roman_maximum():
    assert from_roman("MMMCMXCIX") == 3999


def test_from_roman_rejects_non_canonical():
    with pytest.raises(ValueError):
        from_roman("IIII")


def test_from_roman_rejects_bad_order():
    with pytest.raises(ValueError):
        from_roman("VX")


def test_from_roman_round_trip_range():
    assert all(from_roman(to_roman(n)) == n for n in range(1, 400))


def test_is_roman_true():
    assert is_roman("CDXLIV")


def test_is_roman_false():
    assert not is_roman("IC")


def test_is_roman_garbage():
    assert not is_roman("hello")


def test_add_roman_simple():
    assert add_roman("XIV", "VI") == "XX"


def test_add_roman_overflow_raises():
    with pytest.raises(ValueError):
        add_roman("MMM", "M")


def test_subtract_roman_simple():
    assert subtract_roman("L", "IX") == "XLI"


def test_subtract_roman_non_positive_raises():
    with pytest.raises(ValueError):
        subtract_roman("V", "V")


def test_sort_numerals_ascending():
    assert sort_numerals(["X", "IX", "XI", "IV"]) == ["IV", "IX", "X", "XI"]


def test_sort_numerals_descending():
    assert sort_numerals(["I", "M", "C"], reverse=True) == ["M", "C", "I"]

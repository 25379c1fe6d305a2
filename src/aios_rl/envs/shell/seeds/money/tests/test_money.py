import pytest

from money import add_tax, allocate, apply_rate, format_cents, parse_amount, round_half_even, split_evenly


def test_parse_amount_with_symbol_and_commas():
    assert parse_amount("$1,234.56") == 123456


def test_parse_amount_one_decimal():
    assert parse_amount("12.5") == 1250


def test_parse_amount_whole():
    assert parse_amount("7") == 700


def test_parse_amount_negative():
    assert parse_amount("-0.05") == -5


def test_parse_amount_negative_with_whole_part():
    assert parse_amount("-12.50") == -1250


def test_parse_amount_leading_dot():
    assert parse_amount(".99") == 99


def test_parse_amount_too_many_decimals():
    with pytest.raises(ValueError):
        parse_amount("1.234")


def test_parse_amount_garbage():
    with pytest.raises(ValueError):
        parse_amount("12a")


def test_format_cents_thousands():
    assert format_cents(123456789) == "$1,234,567.89"


def test_format_cents_exactly_three_digits():
    assert format_cents(99900) == "$999.00"


def test_format_cents_four_digits():
    assert format_cents(100000) == "$1,000.00"


def test_format_cents_negative_small():
    assert format_cents(-5) == "-$0.05"


def test_format_cents_zero_has_no_sign():
    assert format_cents(0) == "$0.00"


def test_format_cents_symbol():
    assert format_cents(250, symbol="€") == "€2.50"


def test_round_half_even_down_to_even():
    assert round_half_even(5, 2) == 2


def test_round_half_even_up_to_even():
    assert round_half_even(7, 2) == 4


def test_round_half_even_above_half():
    assert round_half_even(7, 4) == 2


def test_round_half_even_below_half():
    assert round_half_even(5, 4) == 1


def test_round_half_even_negative():
    assert round_half_even(-5, 2) == -2
    assert round_half_even(-7, 4) == -2


def test_round_half_even_negative_denominator():
    assert round_half_even(7, -2) == -4


def test_apply_rate_percent():
    assert apply_rate(2000, 1500) == 300


def test_apply_rate_rounds_half_even():
    assert apply_rate(50, 100) == 0
    assert apply_rate(150, 100) == 2


def test_add_tax_returns_tax_and_total():
    assert add_tax(1999, 2000) == (400, 2399)


def test_allocate_exact():
    assert allocate(100, [1, 1, 2]) == [25, 25, 50]


def test_allocate_distributes_leftover():
    assert allocate(100, [1, 1, 1]) == [34, 33, 33]


def test_allocate_largest_remainder():
    assert allocate(10, [3, 7, 1]) == [3, 6, 1]


def test_allocate_sum_preserved():
    parts = allocate(1001, [5, 3, 2, 7])
    assert sum(parts) == 1001


def test_allocate_zero_weight_gets_nothing():
    assert allocate(7, [0, 1]) == [0, 7]


def test_allocate_rejects_all_zero():
    with pytest.raises(ValueError):
        allocate(10, [0, 0])


def test_split_evenly_remainder_first():
    assert split_evenly(1000, 3) == [334, 333, 333]


def test_split_evenly_exact():
    assert split_evenly(900, 3) == [300, 300, 300]


def test_allocate_rejects_negative_weight():
    with pytest.raises(ValueError):
        allocate(10, [-1, 2])


def test_split_evenly_single_person():
    assert split_evenly(1001, 1) == [1001]


def test_split_evenly_rejects_zero_people():
    with pytest.raises(ValueError):
        split_evenly(100, 0)

import datetime

import pytest

from dateparse import (
    add_days,
    day_of_year,
    days_in_month,
    format_iso,
    from_ordinal,
    is_leap_year,
    parse_date,
    to_ordinal,
    validate,
    weekday,
)


def test_is_leap_year_divisible_by_four():
    assert is_leap_year(2024)


def test_is_leap_year_common_year():
    assert not is_leap_year(2023)


def test_is_leap_year_century():
    assert not is_leap_year(1900)


def test_is_leap_year_four_hundred():
    assert is_leap_year(2000)


def test_days_in_month_february_leap():
    assert days_in_month(2024, 2) == 29


def test_days_in_month_february_common():
    assert days_in_month(2023, 2) == 28


def test_days_in_month_thirty():
    assert days_in_month(2023, 11) == 30


def test_days_in_month_september_october():
    assert (days_in_month(2023, 9), days_in_month(2023, 10)) == (30, 31)


def test_days_in_month_thirty_one():
    assert [days_in_month(2023, m) for m in (1, 12)] == [31, 31]


def test_days_in_month_rejects_zero_and_thirteen():
    with pytest.raises(ValueError):
        days_in_month(2023, 0)
    with pytest.raises(ValueError):
        days_in_month(2023, 13)


def test_validate_accepts_last_day():
    assert validate(2024, 2, 29) == (2024, 2, 29)


def test_validate_rejects_day_after_month_end():
    with pytest.raises(ValueError):
        validate(2023, 2, 29)


def test_validate_rejects_day_zero():
    with pytest.raises(ValueError):
        validate(2023, 5, 0)


def test_validate_year_bounds():
    assert validate(1, 1, 1) == (1, 1, 1)
    with pytest.raises(ValueError):
        validate(0, 1, 1)


def test_validate_last_supported_year():
    assert validate(9999, 12, 31) == (9999, 12, 31)
    with pytest.raises(ValueError):
        validate(10000, 1, 1)


def test_parse_date_iso():
    assert parse_date("2024-03-05") == (2024, 3, 5)


def test_parse_date_day_first():
    assert parse_date("05/03/2024") == (2024, 3, 5)


def test_parse_date_month_name():
    assert parse_date(" 7 September 1999 ") == (1999, 9, 7)


def test_parse_date_december_name():
    assert parse_date("31 Dec 2020") == (2020, 12, 31)


def test_parse_date_rejects_unknown_month():
    with pytest.raises(ValueError, match="Foo"):
        parse_date("3 Foo 2020")


def test_parse_date_rejects_short_iso_year():
    with pytest.raises(ValueError):
        parse_date("24-03-05")


def test_parse_date_rejects_invalid_day():
    with pytest.raises(ValueError):
        parse_date("31/04/2024")


def test_day_of_year_first():
    assert day_of_year(2023, 1, 1) == 1


def test_day_of_year_after_leap_february():
    assert day_of_year(2024, 3, 1) == 61


def test_day_of_year_last():
    assert day_of_year(2023, 12, 31) == 365


def test_to_ordinal_epoch():
    assert to_ordinal(1, 1, 1) == 1


def test_to_ordinal_matches_datetime():
    for y, m, d in [(1970, 1, 1), (2000, 2, 29), (2024, 12, 31), (1600, 3, 1)]:
        assert to_ordinal(y, m, d) == datetime.date(y, m, d).toordinal()


def test_from_ordinal_round_trip():
    for y, m, d in [(1, 1, 1), (1999, 12, 31), (2000, 1, 1), (2024, 2, 29), (9999, 12, 31)]:
        assert from_ordinal(datetime.date(y, m, d).toordinal()) == (y, m, d)


def test_from_ordinal_rejects_zero():
    with pytest.raises(ValueError):
        from_ordinal(0)


def test_add_days_crosses_month():
    assert add_days((2024, 1, 31), 1) == (2024, 2, 1)


def test_add_days_crosses_leap_day():
    assert add_days((2024, 2, 28), 2) == (2024, 3, 1)


def test_add_days_negative_crosses_year():
    assert add_days((2024, 1, 1), -1) == (2023, 12, 31)


def test_weekday_known_monday():
    assert weekday(2024, 1, 1) == 0


def test_weekday_known_sunday():
    assert weekday(2023, 12, 31) == 6


def test_weekday_matches_datetime():
    assert weekday(1969, 7, 20) == datetime.date(1969, 7, 20).weekday()


def test_format_iso_pads():
    assert format_iso((987, 3, 5)) == "0987-03-05"


def test_format_iso_round_trip():
    assert parse_date(format_iso((2021, 11, 9))) == (2021, 11, 9)

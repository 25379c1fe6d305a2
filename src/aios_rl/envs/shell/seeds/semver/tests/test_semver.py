import pytest

from semver import Version, bump, compare, max_satisfying, parse, satisfies


def v(text):
    return parse(text)


def test_parse_release():
    assert parse("1.2.3") == Version(1, 2, 3)


def test_parse_prerelease_and_build():
    assert parse("v2.0.0-rc.1+build.5") == Version(2, 0, 0, ("rc", "1"))


def test_parse_rejects_two_parts():
    with pytest.raises(ValueError):
        parse("1.2")


def test_parse_rejects_leading_zero():
    with pytest.raises(ValueError):
        parse("1.02.3")


def test_parse_allows_zero():
    assert parse("0.0.0") == Version(0, 0, 0)


def test_parse_rejects_empty_prerelease_part():
    with pytest.raises(ValueError):
        parse("1.0.0-alpha..1")


def test_str_round_trip():
    assert str(parse("3.4.5-beta.2")) == "3.4.5-beta.2"


def test_compare_major_minor_patch():
    assert compare(v("1.2.3"), v("1.10.0")) == -1
    assert compare(v("2.0.0"), v("1.9.9")) == 1


def test_compare_equal():
    assert compare(v("1.2.3"), v("1.2.3+meta")) == 0


def test_compare_prerelease_before_release():
    assert compare(v("1.0.0-alpha"), v("1.0.0")) == -1
    assert compare(v("1.0.0"), v("1.0.0-alpha")) == 1


def test_compare_numeric_identifiers():
    assert compare(v("1.0.0-rc.2"), v("1.0.0-rc.10")) == -1


def test_compare_numeric_before_alpha():
    assert compare(v("1.0.0-1"), v("1.0.0-alpha")) == -1
    assert compare(v("1.0.0-beta"), v("1.0.0-2")) == 1


def test_compare_longer_prerelease_wins():
    assert compare(v("1.0.0-alpha.1"), v("1.0.0-alpha")) == 1


def test_compare_shorter_prerelease_loses():
    assert compare(v("1.0.0-alpha"), v("1.0.0-alpha.1")) == -1


def test_compare_equal_prerelease():
    assert compare(v("1.0.0-rc.1"), v("1.0.0-rc.1")) == 0


def test_bump_major():
    assert bump(v("1.4.7"), "major") == Version(2, 0, 0)


def test_bump_minor():
    assert bump(v("1.4.7"), "minor") == Version(1, 5, 0)


def test_bump_patch():
    assert bump(v("1.4.7"), "patch") == Version(1, 4, 8)


def test_bump_patch_of_prerelease():
    assert bump(v("1.4.7-rc.1"), "patch") == Version(1, 4, 7)


def test_bump_unknown_part():
    with pytest.raises(ValueError):
        bump(v("1.0.0"), "micro")


def test_satisfies_caret_major():
    assert satisfies(v("1.9.0"), "^1.2.3")
    assert not satisfies(v("2.0.0"), "^1.2.3")


def test_satisfies_caret_lower_bound():
    assert not satisfies(v("1.2.2"), "^1.2.3")


def test_satisfies_caret_includes_base():
    assert satisfies(v("1.2.3"), "^1.2.3")


def test_satisfies_caret_zero_minor_one():
    assert satisfies(v("0.1.9"), "^0.1.3")
    assert not satisfies(v("0.2.0"), "^0.1.3")


def test_satisfies_caret_zero_minor():
    assert satisfies(v("0.2.9"), "^0.2.3")
    assert not satisfies(v("0.3.0"), "^0.2.3")


def test_satisfies_caret_zero_zero():
    assert satisfies(v("0.0.3"), "^0.0.3")
    assert not satisfies(v("0.0.4"), "^0.0.3")


def test_satisfies_tilde():
    assert satisfies(v("1.2.9"), "~1.2.3")
    assert not satisfies(v("1.3.0"), "~1.2.3")


def test_satisfies_range_inclusive_lower():
    assert satisfies(v("1.0.0"), ">=1.0.0 <2.0.0")


def test_satisfies_tilde_includes_base():
    assert satisfies(v("1.2.3"), "~1.2.3")


def test_satisfies_greater_equal_above():
    assert satisfies(v("1.5.0"), ">=1.0.0")


def test_satisfies_range_exclusive_upper():
    assert not satisfies(v("2.0.0"), ">=1.0.0 <2.0.0")


def test_satisfies_greater_strict():
    assert not satisfies(v("1.0.0"), ">1.0.0")
    assert satisfies(v("1.0.1"), ">1.0.0")


def test_satisfies_less_equal():
    assert satisfies(v("1.5.0"), "<=1.5.0")
    assert not satisfies(v("1.5.1"), "<=1.5.0")


def test_satisfies_exact():
    assert satisfies(v("1.2.3"), "=1.2.3")
    assert not satisfies(v("1.2.4"), "1.2.3")


def test_max_satisfying_picks_highest():
    assert max_satisfying(["1.2.0", "1.9.1", "2.0.0", "1.10.0"], "^1.0.0") == "1.10.0"


def test_max_satisfying_none():
    assert max_satisfying(["0.9.0", "3.0.0"], "^1.0.0") is None


def test_max_satisfying_prefers_release_over_rc():
    assert max_satisfying(["1.1.0-rc.1", "1.1.0", "1.0.5"], "<2.0.0") == "1.1.0"

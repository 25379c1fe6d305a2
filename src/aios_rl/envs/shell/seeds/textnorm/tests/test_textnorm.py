import pytest

from textnorm import collapse_whitespace, slugify, strip_accents, title_case, truncate, wrap


def test_collapse_whitespace_inner_runs():
    assert collapse_whitespace("a   b\t\tc") == "a b c"


def test_collapse_whitespace_trims_ends():
    assert collapse_whitespace("  hello world \n") == "hello world"


def test_collapse_whitespace_only_spaces():
    assert collapse_whitespace(" \t\n ") == ""


def test_collapse_whitespace_untouched():
    assert collapse_whitespace("already clean") == "already clean"


def test_strip_accents_basic():
    assert strip_accents("café crème") == "cafe creme"


def test_strip_accents_keeps_plain_text():
    assert strip_accents("plain ASCII 123") == "plain ASCII 123"


def test_strip_accents_composed_letters():
    assert strip_accents("Ångström") == "Angstrom"


def test_slugify_simple():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_accents_and_digits():
    assert slugify("Über 9000 Crème") == "uber-9000-creme"


def test_slugify_custom_separator():
    assert slugify("a b c", separator="_") == "a_b_c"


def test_slugify_exact_length_fits():
    assert slugify("abc def", max_length=7) == "abc-def"


def test_slugify_cut_at_word_boundary():
    assert slugify("alpha beta gamma", max_length=12) == "alpha-beta"


def test_slugify_cut_lands_on_separator():
    assert slugify("alpha beta gamma", max_length=10) == "alpha-beta"


def test_slugify_long_single_word_is_cut():
    assert slugify("supercalifragilistic", max_length=5) == "super"


def test_slugify_default_max_length():
    assert slugify("a" * 25 + " " + "b" * 25) == "a" * 25


def test_slugify_cut_after_one_letter_word():
    assert slugify("a bcdefgh", max_length=5) == "a"


def test_slugify_empty():
    assert slugify("!!!") == ""


def test_truncate_short_text_unchanged():
    assert truncate("short", 10) == "short"


def test_truncate_exact_width_unchanged():
    assert truncate("exactly10!", 10) == "exactly10!"


def test_truncate_adds_ellipsis():
    assert truncate("abcdefghijkl", 8) == "abcde..."


def test_truncate_strips_trailing_space():
    assert truncate("hello world again", 9) == "hello..."


def test_truncate_width_too_small():
    with pytest.raises(ValueError):
        truncate("anything", 2)


def test_truncate_width_equal_to_ellipsis():
    assert truncate("anything", 3) == "..."


def test_title_case_small_words_lower():
    assert title_case("the lord of the rings") == "The Lord of the Rings"


def test_title_case_last_word_capitalised():
    assert title_case("what are you looking at") == "What Are You Looking At"


def test_title_case_lowercases_rest():
    assert title_case("hELLO wORLD") == "Hello World"


def test_title_case_single_small_word():
    assert title_case("of") == "Of"


def test_wrap_basic():
    assert wrap("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_wrap_exact_fit():
    assert wrap("ab cd", 5) == ["ab cd"]


def test_wrap_one_over():
    assert wrap("ab cde", 5) == ["ab", "cde"]


def test_wrap_splits_long_word():
    assert wrap("x abcdefg", 3) == ["x", "abc", "def", "g"]


def test_wrap_empty_text():
    assert wrap("   ", 4) == []


def test_wrap_width_one():
    assert wrap("a b", 1) == ["a", "b"]


def test_wrap_rejects_zero_width():
    with pytest.raises(ValueError):
        wrap("abc", 0)

import pytest

from rle import (
    decode,
    decode_runs,
    delta_decode,
    delta_encode,
    encode,
    encode_runs,
    longest_run,
    pack,
    unpack,
    unzigzag,
    zigzag,
)


def test_encode_runs_groups():
    assert encode_runs([1, 1, 2, 2, 2, 1]) == [(1, 2), (2, 3), (1, 1)]


def test_encode_runs_empty():
    assert encode_runs([]) == []


def test_encode_runs_single():
    assert encode_runs(["x"]) == [("x", 1)]


def test_decode_runs_expands():
    assert decode_runs([("a", 2), ("b", 1)]) == ["a", "a", "b"]


def test_decode_runs_rejects_zero_count():
    with pytest.raises(ValueError):
        decode_runs([("a", 0)])


def test_decode_runs_count_one_ok():
    assert decode_runs([("z", 1)]) == ["z"]


def test_encode_string():
    assert encode("aaabccdddd") == "3a1b2c4d"


def test_encode_empty():
    assert encode("") == ""


def test_encode_rejects_digits():
    with pytest.raises(ValueError):
        encode("a1")


def test_decode_string():
    assert decode("3a1b2c") == "aaabcc"


def test_decode_multi_digit_count():
    assert decode("12x1y") == "x" * 12 + "y"


def test_decode_missing_count():
    with pytest.raises(ValueError):
        decode("3ab")


def test_decode_dangling_count():
    with pytest.raises(ValueError):
        decode("2a5")


def test_decode_round_trip():
    text = "wwwwwwwwwwwwbbbx  y"
    assert decode(encode(text)) == text


def test_longest_run_finds_max():
    assert longest_run("abbbcc") == ("b", 3)


def test_longest_run_first_on_tie():
    assert longest_run([5, 5, 7, 7]) == (5, 2)


def test_longest_run_last_run_wins():
    assert longest_run("abccc") == ("c", 3)


def test_longest_run_empty_raises():
    with pytest.raises(ValueError):
        longest_run([])


def test_delta_encode_basic():
    assert delta_encode([10, 12, 11, 15]) == [10, 2, -1, 4]


def test_delta_encode_empty_and_single():
    assert delta_encode([]) == []
    assert delta_encode([7]) == [7]


def test_delta_decode_basic():
    assert delta_decode([10, 2, -1, 4]) == [10, 12, 11, 15]


def test_delta_decode_round_trip():
    values = [3, -4, 8, 8, 0]
    assert delta_decode(delta_encode(values)) == values


def test_zigzag_small_values():
    assert [zigzag(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]


def test_zigzag_large_negative():
    assert zigzag(-100) == 199


def test_unzigzag_small_values():
    assert [unzigzag(n) for n in (0, 1, 2, 3, 4)] == [0, -1, 1, -2, 2]


def test_unzigzag_rejects_negative():
    with pytest.raises(ValueError):
        unzigzag(-1)


def test_pack_smooth_series():
    assert pack([100, 101, 101, 99]) == [200, 2, 0, 3]


def test_unpack_round_trip():
    values = [5, -3, 12, 12, -40]
    assert unpack(pack(values)) == values

import pytest

from intervals import (
    find_containing,
    gaps,
    insert,
    intersection,
    length,
    merge,
    normalize,
    overlaps,
    total_length,
)


def test_normalize_returns_tuple():
    assert normalize(2, 5) == (2, 5)


def test_normalize_allows_empty():
    assert normalize(4, 4) == (4, 4)


def test_normalize_rejects_reversed():
    with pytest.raises(ValueError):
        normalize(5, 4)


def test_length_basic():
    assert length((3, 10)) == 7


def test_length_empty():
    assert length((6, 6)) == 0


def test_overlaps_true():
    assert overlaps((1, 5), (4, 8))


def test_overlaps_touching_is_false():
    assert not overlaps((1, 5), (5, 8))


def test_overlaps_touching_other_order():
    assert not overlaps((5, 8), (1, 5))


def test_overlaps_contained():
    assert overlaps((0, 10), (3, 4))


def test_overlaps_disjoint_other_order():
    assert not overlaps((7, 9), (1, 3))


def test_intersection_partial():
    assert intersection((1, 5), (3, 9)) == (3, 5)


def test_intersection_touching_is_none():
    assert intersection((1, 3), (3, 6)) is None


def test_intersection_nested():
    assert intersection((0, 20), (4, 6)) == (4, 6)


def test_merge_overlapping_and_touching():
    assert merge([(5, 7), (1, 3), (3, 4)]) == [(1, 4), (5, 7)]


def test_merge_keeps_disjoint():
    assert merge([(1, 2), (4, 5)]) == [(1, 2), (4, 5)]


def test_merge_nested_keeps_outer_end():
    assert merge([(1, 10), (2, 3)]) == [(1, 10)]


def test_merge_drops_empty():
    assert merge([(2, 2), (5, 6)]) == [(5, 6)]


def test_merge_empty_list():
    assert merge([]) == []


def test_total_length_union():
    assert total_length([(0, 5), (3, 8), (10, 12)]) == 10


def test_total_length_empty():
    assert total_length([]) == 0


def test_gaps_middle():
    assert gaps([(2, 4), (6, 8)], 0, 10) == [(0, 2), (4, 6), (8, 10)]


def test_gaps_fully_covered():
    assert gaps([(0, 10)], 2, 8) == []


def test_gaps_covered_up_to_upper():
    assert gaps([(0, 5)], 0, 5) == []


def test_gaps_interval_starting_at_lower():
    assert gaps([(0, 3)], 0, 5) == [(3, 5)]


def test_gaps_ignores_outside_intervals():
    assert gaps([(-5, -1), (20, 30)], 0, 5) == [(0, 5)]


def test_gaps_interval_ending_at_lower():
    assert gaps([(0, 3), (5, 6)], 3, 7) == [(3, 5), (6, 7)]


def test_gaps_interval_starting_at_upper():
    assert gaps([(1, 2), (9, 12)], 0, 9) == [(0, 1), (2, 9)]


def test_insert_disjoint_middle():
    assert insert([(1, 2), (8, 9)], (4, 5)) == [(1, 2), (4, 5), (8, 9)]


def test_insert_bridges_two():
    assert insert([(1, 3), (6, 9), (12, 14)], (2, 7)) == [(1, 9), (12, 14)]


def test_insert_touching_merges():
    assert insert([(1, 3), (6, 9)], (3, 6)) == [(1, 9)]


def test_insert_into_empty():
    assert insert([], (4, 7)) == [(4, 7)]


def test_find_containing_hit():
    assert find_containing([(0, 2), (5, 8), (10, 12)], 6) == 1


def test_find_containing_start_point():
    assert find_containing([(0, 2), (5, 8), (10, 12)], 10) == 2


def test_find_containing_end_point_excluded():
    assert find_containing([(0, 2), (5, 8), (10, 12)], 8) == -1


def test_find_containing_first():
    assert find_containing([(0, 2), (5, 8), (10, 12)], 0) == 0


def test_find_containing_empty():
    assert find_containing([], 3) == -1

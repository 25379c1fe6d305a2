import pytest

from stats import histogram, mean, median, mode, moving_average, percentile, stdev, variance, zscores


def test_mean_basic():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_single():
    assert mean([7]) == 7


def test_mean_empty_raises():
    with pytest.raises(ValueError):
        mean([])


def test_median_odd():
    assert median([5, 1, 3]) == 3


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5


def test_median_five():
    assert median([5, 1, 4, 2, 3]) == 3


def test_median_two():
    assert median([1, 3]) == 2


def test_median_single():
    assert median([9]) == 9


def test_mode_most_frequent():
    assert mode([1, 2, 2, 3, 3, 3]) == 3


def test_mode_tie_smallest():
    assert mode([5, 1, 5, 1, 9]) == 1


def test_mode_all_unique():
    assert mode([4, 2, 8]) == 2


def test_variance_sample():
    assert variance([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(32 / 7)


def test_variance_population():
    assert variance([2, 4, 4, 4, 5, 5, 7, 9], sample=False) == 4


def test_variance_sample_needs_two():
    with pytest.raises(ValueError):
        variance([1])


def test_variance_population_single():
    assert variance([3], sample=False) == 0


def test_stdev_population():
    assert stdev([2, 4, 4, 4, 5, 5, 7, 9], sample=False) == 2


def test_stdev_sample():
    assert stdev([1, 3]) == pytest.approx(2**0.5)


def test_percentile_median():
    assert percentile([1, 2, 3, 4, 5], 50) == 3


def test_percentile_interpolates():
    assert percentile([10, 20, 30, 40], 50) == 25


def test_percentile_extremes():
    data = [3, 1, 2]
    assert percentile(data, 0) == 1
    assert percentile(data, 100) == 3


def test_percentile_quarter():
    assert percentile([0, 10, 20, 30, 40], 25) == 10


def test_percentile_near_top():
    assert percentile([10, 20, 30, 40], 90) == pytest.approx(37)


def test_percentile_out_of_range():
    with pytest.raises(ValueError):
        percentile([1, 2], 101)


def test_histogram_counts():
    assert histogram([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 5, 0, 10) == [2, 2, 2, 2, 2]


def test_histogram_high_in_last_bin():
    assert histogram([10], 2, 0, 10) == [0, 1]


def test_histogram_ignores_outside():
    assert histogram([-1, 0, 11], 2, 0, 10) == [1, 0]


def test_histogram_bin_edge_goes_right():
    assert histogram([5], 2, 0, 10) == [0, 1]


def test_histogram_single_bin():
    assert histogram([1, 2, 10], 1, 0, 10) == [3]


def test_histogram_offset_range():
    assert histogram([10, 14, 15, 19, 20], 2, 10, 20) == [2, 3]


def test_histogram_rejects_bad_range():
    with pytest.raises(ValueError):
        histogram([1], 3, 5, 5)


def test_moving_average_window_two():
    assert moving_average([1, 3, 5, 7], 2) == [2, 4, 6]


def test_moving_average_full_window():
    assert moving_average([2, 4, 6], 3) == [4]


def test_moving_average_window_too_large():
    assert moving_average([1, 2], 3) == []


def test_moving_average_window_one():
    assert moving_average([4, 8], 1) == [4, 8]


def test_zscores_standardise():
    assert zscores([2, 4, 4, 4, 5, 5, 7, 9]) == [-1.5, -0.5, -0.5, -0.5, 0, 0, 1, 2]


def test_zscores_constant():
    assert zscores([3, 3, 3]) == [0.0, 0.0, 0.0]

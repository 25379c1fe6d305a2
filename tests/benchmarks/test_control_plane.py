"""The control-plane benchmark's statistics and its refusal of sizes it cannot measure."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("control_plane")


def test_p99_is_the_nearest_rank_not_the_maximum(bench) -> None:
    samples = [i / 1e3 for i in range(1, 101)]  # 1..100 ms, given in reverse
    median, p99 = bench._stats(list(reversed(samples)))
    assert median == pytest.approx(50.5)
    assert p99 == pytest.approx(99.0)  # the 99th of 100 values; the maximum (100) is the p100
    assert bench._stats([0.002])[1] == pytest.approx(2.0)


@pytest.mark.parametrize("flag", ["--events=0", "--moves=0", "--events=-3", "--weights-mb=-1"])
def test_a_size_that_measures_nothing_is_a_usage_error(bench, usage_error, flag: str) -> None:
    err = usage_error(bench, ["control_plane.py", flag])
    assert flag.split("=")[0] in err

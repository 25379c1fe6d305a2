"""The shell environment benchmark refuses sizes that measure nothing before it generates any task."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("flag", ["--tasks=0", "--repeats=0", "--episodes=0", "--group=0"])
def test_a_size_that_measures_nothing_is_a_usage_error(
    load_benchmark, monkeypatch, usage_error, flag: str
) -> None:
    bench = load_benchmark("shell_env")

    def generate(*args, **kwargs):
        raise AssertionError("generated tasks before checking the flags")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    err = usage_error(bench, ["shell_env.py", flag])
    assert flag.split("=")[0] in err

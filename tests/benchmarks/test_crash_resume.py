"""The crash/resume benchmark's summary and its refusal of settings that kill nothing."""

from __future__ import annotations

import json
import sys

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("crash_resume")


def test_a_run_whose_kills_resumed_nothing_still_prints_its_summary(bench) -> None:
    # --trials 1: the only child starts the campaign fresh, so no resume time was measured.
    lines = bench.report_lines(1, 1, 17.0, [], [], [], [2], {"collection": 1})
    assert "invariant violations 0" in lines[2]
    assert "(n=0)" in lines[3]
    assert json.loads(lines[-1]) == {"trials": 1, "violations": 0, "mean_resume_s": None,
                                     "rerun_episodes_per_kill": 2}


def test_resume_times_average_the_resumed_children(bench) -> None:
    lines = bench.report_lines(2, 1, 30.0, ["run-01 after kill 2: x"], [3.0, 4.0], [0.05, 0.07], [1, 2], {})
    assert "3.50 wall from process start, 0.060 reopening the store (n=2)" in lines[3]
    assert "  VIOLATION run-01 after kill 2: x" in lines
    assert json.loads(lines[-1])["mean_resume_s"] == pytest.approx(3.5)


@pytest.mark.parametrize("flag", ["--trials=0", "--max-delay=-1"])
def test_a_setting_that_kills_nothing_is_a_usage_error(bench, monkeypatch, capsys, flag: str) -> None:
    monkeypatch.setattr(sys, "argv", ["crash_resume.py", flag])
    with pytest.raises(SystemExit) as exited:
        bench.main()
    assert exited.value.code == 2
    assert flag.split("=")[0] in capsys.readouterr().err

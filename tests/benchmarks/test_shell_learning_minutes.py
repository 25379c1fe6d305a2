"""The learning benchmark's training minutes come from the runs' phase times, so a resumed benchmark and a
redistilled copy of a finished run count what ran before, not only what the last process did."""

from __future__ import annotations

from pathlib import Path

import pytest

from aios_rl.campaign.metrics import append_metrics


def _run(root: Path, name: str, *seconds: float | None) -> Path:
    run = root / name
    run.mkdir()
    for s in seconds:
        append_metrics(run / "metrics.jsonl", {"phase": "rl"} | ({} if s is None else {"time/phase_s": s}))
    return run


def test_minutes_add_the_warm_start_a_run_started_from(load_benchmark, tmp_path: Path) -> None:
    bench = load_benchmark("shell_learning")
    warm = _run(tmp_path, "warm", 120.0)
    copied = _run(tmp_path, "redistilled", 60.0, 60.0, 180.0)  # two epochs copied, then a redistillation
    assert bench.training_minutes(copied, warm) == pytest.approx(7.0)
    assert bench.training_minutes(copied, None) == pytest.approx(5.0)


def test_minutes_are_unknown_for_runs_stored_without_phase_times(load_benchmark, tmp_path: Path) -> None:
    bench = load_benchmark("shell_learning")
    warm = _run(tmp_path, "warm", None)
    run = _run(tmp_path, "run", 60.0)
    assert bench.training_minutes(run, warm) is None
    assert bench.training_minutes(run, None) == pytest.approx(1.0)

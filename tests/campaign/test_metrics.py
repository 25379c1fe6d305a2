"""RUN/metrics.jsonl: appended records, read back; the minutes a run's phases took."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from aios_rl.campaign.metrics import append_metrics, phase_minutes, read_metrics


def test_records_round_trip_with_non_finite_floats_as_null(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append_metrics(path, {"epoch": 1, "train/loss": math.nan})
    append_metrics(path, {"epoch": 2, "train/loss": 0.5})
    with path.open("a") as fh:
        fh.write('{"epoch": 3, "train/lo')  # a torn last line from a crash
    assert read_metrics(path) == [{"epoch": 1, "train/loss": None}, {"epoch": 2, "train/loss": 0.5}]


def test_phase_minutes_sums_every_phase(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert phase_minutes(path) is None  # no file
    path.touch()
    assert phase_minutes(path) is None  # no record
    for seconds in (30.0, 60.0, 90.0):
        append_metrics(path, {"phase": "rl", "time/phase_s": seconds})
    assert phase_minutes(path) == pytest.approx(3.0)


def test_phase_minutes_is_unknown_when_a_record_predates_the_field(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append_metrics(path, {"phase": "warm_start"})
    append_metrics(path, {"phase": "rl", "time/phase_s": 12.0})
    assert phase_minutes(path) is None

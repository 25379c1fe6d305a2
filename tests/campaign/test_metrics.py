"""RUN/metrics.jsonl: appended records, read back; the minutes a run's phases took."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from aios_rl.campaign.metrics import append_metrics, phase_minutes, read_metrics, training_summary


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


def test_training_summary_counts_phases_and_reads_the_last_record(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert training_summary(path) is None
    append_metrics(path, {"phase": "campaign_update", "update": 1})  # a campaign's line is no training record
    assert training_summary(path) is None
    append_metrics(path, {"epoch": 0, "phase": "warm_start", "checkpoint": "c1", "time/phase_s": 60.0})
    for epoch in (1, 2):
        append_metrics(path, {"epoch": epoch, "phase": "rl", "checkpoint": f"c{epoch + 1}",
                              "time/phase_s": 30.0, "rollout/success_rate": 0.25 * epoch,
                              "train/loss": 1.0 / epoch})
    append_metrics(path, {"epoch": 2, "phase": "redistill", "checkpoint": "c4", "time/phase_s": 120.0,
                          "val/decision": "better"})
    summary = training_summary(path)
    assert summary == {
        "phases": {"warm_start": 1, "rl": 2, "redistill": 1},
        "epochs": 2,
        "last": {"epoch": 2, "phase": "redistill", "checkpoint": "c4", "rollout/success_rate": None,
                 "train/loss": None, "val/decision": "better", "time/phase_s": 120.0},
        "minutes": pytest.approx(4.0),
    }


def test_a_record_appended_after_a_torn_line_survives(tmp_path: Path) -> None:
    # A kill mid-write leaves a line with no newline; the resumed run's next record must not be glued onto
    # it (the glued line would not parse, and the record, e.g. an epoch's, would be lost as well).
    path = tmp_path / "metrics.jsonl"
    append_metrics(path, {"epoch": 1})
    with path.open("a") as fh:
        fh.write('{"epoch": 2, "pha')
    append_metrics(path, {"epoch": 2, "phase": "rl"})
    append_metrics(path, {"epoch": 3, "phase": "rl"})
    assert read_metrics(path) == [{"epoch": 1}, {"epoch": 2, "phase": "rl"}, {"epoch": 3, "phase": "rl"}]

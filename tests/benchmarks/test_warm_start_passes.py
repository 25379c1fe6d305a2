"""The warm-start passes benchmark's folds and rank metric."""

from __future__ import annotations

import json
import sys

import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("warm_start_passes")


def test_folds_partition_the_tasks_evenly_and_repeatably(bench) -> None:
    ids = [f"t{i}" for i in range(10)]
    folds = bench.split_folds(list(reversed(ids)), 3)
    assert sorted(x for fold in folds for x in fold) == ids
    assert sorted(len(f) for f in folds) == [3, 3, 4]
    assert folds == bench.split_folds(ids, 3)  # the order given does not matter
    assert folds != bench.split_folds(ids, 3, seed=1)
    with pytest.raises(ValueError, match="folds"):
        bench.split_folds(ids, 1)
    with pytest.raises(ValueError, match="folds"):
        bench.split_folds(ids, 11)


def test_reference_rank_counts_candidates_strictly_above(bench) -> None:
    logits = torch.tensor([0.5, 2.0, 0.5, -1.0, 3.0])
    assert bench.reference_rank(logits, 4) == 0
    assert bench.reference_rank(logits, 1) == 1
    assert bench.reference_rank(logits, 0) == 2  # the tie at index 2 is not above
    assert bench.reference_rank(logits, 3) == 4


def test_a_fix_the_opening_does_not_offer_is_a_miss_without_a_loss(bench) -> None:
    from aios_rl.contracts.episode import Observation
    from aios_rl.policy.compact import CompactStudent

    student = CompactStudent()
    offered = Observation(text="FAILED tests/test_a.py::test_sum", candidates=["read a.py", "patch x", "stop done"])
    missing = Observation(text="FAILED tests/test_a.py::test_sum", candidates=["read a.py", "stop done"])
    ranks, losses = bench.score_openings(student, [(offered, "shell", ["patch x"], 1.0),
                                                   (missing, "shell", ["patch x"], 1.0)])
    logits = student.forward([offered], ["shell"]).logits[0][:3].detach()
    assert ranks == [bench.reference_rank(logits, 1), 2]
    assert losses == [pytest.approx(float(-torch.log_softmax(logits, 0)[1]), abs=1e-5)]


def test_no_seeds_is_a_usage_error_before_the_demonstrations_are_built(
    bench, tmp_path, monkeypatch, usage_error
) -> None:
    # --seeds 0 built every demonstration (sandboxed runs), then died averaging no scores (StatisticsError).
    def load_tasks(*args, **kwargs):
        raise AssertionError("loaded the task set before checking the flags")

    monkeypatch.setattr(bench, "load_tasks", load_tasks)
    err = usage_error(bench, ["warm_start_passes.py", "--tasks", str(tmp_path), "--seeds", "0"])
    assert "--seeds must be at least 1, got 0" in err


def test_a_missing_task_set_is_a_usage_error_not_a_traceback(bench, tmp_path, usage_error) -> None:
    missing = tmp_path / "no-such-tasks"
    err = usage_error(bench, ["warm_start_passes.py", "--tasks", str(missing)])
    assert f"{missing} is not a directory" in err


@pytest.mark.parametrize("demonstrated", [True, False])
def test_no_scorable_opening_gives_a_row_not_a_traceback(
    bench, tmp_path, monkeypatch, capsys, demonstrated: bool
) -> None:
    # No held-back opening offering its reference fix left no cross-entropy to average (StatisticsError);
    # no held-back task with a demonstration left no rank either (ZeroDivisionError).
    from types import SimpleNamespace

    tasks = [SimpleNamespace(task_id=f"t{i}", oracle={"reference_patch": "x"}) for i in range(4)]
    opening = (SimpleNamespace(candidates=["read a.py"]), "shell", ["patch x"], 1.0)
    monkeypatch.setattr(bench, "load_tasks", lambda *args, **kwargs: tasks)
    monkeypatch.setattr(bench, "Sandbox", lambda *args: None)
    demos = [opening] if demonstrated else []
    monkeypatch.setattr(bench, "oracle_demonstrations", lambda *args, **kwargs: demos)
    monkeypatch.setattr(bench, "distill_batch_from", lambda items: None)
    monkeypatch.setattr(bench, "Trainer", lambda *args: None)
    monkeypatch.setattr(bench, "distill_passes", lambda *args, **kwargs: None)
    out = tmp_path / "rows.json"
    monkeypatch.setattr(sys, "argv", ["warm_start_passes.py", "--tasks", str(tmp_path), "--folds", "2",
                                            "--passes", "1", "--json", str(out)])
    bench.main()
    printed = capsys.readouterr().out
    row = json.loads(out.read_text())["rows"][0]
    assert row["cross_entropy"] is None and row["held_back"] == (4 if demonstrated else 0)
    assert row["top1"] == (0.0 if demonstrated else None)
    assert "no held-back opening offers its reference fix" in printed

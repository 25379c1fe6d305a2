"""The campaign benchmark: its 'train' columns score the tasks the campaign serves, and it cleans up."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from aios_rl.campaign.slots import slot_task


def test_the_train_columns_are_scored_on_the_served_tasks(
    load_benchmark, tmp_path: Path, monkeypatch, capsys
) -> None:
    bench = load_benchmark("campaign")
    train = [SimpleNamespace(task_id=f"train-{i}") for i in range(22)]
    holdout = [SimpleNamespace(task_id=f"holdout-{i}") for i in range(10)]
    scored: list[list[str]] = []

    def success(run, checkpoint, tasks, sandbox) -> float:
        scored.append([t.task_id for t in tasks])
        return 0.5

    summary = {"pointers": {"active": "c1"}, "updates": 1, "rollbacks": 0, "promotions": 0, "comparisons": {}}
    monkeypatch.setattr(bench, "load_tasks", lambda path, split: holdout if split == "holdout" else train)
    monkeypatch.setattr(bench, "run_campaign", lambda run, tasks, slots, seed, net: (["c1"] * slots, summary))
    monkeypatch.setattr(bench, "success", success)
    monkeypatch.setattr(bench, "Sandbox", lambda config: None)
    monkeypatch.setattr(tempfile, "mkdtemp", lambda prefix: str(tmp_path / "root"))
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--tasks", str(tmp_path), "--max-tasks", "16"])
    bench.main()
    served = {slot_task(train, 0, k)[0].task_id for k in range(16)}
    assert len(served) < len(train)  # 16 slots in the first pass over 22 tasks: 16 of them
    assert f"the {len(served)} tasks the campaign serves" in capsys.readouterr().out
    train_scored = [ids for ids in scored if ids[0].startswith("train")]
    assert train_scored and all(set(ids) == served for ids in train_scored)


def _stub(bench, monkeypatch, root: Path, fail: bool = False) -> None:
    """A benchmark whose campaigns write a file into their run directory (or fail after writing it)."""
    tasks = [SimpleNamespace(task_id=f"t-{i}") for i in range(4)]
    summary = {"pointers": {"active": "c1"}, "updates": 1, "rollbacks": 0, "promotions": 0, "comparisons": {}}

    def run_campaign(run, tasks_dir, slots, seed, net):
        run.mkdir(parents=True)
        (run / "control.db").write_text("")
        if fail:
            raise RuntimeError("campaign failed")
        return ["c1"] * slots, summary

    def mkdtemp(prefix: str) -> str:
        root.mkdir()
        return str(root)

    monkeypatch.setattr(bench, "load_tasks", lambda path, split: tasks)
    monkeypatch.setattr(bench, "run_campaign", run_campaign)
    monkeypatch.setattr(bench, "success", lambda run, checkpoint, tasks, sandbox: 0.5)
    monkeypatch.setattr(bench, "Sandbox", lambda config: None)
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)


def test_the_runs_are_removed_when_the_benchmark_ends_or_fails(
    load_benchmark, tmp_path: Path, monkeypatch
) -> None:
    bench = load_benchmark("campaign")
    root = tmp_path / "root"
    _stub(bench, monkeypatch, root)
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--tasks", str(tmp_path), "--max-tasks", "2"])
    bench.main()
    assert not root.exists()
    _stub(bench, monkeypatch, root, fail=True)
    with pytest.raises(RuntimeError, match="campaign failed"):
        bench.main()
    assert not root.exists()
    assert tmp_path.is_dir()  # the user's task set is never removed


def test_keep_leaves_the_runs_and_says_where(load_benchmark, tmp_path: Path, monkeypatch, capsys) -> None:
    bench = load_benchmark("campaign")
    root = tmp_path / "root"
    _stub(bench, monkeypatch, root)
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--tasks", str(tmp_path), "--max-tasks", "2", "--keep"])
    bench.main()
    assert (root / "with-net" / "control.db").is_file() and (root / "without-net" / "control.db").is_file()
    assert f"runs kept in {root}" in capsys.readouterr().err


def test_a_missing_task_directory_is_a_clear_error_not_a_traceback(
    load_benchmark, tmp_path: Path, usage_error
) -> None:
    bench = load_benchmark("campaign")
    missing = tmp_path / "no-such-tasks"
    err = usage_error(bench, ["campaign.py", "--tasks", str(missing)])
    assert f"error: {missing} is not a directory" in err and "Traceback" not in err


def test_a_campaign_that_finished_no_slot_averages_to_a_dash_not_a_crash(
    load_benchmark, tmp_path: Path, monkeypatch, capsys
) -> None:
    # measure() divided by len(actives): a campaign that stopped before its first slot (frozen) crashed the
    # table after both campaigns had run.
    bench = load_benchmark("campaign")
    _stub(bench, monkeypatch, tmp_path / "root")
    summary = {"pointers": {"active": "c0"}, "updates": 0, "rollbacks": 0, "promotions": 0, "comparisons": {}}

    def run_campaign(run, tasks, slots, seed, net):
        return ([] if net else ["c1"] * slots), summary

    monkeypatch.setattr(bench, "run_campaign", run_campaign)
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--tasks", str(tmp_path), "--max-tasks", "2"])
    bench.main()
    out = capsys.readouterr().out
    assert "with net: active's success averaged over slots: holdout -, train - (no slot finished)" in out
    assert "without net: active's success averaged over slots: holdout 0.500, train 0.500" in out


def test_a_bad_slot_count_stops_before_the_tasks_are_generated(
    load_benchmark, tmp_path: Path, monkeypatch, usage_error
) -> None:
    bench = load_benchmark("campaign")

    def generate(*args, **kwargs):
        raise AssertionError("generated tasks before checking the flags")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    err = usage_error(bench, ["campaign.py", "--max-tasks", "0"])
    assert "--max-tasks must be at least 1, got 0" in err


@pytest.mark.parametrize("flag", ["--count=0", "--holdout-fraction=1"])
def test_a_bad_generator_setting_is_a_usage_error_not_a_traceback(
    load_benchmark, monkeypatch, usage_error, flag: str
) -> None:
    bench = load_benchmark("campaign")

    def generate(*args, **kwargs):
        raise AssertionError("generated tasks before checking the flags")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    err = usage_error(bench, ["campaign.py", flag])
    assert flag.split("=")[0] in err and "Traceback" not in err

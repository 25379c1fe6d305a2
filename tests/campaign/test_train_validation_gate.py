"""The validation gate of `shell train`: held-out training tasks score every update against its parent;
worse rolls back, better promotes, and repeated rollbacks freeze the lineage."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
import sys
from pathlib import Path

import pytest
import torch

from aios_rl.algos.trainer import TrainerConfig
from aios_rl.campaign.metrics import phase_minutes, read_metrics
from aios_rl.campaign import train as train_module
from aios_rl.campaign.train import PENDING_EPOCH_KEY, ShellTrainConfig, ShellTraining
from aios_rl.campaign.validation import (
    VALIDATION_KEY,
    ValidationConfig,
    ValidationGate,
    changed_tasks,
    decide,
    split_validation,
    task_outcomes,
)
from aios_rl.contracts.episode import Task
from aios_rl.contracts.errors import ConfigError, LineageError
from aios_rl.control.events import ControlConfig
from aios_rl.envs.shell.task import load_tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402

UNFIXABLE = {  # no patch of calc.py can make this test pass: the episode fails whatever the student does
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "def test_never():\n    assert 1 == 2\n",
}


def _tasks(n: int) -> list[Task]:
    return [Task(task_id=f"t{i}", environment="shell", family="f", split="train", prompt="p") for i in range(n)]


def test_the_split_is_fixed_by_seed_disjoint_and_keeps_training_tasks() -> None:
    tasks = _tasks(20)
    train, val = split_validation(tasks, 0.2, seed=3)
    assert len(val) == 4 and len(train) == 16
    assert {t.task_id for t in train}.isdisjoint({t.task_id for t in val})
    assert split_validation(list(reversed(tasks)), 0.2, seed=3) == (train, val)  # input order does not matter
    assert {t.task_id for t in split_validation(tasks, 0.2, seed=4)[1]} != {t.task_id for t in val}
    assert len(split_validation(tasks, 0.01, seed=0)[1]) == 1  # a positive share holds at least one task out
    assert split_validation(tasks, 0.0, seed=0) == (sorted(tasks, key=lambda t: t.task_id), [])
    with pytest.raises(ConfigError, match="leaves none to train on"):
        split_validation(_tasks(1), 0.5, seed=0)


def _rates(ones: int, total: int = 10) -> dict[str, float]:
    return {f"t{i}": float(i < ones) for i in range(total)}


def test_decisions_by_mean_and_tolerance() -> None:
    mean, loose = ValidationConfig(rule="mean"), ValidationConfig(rule="mean", tolerance=0.1)
    assert decide(_rates(5), _rates(6), mean) == "worse"
    assert decide(_rates(7), _rates(6), mean) == "better"
    assert decide(_rates(6), _rates(6), mean) == "same"
    assert decide(_rates(5), _rates(6), loose) == "same"  # 0.1 is within the tolerance
    assert decide(_rates(4), _rates(6), loose) == "worse"
    assert decide(_rates(8), _rates(6), loose) == "better"


def test_a_difference_of_exactly_the_tolerance_is_same_at_every_level() -> None:
    # 0.7 vs 0.8 differ by 0.1 exactly, but 0.8 - 0.1 is 0.7000000000000001 in floating point.
    loose = ValidationConfig(rule="mean", tolerance=0.1)
    for ones in range(10):
        assert decide(_rates(ones), _rates(ones + 1), loose) == "same", ones
        assert decide(_rates(ones + 1), _rates(ones), loose) == "same", ones


def test_the_sign_test_needs_six_decisive_tasks_one_way() -> None:
    sign = ValidationConfig()
    assert sign.rule == "sign_test"
    reference = _rates(0, 20)
    assert task_outcomes(_rates(2, 3), _rates(1, 3)) == ["same", "better", "same"]
    assert decide(_rates(5, 20), reference, sign) == "same"  # 5-0: p = 0.0625
    assert decide(_rates(6, 20), reference, sign) == "better"  # 6-0: p = 0.031
    assert decide(reference, _rates(6, 20), sign) == "worse"
    mixed = {**_rates(7, 20), "t19": 0.0}
    assert decide(reference | {"t19": 1.0}, mixed, sign) == "same"  # 1 better, 7 worse: p = 0.07
    assert changed_tasks({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 1.0}) == {"b": {"candidate": 0.0, "reference": 1.0}}
    with pytest.raises(ConfigError, match="not both"):
        ValidationConfig(fraction=0.2, tasks_dir="x")
    assert not ValidationConfig().enabled


def test_validation_tasks_are_never_trained_on(tmp_path: Path) -> None:
    for i in range(4):
        make_task(tmp_path, task_id=f"calc-{i}")
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, validation=ValidationConfig(fraction=0.5))
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        held = {t.task_id for t in training.val_tasks}
        assert len(held) == 2 and held.isdisjoint(t.task_id for t in training.tasks)
        assert training.labelled == {t.task_id for t in training.tasks}
    finally:
        training.close()
    make_task(tmp_path / "overlap", task_id="calc-0")
    overlapping = ShellTrainConfig(validation=ValidationConfig(tasks_dir=str(tmp_path / "overlap" / "tasks")))
    with pytest.raises(ConfigError, match="shares 1 task"):
        ShellTraining(tmp_path / "run2", tmp_path / "tasks", overlapping)
    make_task(tmp_path / "holdout", task_id="calc-9")
    for path in (tmp_path / "holdout" / "tasks").glob("*/manifest.json"):
        path.write_text(path.read_text().replace('"split": "train"', '"split": "holdout"'))
    with pytest.raises(ConfigError, match="holdout task"):
        ShellTraining(tmp_path / "run3", tmp_path / "tasks",
                      ShellTrainConfig(validation=ValidationConfig(tasks_dir=str(tmp_path / "holdout" / "tasks"))))
    with pytest.raises(ConfigError, match="leaves none"):
        ShellTraining(tmp_path / "run4", tmp_path / "overlap" / "tasks", ShellTrainConfig(
            validation=ValidationConfig(fraction=0.5)))
    assert not any((tmp_path / f"run{i}").exists() for i in (2, 3, 4))  # refused before the run directory exists


def test_the_validation_set_is_kept_when_tasks_are_added_before_a_resume(tmp_path: Path) -> None:
    for i in range(8):
        make_task(tmp_path, task_id=f"calc-{i}")
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, validation=ValidationConfig(fraction=0.25))
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    held = [t.task_id for t in training.val_tasks]
    training.close()
    for i in range(8, 12):  # drawn again over 12 tasks, the seed's split would differ
        make_task(tmp_path, task_id=f"calc-{i}")
    redrawn = [t.task_id for t in split_validation(
        load_tasks(tmp_path / "tasks", split="train"), 0.25, seed=0)[1]]
    assert redrawn != held
    resumed = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        assert [t.task_id for t in resumed.val_tasks] == held
        assert {t.task_id for t in resumed.tasks} == {f"calc-{i}" for i in range(12)} - set(held)
    finally:
        resumed.close()
    assert train_module.trained_task_ids(tmp_path / "run") == {f"calc-{i}" for i in range(12)} - set(held)
    shutil.rmtree(tmp_path / "tasks" / held[0])
    with pytest.raises(ConfigError, match=f"e.g. {held[0]}.*cannot change"):
        ShellTraining(tmp_path / "run", tmp_path / "tasks", config)


def test_a_start_checkpoint_trained_on_the_validation_tasks_is_refused(tmp_path: Path) -> None:
    for i in range(4):
        make_task(tmp_path, task_id=f"calc-{i}")
    make_task(tmp_path / "val", task_id="calc-9")
    ShellTraining(tmp_path / "source", tmp_path / "tasks", ShellTrainConfig(warm_start_epochs=0)).close()
    start = ShellTrainConfig(warm_start_epochs=0, init_from=str(tmp_path / "source"))
    with pytest.raises(ConfigError, match="was trained on 2 of this run's validation"):
        ShellTraining(tmp_path / "a", tmp_path / "tasks", start.model_copy(
            update={"validation": ValidationConfig(fraction=0.5)}))
    assert not (tmp_path / "a").exists()
    fresh = ShellTraining(tmp_path / "b", tmp_path / "tasks", start.model_copy(
        update={"validation": ValidationConfig(tasks_dir=str(tmp_path / "val" / "tasks"))}))
    assert [t.task_id for t in fresh.val_tasks] == ["calc-9"]
    fresh.close()


def test_a_worse_update_is_rolled_back_and_repeated_rollbacks_freeze(tmp_path: Path) -> None:
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path / "val", task_id="never-1", files=UNFIXABLE, oracle=False)
    run = tmp_path / "run"
    # One rollback in a row is already more than this run allows: the lineage freezes on it.
    gate = ValidationConfig(tasks_dir=str(tmp_path / "val" / "tasks"), rule="mean")
    config = ShellTrainConfig(epochs=2, tasks_per_epoch=1, group_size=2, teacher="none", warm_start_epochs=0,
                              validation=gate, control=ControlConfig(max_consecutive_rollbacks=0))
    training = ShellTraining(run, tmp_path / "tasks", config)
    try:
        assert training.plane.config.max_consecutive_rollbacks == 0  # stored with the run's control plane
        before = {k: v.clone() for k, v in training.policy.state_dict().items()}
        # The parent's score as if it had solved the validation task; the candidate is really scored.
        training.plane.store.set_meta(VALIDATION_KEY, {"ckpt-0000": {"success": 1.0, "tasks": {"never-1": 1.0}}})
        report = training.run_epoch(1)
        lineage = training.plane.state.lineage
        assert report.checkpoint == "ckpt-0001"
        assert lineage.active == "ckpt-0000" and lineage.rollbacks == 1 and lineage.frozen
        assert lineage.checkpoints["ckpt-0001"].verdict == "rolled_back"
        assert all(torch.equal(before[k], v) for k, v in training.policy.state_dict().items())  # the parent's weights
        record = read_metrics(run / "metrics.jsonl")[-1]
        assert record["val/decision"] == "worse" and record["val/success"] == 0.0
        assert record["val/active"] == "ckpt-0000"
        assert not training.trainer.optimizer.state  # the parent's optimizer state: no step taken yet
        diagnosis = json.loads((run / "rollbacks" / "epoch-1.json").read_text())
        assert diagnosis["changed_tasks"] == {"never-1": {"candidate": 0.0, "reference": 1.0}}
        assert diagnosis["pointers_before"]["active"] == "ckpt-0001" and diagnosis["frozen_after"]
        episodes = len(training.plane.store.episode_ids())
        assert episodes == 2
        with pytest.raises(LineageError, match="frozen"):
            training.run_epoch(2)  # refused before any rollout
        assert len(training.plane.store.episode_ids()) == episodes
    finally:
        training.close()
    with pytest.raises(ConfigError, match="different configuration"):  # the control settings are the run's
        ShellTraining(run, tmp_path / "tasks", config.model_copy(update={"control": ControlConfig()}))
    ShellTraining(run, tmp_path / "tasks", config).close()  # the same command resumes


def test_a_better_update_is_promoted_and_scores_are_kept_per_checkpoint(tmp_path: Path) -> None:
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path / "val", task_id="calc-2")
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=2, warm_start_epochs=60, rl=False,
                              trainer=TrainerConfig(lr=0.01),
                              validation=ValidationConfig(tasks_dir=str(tmp_path / "val" / "tasks"), rule="mean"))
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        assert training.warm_start() is not None
        # The warm start, scored for real: it learnt the calc fix and solves the held-out calc task greedily.
        assert training.gate.score("ckpt-0001")["success"] == 1.0
        scores = training.plane.store.get_meta(VALIDATION_KEY)
        scores["ckpt-0001"] = {"success": 0.0, "tasks": {"calc-2": 0.0}}  # as if it had failed it
        training.plane.store.set_meta(VALIDATION_KEY, scores)
        training.run_epoch(1)
        lineage = training.plane.state.lineage
        assert lineage.active == lineage.last_stable == "ckpt-0002"
        assert lineage.checkpoints["ckpt-0002"].verdict == "promoted"
        record = read_metrics(tmp_path / "run" / "metrics.jsonl")[-1]
        assert (record["val/decision"], record["val/success"], record["val/reference_success"]) == ("better", 1.0, 0.0)
        assert set(training.plane.store.get_meta(VALIDATION_KEY)) == {"ckpt-0001", "ckpt-0002"}
        assert not (tmp_path / "run" / "rollbacks").exists()
    finally:
        training.close()


@pytest.mark.parametrize("kill_at", ["during_the_gate", "after_the_rollback"])
def test_a_run_killed_after_its_update_finishes_the_epoch_on_resume(
    tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]], kill_at: str
) -> None:
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path / "val", task_id="never-1", files=UNFIXABLE, oracle=False)
    run = tmp_path / "run"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=2, teacher="none", warm_start_epochs=0,
                              validation=ValidationConfig(tasks_dir=str(tmp_path / "val" / "tasks"), rule="mean"))
    training = ShellTraining(run, tmp_path / "tasks", config)
    training.plane.store.set_meta(VALIDATION_KEY, {"ckpt-0000": {"success": 1.0, "tasks": {"never-1": 1.0}}})
    where = (ValidationGate, "score") if kill_at == "during_the_gate" else (train_module, "append_metrics")
    killed = kill_once(*where)
    with pytest.raises(killed):
        training.run_epoch(1)
    expected_active = "ckpt-0001" if kill_at == "during_the_gate" else "ckpt-0000"
    assert training.plane.state.lineage.active == expected_active
    pending = training.plane.store.get_meta(PENDING_EPOCH_KEY)
    stored_seconds = pending["time/phase_s"]  # the rollouts and the update, stored with the record
    assert stored_seconds > 0
    if kill_at == "after_the_rollback":  # as a record stored before phase times existed: its time is unknown
        del pending["time/phase_s"]
        training.plane.store.set_meta(PENDING_EPOCH_KEY, pending)
    training.close()

    resumed = ShellTraining(run, tmp_path / "tasks", config)
    try:
        assert resumed.epochs_done() == 0
        episodes = len(resumed.plane.store.episode_ids())
        report = resumed.run_epoch(1)
        lineage = resumed.plane.state.lineage
        assert report.checkpoint == "ckpt-0001" and sorted(lineage.checkpoints) == ["ckpt-0000", "ckpt-0001"]
        assert lineage.active == "ckpt-0000" and lineage.rollbacks == 1  # rolled back once, not twice
        assert len(resumed.plane.store.episode_ids()) == episodes  # no second round of rollouts
        assert [r["val/decision"] for r in read_metrics(run / "metrics.jsonl")] == ["worse"]
        assert resumed.epochs_done() == 1
        if kill_at == "during_the_gate":
            assert report.metrics["time/phase_s"] > stored_seconds  # the killed process's and the gate's
        else:
            assert report.metrics["time/phase_s"] is None and phase_minutes(run / "metrics.jsonl") is None
    finally:
        resumed.close()


@pytest.mark.parametrize("by_hand", ["rollback", "promote"])
def test_a_lineage_command_between_a_kill_in_the_gate_and_the_resume_is_respected(
    tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]], by_hand: str
) -> None:
    """An operator who rolls back (`aios-rl lineage rollback`) or promotes (`ControlPlane.promote`) the update
    a kill left in the gate decides for the gate: the resumed epoch writes its line once, for its own checkpoint, with the gate's
    decision, and leaves the pointers where the operator put them."""
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path / "val", task_id="never-1", files=UNFIXABLE, oracle=False)
    run = tmp_path / "run"
    validation = ValidationConfig(tasks_dir=str(tmp_path / "val" / "tasks"), rule="mean")
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=2, teacher="none", warm_start_epochs=0,
                              validation=validation)
    training = ShellTraining(run, tmp_path / "tasks", config)
    training.plane.store.set_meta(VALIDATION_KEY, {"ckpt-0000": {"success": 1.0, "tasks": {"never-1": 1.0}}})
    killed = kill_once(ValidationGate, "score")
    with pytest.raises(killed):
        training.run_epoch(1)
    assert training.plane.state.lineage.active == "ckpt-0001"
    getattr(training.plane, by_hand)("by hand")  # what the lineage command does, between the two processes
    training.close()

    resumed = ShellTraining(run, tmp_path / "tasks", config)
    try:
        report = resumed.run_epoch(1)
        lineage = resumed.plane.state.lineage
        assert report.checkpoint == "ckpt-0001" and sorted(lineage.checkpoints) == ["ckpt-0000", "ckpt-0001"]
        left = {"rollback": "ckpt-0000", "promote": "ckpt-0001"}[by_hand]  # where the operator left active
        assert (lineage.active, lineage.last_stable) == (left, left)
        assert lineage.rollbacks == (by_hand == "rollback")  # the operator's only, if any
        records = read_metrics(run / "metrics.jsonl")
        assert [(r["checkpoint"], r["val/decision"], r["val/active"]) for r in records] == [
            ("ckpt-0001", "worse", left)
        ]
        assert not (run / "rollbacks").exists()  # the gate rolled nothing back: the operator had decided
        assert resumed.epochs_done() == 1 and resumed.plane.store.get_meta(PENDING_EPOCH_KEY) is None
    finally:
        resumed.close()

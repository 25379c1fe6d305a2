"""`rollout/*` in metrics.jsonl is the epoch's own ledger and `rollout/total_*` the run's, whether the epochs
ran in one process or were resumed."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.train import ShellTrainConfig, ShellTraining, open_training

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def test_epoch_ledgers_are_per_epoch_in_one_process_and_after_a_resume(tmp_path: Path) -> None:
    make_task(tmp_path)
    config = ShellTrainConfig.model_validate({
        "epochs": 3, "tasks_per_epoch": 1, "group_size": 2, "workers": 1, "teacher": "none",
        "env": {"max_steps": 3},
    })
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        training.run_epoch(1)
        training.run_epoch(2)
    finally:
        training.close()
    resumed = open_training(tmp_path / "run")
    try:
        resumed.run_epoch(3)
    finally:
        resumed.close()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["rollout/rollouts"] for r in records] == [2, 2, 2]
    assert [r["rollout/total_rollouts"] for r in records] == [2, 4, 6]
    totals = [r["rollout/total_env_steps"] for r in records]
    per_epoch = [b - a for b, a in zip(totals, [0, *totals[:-1]], strict=True)]
    assert [r["rollout/env_steps"] for r in records] == per_epoch
    # the student picks among the candidates, so the environment refused nothing; the count is written anyway
    refused = [(r["rollout/invalid_actions"], r["rollout/total_invalid_actions"]) for r in records]
    assert refused == [(0, 0)] * 3
    # the compact student reports no act metrics, so no policy/* key is made up for it
    assert not [key for r in records for key in r if key.startswith("policy/")]


def test_an_lm_writing_its_actions_reports_its_act_metrics_per_epoch(tmp_path: Path, model_dir: Path) -> None:
    """`policy/*` is the epoch's mean of what each `act` call reported, weighted by its observations: the
    share of the epoch's answers that were not one JSON action, not the mean of the calls' shares."""
    make_task(tmp_path)
    config = ShellTrainConfig.model_validate({
        "epochs": 1, "tasks_per_epoch": 1, "group_size": 2, "workers": 1, "teacher": "none",
        "warm_start_epochs": 0, "env": {"max_steps": 2, "max_candidates": 4},
        "student": {"kind": "causal-lm", "model_path": str(model_dir), "lm_mode": "generate",
                    "causal_lm": {"max_prompt_tokens": 1536, "max_new_tokens": 8}},
        "trainer": {"minibatch_size": 16, "update_epochs": 1},
    })
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    reported: list[tuple[int, dict[str, float]]] = []
    act = training.policy.act

    def recording(observations, *args, **kwargs):  # type: ignore[no-untyped-def]
        samples = act(observations, *args, **kwargs)
        reported.append((len(observations), dict(training.policy.last_act_metrics)))
        return samples

    training.policy.act = recording  # type: ignore[method-assign]
    try:
        training.run_epoch(1)
    finally:
        training.close()
    [record] = read_metrics(tmp_path / "run" / "metrics.jsonl")
    observations = sum(n for n, _ in reported)
    assert reported and observations == record["rollout/env_steps"]
    for key in ("policy/non_json_frac", "policy/answer_truncated_frac", "policy/prompt_truncated_frac"):
        assert record[key] == pytest.approx(sum(n * m[key] for n, m in reported) / observations)
    assert 0.0 <= record["policy/non_json_frac"] <= 1.0


def test_dapo_group_counts_are_per_epoch_and_their_totals_the_runs(tmp_path: Path) -> None:
    """DAPO's `rollout/dapo_*_groups` count the epoch's resampled and dropped groups, as every other
    `rollout/*` key is the epoch's own, and `rollout/total_dapo_*_groups` the run's: each resample or drop
    discards the group's N episodes, which the epoch's own ledger counts."""
    make_task(tmp_path)
    config = ShellTrainConfig.model_validate({
        "epochs": 2, "tasks_per_epoch": 1, "allocator": "dapo-2", "workers": 1, "teacher": "none",
        "env": {"max_steps": 1},  # one step rarely fixes anything: groups of zero reward variance
    })
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        training.run_epoch(1)
        training.run_epoch(2)
    finally:
        training.close()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    groups = [r["rollout/dapo_resampled_groups"] + r["rollout/dapo_dropped_groups"] for r in records]
    assert groups[1] > 0
    assert [2 * g for g in groups] == [r["rollout/discarded"] for r in records]
    totals = [r["rollout/total_dapo_resampled_groups"] + r["rollout/total_dapo_dropped_groups"]
              for r in records]
    assert totals == [groups[0], groups[0] + groups[1]]


def _three_epochs_warned(
    tmp_path: Path, config: ShellTrainConfig, caplog: pytest.LogCaptureFixture
) -> tuple[list[dict], list[list[str]]]:
    """Run epochs 1-3 of a new run; its metrics lines and, per epoch, what the collector warned."""
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    warned = []
    try:
        for epoch in (1, 2, 3):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="aios_rl.campaign.collect"):
                training.run_epoch(epoch)
            warned.append([r.getMessage() for r in caplog.records if r.name == "aios_rl.campaign.collect"])
    finally:
        training.close()
    return read_metrics(tmp_path / "run" / "metrics.jsonl"), warned


def test_an_epoch_the_rollout_budget_cuts_short_warns_and_counts_the_shortfall(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With group_size 2 and rollout_budget 3, epoch 2 trained a group of 1 and epoch 3 ran no episode (loss
    0, a checkpoint of the same weights) without a word."""
    make_task(tmp_path)
    config = ShellTrainConfig.model_validate({
        "epochs": 3, "tasks_per_epoch": 1, "group_size": 2, "rollout_budget": 3, "workers": 1,
        "teacher": "none", "env": {"max_steps": 3},
    })
    records, warned = _three_epochs_warned(tmp_path, config, caplog)
    assert [r["rollout/rollouts"] for r in records] == [2, 1, 0]
    assert [r["rollout/budget_shortfall"] for r in records] == [0, 1, 2]
    assert warned[0] == []
    advice = "(give fewer epochs or a larger rollout_budget)"
    assert warned[1] == ["epoch 2: the run's rollout_budget of 3 leaves 1 rollout for the 2 this epoch's "
                         f"groups start with: its groups are cut short {advice}"]
    assert warned[2] == ["epoch 3: the run's rollout_budget of 3 leaves 0 rollouts for the 2 this epoch's "
                         f"groups start with: it runs no episode {advice}"]


def test_the_shortfall_counts_what_equal_shares_of_the_budget_leave_unused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Groups share what is left of the budget equally (budget // tasks each): with two groups of 2 and 3
    rollouts left, each runs 1 and the third goes unused, so 2 of the 4 are cut, not 1; with 1 left, each
    share is 0 and the epoch runs no episode."""
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path, task_id="calc-2")
    config = ShellTrainConfig.model_validate({
        "epochs": 3, "tasks_per_epoch": 2, "group_size": 2, "rollout_budget": 7, "workers": 1,
        "teacher": "none", "env": {"max_steps": 2},
    })
    records, warned = _three_epochs_warned(tmp_path, config, caplog)
    assert [r["rollout/rollouts"] for r in records] == [4, 2, 0]
    assert [r["rollout/budget_shortfall"] for r in records] == [0, 2, 4]
    advice = "(give fewer epochs or a larger rollout_budget)"
    assert warned[2] == ["epoch 3: the run's rollout_budget of 7 leaves 1 rollout for the 4 this epoch's "
                         f"groups start with: it runs no episode {advice}"]

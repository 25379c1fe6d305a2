"""The epoch count a `shell train` run stores: a resume that asks for more stores the larger count."""

from __future__ import annotations

import sys
from pathlib import Path

from aios_rl.campaign.train import ShellTrainConfig, ShellTraining, open_training

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def stored_epochs(run: Path) -> int:
    training = open_training(run)
    try:
        return training.config.epochs
    finally:
        training.close()


def test_a_continued_run_targets_the_most_epochs_any_command_asked_for(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    config = ShellTrainConfig(epochs=2, warm_start_epochs=0, teacher="none")
    ShellTraining(run, tasks, config).close()
    assert stored_epochs(run) == 2
    ShellTraining(run, tasks, config.model_copy(update={"epochs": 5})).close()
    assert stored_epochs(run) == 5
    fewer = ShellTraining(run, tasks, config.model_copy(update={"epochs": 3}))
    assert fewer.config.epochs == 3  # this command's own target ...
    fewer.close()
    assert stored_epochs(run) == 5  # ... which does not take back the epochs asked for before
    asked = open_training(run, epochs=7)
    asked.close()
    assert stored_epochs(run) == 7

"""`shell train`'s distinct_first: a task's group of rollouts starts with different first actions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aios_rl.campaign.train import TRAIN_CONFIG_KEY, ShellTrainConfig, ShellTraining
from aios_rl.control.plane import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def first_actions(training: ShellTraining) -> list[str]:
    store = training.plane.store
    bodies = store.episode_bodies(store.episode_ids())
    return [json.loads(body)["trajectory"][0]["action"] for body in bodies.values()]


def test_a_group_tries_different_first_moves_and_old_runs_resume_without_it(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=4, teacher="none", warm_start_epochs=0,
                              temperature=0.05, distinct_first=True)  # a sharp policy: independent draws repeat
    training = ShellTraining(tmp_path / "run", tasks, config)
    try:
        training.run_epoch(1)
        actions = first_actions(training)
    finally:
        training.close()
    assert len(actions) == 4 and len(set(actions)) == 4
    sharp = ShellTraining(tmp_path / "plain", tasks, config.model_copy(update={"distinct_first": False}))
    try:
        sharp.run_epoch(1)
        assert len(set(first_actions(sharp))) < 4  # the same student repeats itself without the option
    finally:
        sharp.close()

    plane = ControlPlane(tmp_path / "plain")  # a run stored before the option existed
    stored = plane.store.get_meta(TRAIN_CONFIG_KEY)
    del stored["distinct_first"]
    plane.store.set_meta(TRAIN_CONFIG_KEY, stored)
    plane.close()
    resumed = ShellTraining(tmp_path / "plain", tasks, config.model_copy(update={"epochs": 2, "distinct_first": False}))
    assert resumed.config.distinct_first is False
    resumed.close()

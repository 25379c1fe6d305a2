"""`shell train`'s distinct_first: a task's group of rollouts starts with different first actions."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from aios_rl.campaign.train import ShellTrainConfig, ShellTraining

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402

T = TypeVar("T")


def one_epoch(run: Path, tasks: Path, config: ShellTrainConfig, read: Callable[[ShellTraining], T]) -> T:
    """Run the first epoch of a new training run and return what ``read`` reads from it."""
    training = ShellTraining(run, tasks, config)
    try:
        training.run_epoch(1)
        return read(training)
    finally:
        training.close()


def first_actions(training: ShellTraining) -> list[str]:
    store = training.plane.store
    bodies = store.episode_bodies(store.episode_ids())
    return [json.loads(body)["trajectory"][0]["action"] for body in bodies.values()]


def test_a_group_tries_different_first_moves_and_old_runs_resume_without_it(
    tmp_path: Path, edit_stored_config
) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=4, teacher="none", warm_start_epochs=0,
                              temperature=0.05, distinct_first=True)  # a sharp policy: independent draws repeat
    actions = one_epoch(tmp_path / "run", tasks, config, first_actions)
    assert len(actions) == 4 and len(set(actions)) == 4
    plain_config = config.model_copy(update={"distinct_first": False})
    plain = one_epoch(tmp_path / "plain", tasks, plain_config, first_actions)
    assert len(set(plain)) < 4  # the same student repeats itself without the option

    # a run stored before the option existed
    edit_stored_config(tmp_path / "plain", lambda stored: stored.pop("distinct_first"))
    resumed = ShellTraining(tmp_path / "plain", tasks, config.model_copy(update={"epochs": 2, "distinct_first": False}))
    assert resumed.config.distinct_first is False
    resumed.close()


def state_actions(training: ShellTraining) -> list[tuple[tuple, str]]:
    """(state, action) of every step the run's episodes took, states compared as GiGPO anchors them."""
    store = training.plane.store
    out = []
    for body in store.episode_bodies(store.episode_ids()).values():
        for step in json.loads(body)["trajectory"]:
            obs = step["observation"]
            key = obs.get("state_key") or (obs["text"], tuple(obs["candidates"]))
            out.append((key, step["action"]))
    return out


def test_distinct_states_never_repeats_an_action_from_a_state_the_group_shares(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=4, teacher="none", warm_start_epochs=0,
                              temperature=0.002, distinct_states=True)  # sharper: reads and stops repeat
    pairs = one_epoch(tmp_path / "run", tasks, config, state_actions)
    assert len({key for key, _ in pairs}) < len(pairs)  # states recur within the group (the opening state)
    assert len(set(pairs)) == len(pairs)  # ... but no action was drawn twice from one of them
    first_only = config.model_copy(update={"distinct_states": False, "distinct_first": True})
    repeated = one_epoch(tmp_path / "first", tasks, first_only, state_actions)
    assert len(set(repeated)) < len(repeated)  # distinct first actions alone repeat later ones

"""The epoch count a `shell train` run stores: each command that asks for another count and gets through
set-up stores it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aios_rl.campaign.train import TRAIN_CONFIG_KEY, ShellTrainConfig, ShellTraining, open_training
from aios_rl.contracts.errors import ConfigError, StorageError
from aios_rl.control.plane import ControlPlane
from aios_rl.storage.checkpoints import TENSORS_FILE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def stored(run: Path) -> dict:
    plane = ControlPlane(run, writer=False)
    try:
        return plane.store.get_meta(TRAIN_CONFIG_KEY)
    finally:
        plane.close()


def stored_epochs(run: Path) -> int:
    training = open_training(run)
    try:
        return training.config.epochs
    finally:
        training.close()


def test_a_continued_run_targets_the_epoch_count_asked_for_last(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    config = ShellTrainConfig(epochs=2, warm_start_epochs=0, teacher="none")
    ShellTraining(run, tasks, config).close()
    assert stored_epochs(run) == 2
    ShellTraining(run, tasks, config.model_copy(update={"epochs": 5})).close()
    assert stored_epochs(run) == 5
    ShellTraining(run, tasks, config.model_copy(update={"epochs": 3})).close()
    assert stored_epochs(run) == 3  # a count asked for by mistake is taken back by asking again
    open_training(run, epochs=7).close()
    assert stored_epochs(run) == 7


def test_a_run_stored_by_an_older_version_resumes_again_after_its_count_changed(
    tmp_path: Path, edit_stored_config
) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none")
    ShellTraining(run, tasks, config).close()

    def as_before(settings: dict) -> None:  # stored before frontier sampling and demonstration replay existed
        del settings["task_sampling"], settings["demo_replay"]

    edit_stored_config(run, as_before)
    for epochs in (2, 3):  # the same command twice: the second must not see the first's filled-in settings
        resumed = ShellTraining(run, tasks, config.model_copy(update={"epochs": epochs}))
        assert (resumed.config.task_sampling, resumed.config.demo_replay) == ("uniform", False)
        resumed.close()
    settings = stored(run)
    assert settings["epochs"] == 3 and "task_sampling" not in settings and "demo_replay" not in settings


def test_a_resume_whose_set_up_fails_leaves_the_stored_count(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    config = ShellTrainConfig(epochs=2, warm_start_epochs=0, teacher="none")
    ShellTraining(run, tasks, config).close()
    tensors = next(run.rglob(TENSORS_FILE))  # the initial checkpoint's weights, now unreadable
    tensors.write_bytes(tensors.read_bytes()[:-8])
    with pytest.raises(StorageError, match="sha256 mismatch") as info:
        ShellTraining(run, tasks, config.model_copy(update={"epochs": 5}))
    # The error (kept, as a notebook keeps the last one) holds no open store: its WAL is checkpointed away.
    assert info.value and not (run / "control.db-wal").exists()
    assert stored(run)["epochs"] == 2


def test_continuing_with_an_invalid_epoch_count_is_a_config_error(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    ShellTraining(run, tasks, ShellTrainConfig(epochs=2, warm_start_epochs=0, teacher="none")).close()
    with pytest.raises(ConfigError, match="epochs"):  # `shell train --run RUN --epochs 0`
        open_training(run, epochs=0)
    assert stored(run)["epochs"] == 2


def test_a_run_of_another_command_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    import torch

    from aios_rl.control.events import ControlConfig

    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    plane = ControlPlane(run, ControlConfig())  # e.g. a campaign or a demo: events, no training config
    try:
        plane.save_checkpoint("ckpt-0", {"w": torch.zeros(1)}, {})
        plane.initialize("ckpt-0")
        events = plane.store.event_count()
    finally:
        plane.close()
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none")
    with pytest.raises(ConfigError, match="not a `shell train` run"):
        ShellTraining(run, tasks, config)
    plane = ControlPlane(run, writer=False)
    try:
        assert plane.store.event_count() == events
        assert plane.store.get_meta(TRAIN_CONFIG_KEY) is None and plane.store.get_meta("tasks_dir") is None
        assert plane.state.lineage.active == "ckpt-0"
    finally:
        plane.close()

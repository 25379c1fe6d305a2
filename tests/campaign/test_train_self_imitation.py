"""`trainer.self_imitation_coef`: an RL run imitates each task's best verified success, kept across epochs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from aios_rl.algos.trainer import TrainerConfig
from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.train import SELF_IMITATION_KEY, ShellTrainConfig, ShellTraining
from aios_rl.contracts.errors import ConfigError, StorageError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def test_verified_successes_become_targets_without_a_teacher_and_survive_a_resume(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    warm = ShellTraining(tmp_path / "warm", tasks, ShellTrainConfig(epochs=1, warm_start_epochs=60, rl=False))
    warm.warm_start()
    trained, initial = warm.load_student(), warm.load_student("initial")
    assert trained is not warm.policy
    for name, value in warm.policy.state_dict().items():  # the active checkpoint is the warm-started student
        assert torch.equal(trained.state_dict()[name], value), name
    assert not all(torch.equal(initial.state_dict()[k], v) for k, v in trained.state_dict().items())
    with pytest.raises(StorageError, match="not found"):
        warm.load_student("ckpt-0099")
    warm.close()
    base = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=4, teacher="none", temperature=0.5,
                            init_from=str(tmp_path / "warm"))

    off = ShellTraining(tmp_path / "off", tasks, base.model_copy(update={"trainer": TrainerConfig(self_imitation_coef=0)}))
    off.run_epoch(1)
    off_record = read_metrics(tmp_path / "off" / "metrics.jsonl")[-1]
    assert off.plane.store.get_meta(SELF_IMITATION_KEY) is None
    off.close()
    assert off_record["rollout/success_rate"] > 0
    assert off_record["train/distill_loss"] == 0.0  # no teacher, no self-imitation: nothing to distil
    assert off_record["train/self_imitation_tasks"] == 0

    on_config = base.model_copy(update={"trainer": TrainerConfig(self_imitation_coef=1.0)})
    on = ShellTraining(tmp_path / "on", tasks, on_config)
    on.run_epoch(1)
    record = read_metrics(tmp_path / "on" / "metrics.jsonl")[-1]
    archive = on.plane.store.get_meta(SELF_IMITATION_KEY)
    on.close()
    assert record["rollout/success_rate"] > 0
    assert record["train/distill_loss"] > 0.0
    assert list(archive) == ["calc-1"]
    assert record["train/self_imitation_tasks"] == 1

    resumed = ShellTraining(tmp_path / "on", tasks, on_config.model_copy(update={"epochs": 2}))
    try:
        assert resumed.plane.store.get_meta(SELF_IMITATION_KEY) == archive  # the resumed run keeps it
        batch = resumed._archived_targets(2, archive)
        assert len(batch) == archive["calc-1"]["steps"] > 0
        stored = resumed.plane.store.episode_bodies([archive["calc-1"]["episode_id"]])
        assert '"outcome":"success"' in stored[archive["calc-1"]["episode_id"]].replace(" ", "")
    finally:
        resumed.close()


def test_a_run_stored_before_self_imitation_resumes_without_it(tmp_path: Path, edit_stored_config) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none")
    ShellTraining(tmp_path / "old", tasks, config).close()

    def as_before(stored: dict) -> None:  # as a run stored by the previous version
        del stored["trainer"]["self_imitation_coef"]

    edit_stored_config(tmp_path / "old", as_before)

    resumed = ShellTraining(tmp_path / "old", tasks, config.model_copy(update={"epochs": 2}))  # the same command
    assert resumed.config.trainer.self_imitation_coef == 0.0  # what the run was trained with
    resumed.close()
    asked_for = config.model_copy(update={"trainer": TrainerConfig(self_imitation_coef=0.5)})
    with pytest.raises(ConfigError, match="different configuration"):
        ShellTraining(tmp_path / "old", tasks, asked_for)


def test_a_run_stored_with_an_old_default_resumes_with_it(tmp_path: Path, edit_stored_config) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none", allocator="rail")
    ShellTraining(tmp_path / "old", tasks, config).close()

    def as_before(stored: dict) -> None:  # as a run stored before the RAIL defaults changed
        rail = stored["allocation"]["rail"]
        assert (rail["l2"], rail["promotion_margin"]) == (10.0, 0.05)
        rail.update(l2=0.1, promotion_margin=None)

    edit_stored_config(tmp_path / "old", as_before)

    resumed = ShellTraining(tmp_path / "old", tasks, config.model_copy(update={"epochs": 2}))  # same command
    assert resumed.config.allocation.rail.l2 == 0.1
    assert resumed.collector.allocator.controller.config.l2 == 0.1
    assert resumed.collector.allocator.controller.config.promotion_margin is None
    resumed.close()
    # stored before the margin existed: it promoted without one
    edit_stored_config(tmp_path / "old", lambda stored: stored["allocation"]["rail"].pop("promotion_margin"))
    resumed = ShellTraining(tmp_path / "old", tasks, config.model_copy(update={"epochs": 2}))
    assert resumed.collector.allocator.controller.config.promotion_margin is None
    resumed.close()
    rail = config.allocation.rail.model_copy(update={"l2": 3.0})
    asked_for = config.model_copy(update={"allocation": config.allocation.model_copy(update={"rail": rail})})
    with pytest.raises(ConfigError, match="different configuration"):
        ShellTraining(tmp_path / "old", tasks, asked_for)


def test_a_run_stored_with_the_old_warm_start_default_resumes_with_it(
    tmp_path: Path, edit_stored_config
) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, teacher="none")  # the default warm start: no teacher, so it never runs
    assert config.warm_start_epochs == 60
    ShellTraining(tmp_path / "old", tasks, config).close()
    # as a run stored before the default changed
    edit_stored_config(tmp_path / "old", lambda stored: stored.update(warm_start_epochs=20))

    resumed = ShellTraining(tmp_path / "old", tasks, config.model_copy(update={"epochs": 2}))  # same command
    assert resumed.config.warm_start_epochs == 20
    resumed.close()
    with pytest.raises(ConfigError, match="different configuration"):
        ShellTraining(tmp_path / "old", tasks, config.model_copy(update={"warm_start_epochs": 40}))


def test_an_epoch_killed_before_its_checkpoint_leaves_the_archive_as_it_was(
    tmp_path: Path, kill_once
) -> None:
    """The archive commits with the epoch's checkpoint: an epoch run again after a kill counts as solved
    before it only what earlier epochs archived, as the run that was never killed does."""
    make_task(tmp_path)
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=4, warm_start_epochs=60, workers=1,
                              trainer=TrainerConfig(self_imitation_coef=1.0))
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    training.warm_start()
    killed = kill_once(ShellTraining, "_checkpoint")
    with pytest.raises(killed):
        training.run_epoch(1)
    assert not training.plane.store.get_meta(SELF_IMITATION_KEY)  # nothing of the killed epoch committed
    training.close()
    resumed = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        report = resumed.run_epoch(1)
        assert report.metrics["rollout/success_rate"] > 0
        assert report.metrics["train/self_imitation_tasks"] == 1
        assert report.metrics["tasks/solved_before"] == 0  # as in a run never killed: nothing was archived
        assert list(resumed.plane.store.get_meta(SELF_IMITATION_KEY)) == ["calc-1"]
    finally:
        resumed.close()

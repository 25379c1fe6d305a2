"""`consolidation_passes`: after each epoch's update, distillation-only passes over the standing targets
(the oracle's demonstrations and the self-imitation archive)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from aios_rl.algos.trainer import UpdateStats
from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.train import SELF_IMITATION_KEY, ShellTrainConfig, ShellTraining

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A task directory and a briefly warm-started run to start from (the tasks, the run)."""
    root = tmp_path_factory.mktemp("consolidation")
    make_task(root)
    config = ShellTrainConfig(epochs=1, warm_start_epochs=40, rl=False, workers=1)
    run = ShellTraining(root / "warm", root / "tasks", config)
    run.warm_start()
    run.close()
    return root / "tasks", root / "warm"


def stored_archive(training: ShellTraining) -> dict:
    return training.plane.store.get_meta(SELF_IMITATION_KEY, {})


def standing_loss(training: ShellTraining, archive: bool) -> float:
    """The student's distillation loss over the run's demonstrations (and self-imitation archive)."""
    targets = training._demonstrations()
    if archive:
        targets = targets + training._archived_targets(1, stored_archive(training))
    with torch.no_grad():
        return training.trainer.auxiliary_loss(targets, None, None, UpdateStats()).item()


@pytest.mark.parametrize("rl", [True, False], ids=["rl", "distillation-only"])
def test_the_passes_fit_the_standing_targets_after_the_update(
    warm: tuple[Path, Path], tmp_path: Path, rl: bool
) -> None:
    tasks, warm_run = warm
    losses, records = {}, {}
    for passes in (0, 6):
        # temperature 0.5: the one task is solved in the epoch, so the RL run's archive holds its fix
        config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=4, workers=1, temperature=0.5,
                                  rl=rl, consolidation_passes=passes, init_from=str(warm_run))
        training = ShellTraining(tmp_path / f"passes-{passes}", tasks, config)
        try:
            training.run_epoch(1)
            records[passes] = read_metrics(tmp_path / f"passes-{passes}" / "metrics.jsonl")[-1]
            losses[passes] = standing_loss(training, archive=rl)
            demonstrations = len(training._demonstrations())
            archived = len(training._archived_targets(1, stored_archive(training))) if rl else 0
        finally:
            training.close()
    # Both runs took the same rollouts and the same update; only the passes after it differ.
    assert records[0]["train/distill_loss"] == pytest.approx(records[6]["train/distill_loss"])
    assert records[0]["train/consolidation_targets"] == 0 and records[0]["train/consolidation_loss"] is None
    if rl:
        assert records[6]["rollout/success_rate"] > 0 and archived > 0
    assert records[6]["train/consolidation_targets"] == demonstrations + archived
    assert records[6]["train/consolidation_loss"] > 0
    assert losses[6] < losses[0] - 0.05


def test_a_warm_start_killed_before_its_line_is_not_distilled_again(
    tmp_path: Path, kill_once
) -> None:
    from aios_rl.campaign import train as train_module

    make_task(tmp_path)
    config = ShellTrainConfig(epochs=1, warm_start_epochs=3, workers=1)
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    killed = kill_once(train_module, "append_metrics")
    with pytest.raises(killed):
        training.warm_start()
    committed = training.plane.state.lineage.active
    training.close()
    again = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        report = again.warm_start()
        assert report is not None and report.checkpoint == committed
        # no second distillation
        assert again.plane.state.lineage.checkpoints.keys() == {"ckpt-0000", committed}
        assert [r["phase"] for r in read_metrics(tmp_path / "run" / "metrics.jsonl")] == ["warm_start"]
        assert again.warm_start() is None
    finally:
        again.close()

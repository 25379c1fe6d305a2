"""`trainer.kl_coef` in `shell train`: the KL penalty holds each update close to the student before it."""

from __future__ import annotations

import sys
from pathlib import Path

from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.train import ShellTrainConfig, ShellTraining

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def test_kl_coef_penalises_the_update_against_the_student_before_it(tmp_path: Path) -> None:
    make_task(tmp_path)
    kl = {}
    for coef in (0.0, 0.5):
        # two passes over the batch: the first moves the student, the second sees a KL above 0
        config = ShellTrainConfig.model_validate({
            "epochs": 1, "tasks_per_epoch": 1, "group_size": 2, "workers": 1, "teacher": "none",
            "trainer": {"kl_coef": coef, "update_epochs": 2, "minibatch_size": 4, "lr": 0.05},
        })
        training = ShellTraining(tmp_path / f"kl-{coef}", tmp_path / "tasks", config)
        try:
            training.run_epoch(1)
        finally:
            training.close()
        kl[coef] = read_metrics(tmp_path / f"kl-{coef}" / "metrics.jsonl")[-1]["train/kl"]
    assert kl[0.0] == 0.0  # no reference is built without the penalty
    assert kl[0.5] > 0.0

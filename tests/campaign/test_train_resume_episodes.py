"""Exactly once across a kill: an epoch killed after some of its episodes were stored, and run again, stores
and counts each of its rollouts once, as the run never killed does."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from aios_rl.algos.trainer import TrainerConfig
from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.train import SELF_IMITATION_KEY, ShellTrainConfig, ShellTraining
from aios_rl.control.plane import ControlPlane
from aios_rl.control.status import status_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


class Killed(BaseException):
    """What a SIGKILL would do to the process: nothing after it runs."""


def _train(
    run: Path, tasks: Path, config: ShellTrainConfig, *, kill: tuple[str, int] | None = None,
    warm_start: bool = False,
) -> None:
    """Train ``run`` to its last epoch (after a warm start with ``warm_start``); ``kill``: (a ControlPlane
    method, n) stops the process, as a SIGKILL would, on that method's n-th call."""
    training = ShellTraining(run, tasks, config)
    if kill is not None:
        method, at = kill
        real, calls = getattr(training.plane, method), []

        def killing(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) == at:
                raise Killed
            return real(*args, **kwargs)

        setattr(training.plane, method, killing)
    try:
        if warm_start:
            training.warm_start()
        for epoch in range(training.epochs_done() + 1, config.epochs + 1):
            training.run_epoch(epoch)
    except Killed:
        pass
    finally:
        training.close()


def _stored(run: Path) -> dict[str, Any]:
    plane = ControlPlane(run, writer=False)
    try:
        report = status_report(plane)
        ids = plane.store.episode_ids()
        windows = [c.data_window for c in plane.state.lineage.checkpoints.values()]
        archive = plane.store.get_meta(SELF_IMITATION_KEY, {})
        return {"report": report, "ids": ids, "windows": windows, "archive": archive}
    finally:
        plane.close()


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if not k.startswith("time/") and "wall" not in k}


def test_an_epoch_killed_after_some_episodes_were_stored_counts_each_rollout_once(tmp_path: Path) -> None:
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path, task_id="calc-2")
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=2, tasks_per_epoch=2, group_size=2, warm_start_epochs=0, workers=1,
                              trainer=TrainerConfig(self_imitation_coef=1.0))
    _train(tmp_path / "whole", tasks, config)
    _train(tmp_path / "killed", tasks, config, kill=("record_episode", 3))
    killed_once = _stored(tmp_path / "killed")
    assert len(killed_once["ids"]) == 2 and killed_once["report"]["episodes_recorded"] == 2
    _train(tmp_path / "killed", tasks, config)
    whole, resumed = _stored(tmp_path / "whole"), _stored(tmp_path / "killed")
    rollouts = read_metrics(tmp_path / "whole" / "metrics.jsonl")[-1]["rollout/total_rollouts"]
    assert rollouts == 8
    assert whole["report"]["episodes_recorded"] == len(whole["ids"]) == rollouts
    assert resumed["report"]["episodes_recorded"] == len(resumed["ids"]) == rollouts
    assert resumed["report"]["lanes"] == whole["report"]["lanes"]
    assert resumed["report"]["success_rates"] == whole["report"]["success_rates"]
    # the update, the data window and the archive name the episodes that are stored
    assert [len(w) for w in resumed["windows"]] == [len(w) for w in whole["windows"]]
    assert {i for w in resumed["windows"] for i in w} <= set(resumed["ids"])
    assert {a["episode_id"] for a in resumed["archive"].values()} <= set(resumed["ids"])
    assert sorted(resumed["archive"]) == sorted(whole["archive"])
    metrics = [_comparable(r) for r in read_metrics(tmp_path / "killed" / "metrics.jsonl")]
    assert metrics == [_comparable(r) for r in read_metrics(tmp_path / "whole" / "metrics.jsonl")]


def test_a_rerun_episode_that_differs_from_the_stored_one_gives_way_to_it(tmp_path: Path) -> None:
    """Should a rollout run again come out otherwise (say a wall-clock limit cut it differently), the episode
    its killed attempt stored is the one kept, counted and trained on."""
    make_task(tmp_path, task_id="calc-1")
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=2, warm_start_epochs=0, workers=1,
                              teacher="none")
    _train(run, tasks, config, kill=("record_episode", 2))
    with sqlite3.connect(run / "control.db") as db:  # the stored episode, as the killed attempt ran it
        (episode_id, body), = db.execute("SELECT episode_id, body FROM episodes").fetchall()
        stored = json.loads(body) | {"reward": 100.0}
        db.execute("UPDATE episodes SET body = ? WHERE episode_id = ?", (json.dumps(stored), episode_id))
    db.close()
    _train(run, tasks, config)
    record = read_metrics(run / "metrics.jsonl")[-1]
    assert record["rollout/episodes"] == 2 and record["rollout/reward_mean"] > 40
    after = _stored(run)
    assert after["report"]["episodes_recorded"] == len(after["ids"]) == 2 and episode_id in after["ids"]
    assert episode_id in after["windows"][-1]


def _lineage(run: Path) -> list[tuple[str, str | None, int]]:
    """Each registered checkpoint's id, parent and data window's size (episode ids derive from the run)."""
    plane = ControlPlane(run, writer=False)
    try:
        return [(c.checkpoint_id, c.parent, len(c.data_window))
                for c in plane.state.lineage.checkpoints.values()]
    finally:
        plane.close()


@pytest.mark.parametrize("phase", ["warm_start", "epoch"])
def test_a_checkpoint_registered_and_killed_before_it_was_applied_is_applied_on_resume(
    tmp_path: Path, phase: str
) -> None:
    """A kill between a checkpoint's registration and its ``update.completed`` leaves it registered, never
    applied; the resumed phase applies that very checkpoint, so no checkpoint that no phase produced stays in
    the lineage (nor its files on disk) and every later one has the id the run never killed gives it."""
    make_task(tmp_path, task_id="calc-1")
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=2, tasks_per_epoch=1, group_size=2, warm_start_epochs=2, workers=1)

    def train(run: Path, kill_at: int | None = None) -> None:
        kill = None if kill_at is None else ("complete_update", kill_at)
        _train(run, tasks, config, kill=kill, warm_start=True)

    train(tmp_path / "whole")
    killed = tmp_path / "killed"
    train(killed, kill_at=1 if phase == "warm_start" else 2)
    assert len(_lineage(killed)) == (2 if phase == "warm_start" else 3)  # registered, never applied
    train(killed)
    assert _lineage(killed) == _lineage(tmp_path / "whole")
    assert [r["checkpoint"] for r in read_metrics(killed / "metrics.jsonl")] == [
        "ckpt-0001", "ckpt-0002", "ckpt-0003"
    ]
    assert sorted(p.name for p in (killed / "checkpoints").iterdir()) == [
        "ckpt-0000", "ckpt-0001", "ckpt-0002", "ckpt-0003"
    ]
    metrics = [_comparable(r) for r in read_metrics(killed / "metrics.jsonl")]
    assert metrics == [_comparable(r) for r in read_metrics(tmp_path / "whole" / "metrics.jsonl")]

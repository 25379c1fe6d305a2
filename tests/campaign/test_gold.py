"""Gold sets from a task directory: ``limit`` bounds the tasks used; a limit below one is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aios_rl.campaign import gold
from aios_rl.contracts.episode import Task
from aios_rl.contracts.errors import ConfigError


@pytest.fixture
def three_tasks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    tasks = [Task(task_id=f"t{i}", environment="shell", family="f", prompt="p", split="train")
             for i in range(3)]
    monkeypatch.setattr(gold, "load_tasks", lambda root: tasks)
    monkeypatch.setattr(gold, "reference_action", lambda task: None)
    rolled: list[str] = []

    def run_group(make_env: Any, task: Task, policy: Any, **kwargs: Any) -> list[str]:
        rolled.append(task.task_id)
        return [f"episode of {task.task_id}"]

    monkeypatch.setattr(gold, "run_group", run_group)
    return rolled


def test_limit_bounds_the_tasks_rolled_out(tmp_path: Path, three_tasks: list[str]) -> None:
    assert len(gold.gold_from_tasks(tmp_path, limit=2)) == 4  # two episodes per task
    assert three_tasks == ["t0", "t0", "t1", "t1"]


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_a_config_error(tmp_path: Path, three_tasks: list[str], limit: int) -> None:
    with pytest.raises(ConfigError, match=f"limit must be >= 1, got {limit}"):
        gold.gold_from_tasks(tmp_path, limit=limit)  # -1 would slice off the last task, 0 claim "no tasks"
    assert three_tasks == []

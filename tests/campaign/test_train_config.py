"""`shell train`'s configuration: how the settings of a run are spelled, stored and compared on a resume."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aios_rl.campaign.train import ShellTrainConfig, ShellTraining, open_training
from aios_rl.contracts.errors import ConfigError
from aios_rl.rollout.allocators import AllocatorConfig, GroupPlan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [("Dapo-3", "dapo-3"), (" DAPO-3 ", "dapo-3"), ("grpo-4", "uniform-4"), ("GRPO-4", "uniform-4"),
     ("rail", "rail-32"), ("Rail-32", "rail-32"), ("tree-6", "tree-6")],
)
def test_an_allocator_is_stored_under_its_canonical_name(typed: str, canonical: str) -> None:
    config = ShellTrainConfig(allocator=typed)
    assert config.allocator == config.allocator_name() == canonical
    assert config == ShellTrainConfig(allocator=canonical)


def test_rail_alone_is_named_by_the_cap_it_builds() -> None:
    config = ShellTrainConfig(allocator="rail", allocation=AllocatorConfig(rail_cap=24))
    assert config.allocator == "rail-24"


def test_a_run_resumes_under_any_spelling_of_its_allocator(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    settings = {"warm_start_epochs": 0, "teacher": "none"}
    ShellTraining(run, tasks, ShellTrainConfig(epochs=1, **settings, allocator="dapo-3")).close()
    typed = ShellTrainConfig(epochs=2, **settings, allocator="Dapo-3")  # `--allocator Dapo-3`
    resumed = ShellTraining(run, tasks, typed)
    assert resumed.config.allocator == "dapo-3"
    resumed.close()


@pytest.mark.parametrize(
    ("stored", "asked"), [("Dapo-3", "dapo-3"), ("grpo-3", "uniform-3"), ("rail", "rail-32")]
)
def test_a_run_stored_with_another_spelling_loads_and_resumes(
    tmp_path: Path, edit_stored_config, stored: str, asked: str
) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    settings = {"epochs": 1, "warm_start_epochs": 0, "teacher": "none"}
    ShellTraining(run, tasks, ShellTrainConfig(**settings, allocator=asked)).close()
    edit_stored_config(run, lambda config: config.update(allocator=stored))  # as an older version stored it
    reopened = open_training(run)  # `shell train --run RUN`
    assert reopened.config.allocator == asked and reopened.collector.allocator.name == asked
    reopened.close()
    for typed in (stored, asked):  # the same command as before, or the canonical name
        resumed = ShellTraining(run, tasks, ShellTrainConfig(**settings | {"epochs": 2}, allocator=typed))
        assert resumed.config.allocator == asked
        resumed.close()


@pytest.mark.parametrize(
    ("allocator", "allocation"),
    [("rail-6", AllocatorConfig()), ("rail-8", AllocatorConfig()), ("rail", AllocatorConfig(rail_cap=8)),
     ("rail-3", AllocatorConfig(rail_base_group=4))],
)
def test_a_rail_cap_that_leaves_no_room_to_branch_is_refused_before_the_run_exists(
    tmp_path: Path, allocator: str, allocation: AllocatorConfig
) -> None:
    make_task(tmp_path)
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none", allocator=allocator,
                              allocation=allocation)
    base, cap = allocation.rail_base_group, int(config.allocator.split("-")[1])
    with pytest.raises(ConfigError, match=rf"base group of {base} .* {cap}.* never branch.* N > {base}"):
        ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    assert not (tmp_path / "run").exists()


def test_a_rail_run_stored_with_no_room_to_branch_still_resumes(tmp_path: Path, edit_stored_config) -> None:
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    ShellTraining(run, tasks, ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none",
                                               allocator="rail-16")).close()
    edit_stored_config(run, lambda config: config.update(allocator="rail-6"))  # stored before it was refused
    reopened = open_training(run, epochs=2)
    assert reopened.collector.allocator.group_plan("t") == GroupPlan(6, 6)
    reopened.close()


def test_a_stored_configuration_this_version_refuses_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    """A run stored by an older version with a value today's bounds refuse (here a group of 5000, above the
    bound of 1024 added since) ended `shell eval` and a resume in a raw pydantic ValidationError."""
    from aios_rl.campaign.shell_eval import run_shell_eval
    from aios_rl.campaign.train import TRAIN_CONFIG_KEY
    from aios_rl.control.plane import ControlPlane

    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    ShellTraining(run, tasks, ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none")).close()
    plane = ControlPlane(run)
    try:
        stored = plane.store.get_meta(TRAIN_CONFIG_KEY)
        plane.store.set_meta(TRAIN_CONFIG_KEY, stored | {"group_size": 5000})
    finally:
        plane.close()
    with pytest.raises(ConfigError, match=r"cannot evaluate .*run:\n.*group_size"):
        run_shell_eval(run, split="train")
    with pytest.raises(ConfigError, match=r"cannot continue .*run:\n.*group_size"):
        open_training(run)
    with pytest.raises(ConfigError, match=r"cannot continue .*run:\n.*group_size"):
        ShellTraining(run, tasks, ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none"))


@pytest.mark.parametrize("passes", [0, 100_001])
def test_redistill_passes_outside_their_bounds_are_refused_before_any_work(tmp_path: Path, passes: int) -> None:
    """`shell redistill --passes 99999999` (a typo) ran without end: the setting is bounded, the flag was not."""
    make_task(tmp_path)
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks",
                             ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none"))
    try:
        with pytest.raises(ConfigError, match=f"at least one pass and at most 100000, got {passes}"):
            training.redistill(passes=passes)
    finally:
        training.close()

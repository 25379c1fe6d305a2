"""Campaign configuration: CLI overrides, YAML, and what a resume may change."""

from __future__ import annotations

from pathlib import Path

import pytest

from aios_rl.campaign.online_config import (
    CAMPAIGN_KEY,
    MAX_CAMPAIGN_TASKS,
    CampaignConfig,
    resume_config,
    stored_config,
)
from aios_rl.contracts.config import MIN_SEED, load_config
from aios_rl.contracts.errors import ConfigError
from aios_rl.storage.db import RunStore


def test_cli_flags_land_in_the_control_config(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  max_steps: 3\ncontrol:\n  ledger:\n    monitor_window: 2\n")
    cfg = load_config(
        CampaignConfig,
        path,
        {
            "control.ledger.batch_size": 2,
            "control.ledger.rollback_threshold": 5,
            "drill": "bad-update",
            "max_tasks": None,
        },
    )
    assert cfg.control.ledger.batch_size == 2 and cfg.control.ledger.rollback_threshold == 5
    assert cfg.control.ledger.monitor_window == 2 and cfg.env.max_steps == 3 and cfg.drill == "bad-update"
    assert cfg.max_tasks == CampaignConfig().max_tasks


def test_unknown_drill_and_key_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="drill"):
        load_config(CampaignConfig, None, {"drill": "explode"})
    path = tmp_path / "c.yaml"
    path.write_text("max_task: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'max_tasks'"):
        load_config(CampaignConfig, path)


def test_resume_keeps_the_stored_config_and_may_raise_max_tasks() -> None:
    stored = CampaignConfig(seed=3, max_tasks=8, drill="crash-after-update")
    same = resume_config(
        stored, None, {"seed": 3, "drill": "crash-after-update", "max_tasks": None, "teacher": None}
    )
    assert same == stored
    more = resume_config(stored, None, {"max_tasks": 20, "control.ledger.batch_size": 4})
    assert more.max_tasks == 20 and more.model_copy(update={"max_tasks": 8}) == stored


@pytest.mark.parametrize(
    ("key", "value"), [("seed", 4), ("control.ledger.batch_size", 2), ("teacher", "none")]
)
def test_resume_refuses_any_other_change(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resume_config(CampaignConfig(), None, {key: value})
    with pytest.raises(ConfigError, match="--config file"):
        resume_config(CampaignConfig(), CampaignConfig(seed=9), {})


def test_resume_with_the_same_config_file_keeps_the_stored_max_tasks(tmp_path: Path) -> None:
    # Started as `--config c.yaml --max-tasks 40`; resumed as `--config c.yaml --resume`: the file does not
    # set max_tasks, so the campaign must go on to 40 (as a resume without --config does), not stop at 24.
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  max_steps: 3\n")
    stored = load_config(CampaignConfig, path, {"max_tasks": 40})
    overrides = {"max_tasks": None, "seed": None}
    given = load_config(CampaignConfig, path, overrides)
    assert resume_config(stored, given, overrides).max_tasks == 40
    assert resume_config(stored, None, overrides).max_tasks == 40
    path.write_text("env:\n  max_steps: 3\nmax_tasks: 50\n")  # a file that does set it raises it
    assert resume_config(stored, load_config(CampaignConfig, path, overrides), overrides).max_tasks == 50


@pytest.mark.parametrize("bad", [0, -5])
def test_resume_refuses_a_max_tasks_below_one_as_a_fresh_start_does(bad: int) -> None:
    with pytest.raises(ConfigError, match="max_tasks"):
        load_config(CampaignConfig, None, {"max_tasks": bad})
    with pytest.raises(ConfigError, match="max_tasks"):
        resume_config(CampaignConfig(max_tasks=8), None, {"max_tasks": bad})


def test_resume_refuses_a_max_tasks_beyond_the_bound_as_a_fresh_start_does() -> None:
    # A typo such as `--resume --max-tasks 10000000000` would run a campaign that never ends.
    too_many = MAX_CAMPAIGN_TASKS + 1
    with pytest.raises(ConfigError, match="max_tasks"):
        load_config(CampaignConfig, None, {"max_tasks": too_many})
    with pytest.raises(ConfigError, match=rf"max_tasks \(--max-tasks\) must be at most {MAX_CAMPAIGN_TASKS}"):
        resume_config(CampaignConfig(max_tasks=8), None, {"max_tasks": too_many})
    assert resume_config(CampaignConfig(max_tasks=8), None, {"max_tasks": MAX_CAMPAIGN_TASKS}).max_tasks == (
        MAX_CAMPAIGN_TASKS
    )


def test_resume_with_the_same_config_file_keeps_the_fold_rules_the_campaign_was_stored_under() -> None:
    # control.semantics is the run's own (ControlPlane keeps the stored value); a campaign stored under an
    # older default resumed with the same file (which does not set it) is the same configuration.
    older = CampaignConfig().model_dump(mode="json") | {"control": {"semantics": 2}}
    stored = CampaignConfig.model_validate(older)
    resumed = resume_config(stored, CampaignConfig(), {})
    assert resumed.control.semantics == 2
    with pytest.raises(ConfigError, match="--config file"):
        resume_config(stored, CampaignConfig(seed=9), {})


def test_a_resume_given_the_teacher_as_first_typed_keeps_the_run() -> None:
    # The configuration stores `--teacher Oracle` as "oracle"; the same command resumes it.
    stored = CampaignConfig(teacher="Oracle")
    assert stored.teacher == "oracle"
    assert resume_config(stored, None, {"teacher": "Oracle"}).teacher == "oracle"
    with pytest.raises(ConfigError, match="teacher"):
        resume_config(stored, None, {"teacher": "none"})


@pytest.mark.parametrize("key, value", [("seed", 2**64), ("seed", MIN_SEED - 1), ("torch_threads", 2**31)])
def test_a_seed_or_thread_count_torch_cannot_take_is_a_config_error(key: str, value: int) -> None:
    """They raised a bare ValueError from torch once the campaign's run directory existed."""
    with pytest.raises(ConfigError, match=f"{key}: got {value}; expected input should be"):
        load_config(CampaignConfig, None, {key: value})


def test_a_stored_campaign_config_this_version_refuses_is_a_config_error(tmp_path: Path) -> None:
    # A bound added since (trainer.update_epochs <= 100000) or an edited store: `shell campaign --resume`
    # ended in a raw pydantic ValidationError.
    config = CampaignConfig().model_dump(mode="json")
    config["trainer"]["update_epochs"] = 200_000
    with RunStore(tmp_path / "control.db") as store:
        store.set_meta(CAMPAIGN_KEY, {"config": config, "campaign_id": "c", "tasks_dir": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"cannot resume .*:\ntrainer\.update_epochs: got 200000"):
        stored_config(tmp_path)

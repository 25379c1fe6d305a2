"""`aios-rl shell ...` commands: bad flags are ConfigErrors (one clear message), never tracebacks."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aios_rl.cli.main import app
from aios_rl.contracts.errors import AiosRlError, ConfigError


def test_tasks_from_repo_with_an_unbalanced_quote_in_the_test_command(tmp_path: Path) -> None:
    args = ["shell", "tasks-from-repo", str(tmp_path), "--test-cmd", 'python -m pytest "tests',
            "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert "--test-cmd" in str(result.exception)
    assert not (tmp_path / "out").exists()


def test_import_tasks_into_a_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "out").write_text("not a directory")
    args = ["shell", "import-tasks", str(tmp_path / "src"), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, AiosRlError), result.exception
    assert "--out" in str(result.exception) and "not a directory" in str(result.exception)
    assert (tmp_path / "out").read_text() == "not a directory"


def test_eval_with_a_non_finite_temperature_is_a_config_error(tmp_path: Path) -> None:
    for value in ("nan", "inf"):
        result = CliRunner().invoke(app, ["shell", "eval", "--run", str(tmp_path), "--temperature", value])
        assert isinstance(result.exception, ConfigError), result.exception
        assert "--temperature" in str(result.exception)


def _task_set(root: Path) -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    make_task(root)
    return root / "tasks"


def test_train_refuses_a_run_inside_its_task_directory(tmp_path: Path) -> None:
    tasks = _task_set(tmp_path)
    before = sorted(p.name for p in tasks.iterdir())
    for run in (tasks, tasks / "run"):
        result = CliRunner().invoke(app, ["shell", "train", "--tasks", str(tasks), "--run", str(run),
                                          "--epochs", "1", "--teacher", "none"])
        assert isinstance(result.exception, ConfigError), result.exception
        assert "--run" in str(result.exception)
        assert sorted(p.name for p in tasks.iterdir()) == before  # the task set stays loadable


def test_campaign_refuses_a_run_inside_its_task_directory(tmp_path: Path) -> None:
    tasks = _task_set(tmp_path)
    before = sorted(p.name for p in tasks.iterdir())
    result = CliRunner().invoke(app, ["shell", "campaign", "--tasks", str(tasks), "--run", str(tasks),
                                      "--max-tasks", "1", "--teacher", "none"])
    assert isinstance(result.exception, ConfigError), result.exception
    assert "--run" in str(result.exception)
    assert sorted(p.name for p in tasks.iterdir()) == before


def test_campaign_with_an_unknown_teacher_creates_no_run_directory(tmp_path: Path) -> None:
    tasks = _task_set(tmp_path)
    args = ["shell", "campaign", "--tasks", str(tasks), "--run", str(tmp_path / "run"), "--teacher", "codx"]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert "did you mean 'codex'" in str(result.exception)
    assert not (tmp_path / "run").exists()


def test_check_and_import_of_a_directory_without_tasks_are_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no tasks here")
    for args in (["shell", "check-tasks", str(tmp_path / "empty")],
                 ["shell", "import-tasks", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]):
        result = CliRunner().invoke(app, args)
        assert isinstance(result.exception, AiosRlError), (args, result.output)
        message = str(result.exception)
        assert "no task directories" in message and "manifest.json" in message and "repo/" in message
    assert not (tmp_path / "out").exists()


def test_eval_samples_at_temperature_0_warn_that_they_repeat_one_episode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Greedy decoding is deterministic: --samples 4 without --temperature ran the same episode four times per
    # task and said nothing (the help text alone told). The uniform baseline samples at any temperature.
    from aios_rl.campaign.shell_eval import run_shell_eval
    from aios_rl.contracts.errors import StorageError

    for policy, warned in (("checkpoint", True), ("uniform", False)):
        caplog.clear()
        with caplog.at_level(logging.WARNING), pytest.raises(StorageError):
            run_shell_eval(tmp_path / "no-run", samples=4, policy_kind=policy)
        assert ("same episode 4 times" in caplog.text) is warned
    caplog.clear()
    with caplog.at_level(logging.WARNING), pytest.raises(StorageError):
        run_shell_eval(tmp_path / "no-run", samples=4, temperature=1.0)
    assert "same episode" not in caplog.text


def test_eval_samples_beyond_the_bound_are_refused(tmp_path: Path) -> None:
    """`--samples 99999999999` was taken and ran without end."""
    result = CliRunner().invoke(app, ["shell", "eval", "--run", str(tmp_path), "--samples", "99999999999"])
    assert isinstance(result.exception, ConfigError), result.exception
    assert "--samples must be between 1 and 1024, got 99999999999" in str(result.exception)

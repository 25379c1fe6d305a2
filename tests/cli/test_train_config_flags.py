"""`shell train --config FILE`: flags left at their defaults do not override the file's values; given flags
do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aios_rl.campaign import train as train_module
from aios_rl.cli.main import app
from aios_rl.contracts.errors import ConfigError


class Captured(Exception):
    """Raised by the stand-in ShellTraining with the configuration the command built."""


def built_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str):
    def capture(run: Path, tasks: Path, config: train_module.ShellTrainConfig) -> None:
        raise Captured(config)

    monkeypatch.setattr(train_module, "ShellTraining", capture)
    yaml = tmp_path / "train.yaml"
    yaml.write_text("epochs: 9\nseed: 3\nteacher: none\ntrainer:\n  algo: ppo\nstudent:\n  kind: compact\n")
    args = ["shell", "train", "--tasks", str(tmp_path), "--run", str(tmp_path / "run"), "--config", str(yaml)]
    result = CliRunner().invoke(app, [*args, *flags])
    assert isinstance(result.exception, Captured), result.output
    return result.exception.args[0]


def test_the_config_file_wins_over_flags_left_at_their_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = built_config(tmp_path, monkeypatch)
    assert (config.epochs, config.seed, config.teacher, config.trainer.algo) == (9, 3, "none", "ppo")


def test_given_flags_win_over_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = built_config(tmp_path, monkeypatch, "--epochs", "5", "--seed", "0", "--teacher", "oracle",
                          "--algo", "grpo")
    assert (config.epochs, config.seed, config.teacher, config.trainer.algo) == (5, 0, "oracle", "grpo")


def test_a_model_for_a_compact_student_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--model without --student causal-lm would train the compact student and never load the model."""
    monkeypatch.setattr(train_module, "ShellTraining", lambda *_: pytest.fail("trained a compact student"))
    args = ["shell", "train", "--tasks", str(tmp_path), "--run", str(tmp_path / "run"),
            "--model", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--student causal-lm" in result.output
    config = built_config(tmp_path, monkeypatch, "--student", "causal-lm", "--model", str(tmp_path))
    assert (config.student.kind, config.student.model_path) == ("causal-lm", str(tmp_path))


def test_a_group_size_the_allocator_overrides_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The allocator's name sets the group size: --group-size 8 beside --allocator dapo-4 (or rail) trained
    groups of 4 (rail's cap) and never used the 8."""
    monkeypatch.setattr(train_module, "ShellTraining", lambda *_: pytest.fail("trained"))
    args = ["shell", "train", "--tasks", str(tmp_path), "--run", str(tmp_path / "run")]
    result = CliRunner().invoke(app, [*args, "--group-size", "8", "--allocator", "dapo-4"])
    assert isinstance(result.exception, ConfigError), result.exception
    assert "group_size 8 is not used: allocator 'dapo-4' sets the group size (4)" in str(result.exception)
    (tmp_path / "c.yaml").write_text("group_size: 8\n")
    result = CliRunner().invoke(app, [*args, "--config", str(tmp_path / "c.yaml"), "--allocator", "rail"])
    assert isinstance(result.exception, ConfigError), result.exception
    assert "allocator 'rail-32' sets its own group sizes (8 rollouts, branched up to 32)" in str(result.exception)
    config = built_config(tmp_path, monkeypatch, "--group-size", "4", "--allocator", "dapo-4")
    assert (config.group_size, config.allocator_name()) == (4, "dapo-4")  # the same size twice is no conflict


def test_a_run_stored_with_a_group_size_beside_its_allocator_resumes_with_the_same_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started before the group_size check (--group-size 3 --allocator dapo-2 was taken) stored both:
    the same command must resume it, as without --group-size it differs from the stored configuration."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    make_task(tmp_path)
    stored = train_module.ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=3, allocator="dapo-2",
                                           teacher="none", warm_start_epochs=0)
    train_module.ShellTraining(tmp_path / "run", tmp_path / "tasks", stored).close()  # as the old command
    real = train_module.ShellTraining
    monkeypatch.setattr(train_module, "ShellTraining", lambda *args: (_ for _ in ()).throw(Captured(args)))
    args = ["shell", "train", "--tasks", str(tmp_path / "tasks"), "--run", str(tmp_path / "run"), "--epochs",
            "1", "--tasks-per-epoch", "1", "--group-size", "3", "--allocator", "dapo-2", "--teacher", "none"]
    (tmp_path / "c.yaml").write_text("warm_start_epochs: 0\n")
    result = CliRunner().invoke(app, [*args, "--config", str(tmp_path / "c.yaml")])
    assert isinstance(result.exception, Captured), result.exception
    real(*result.exception.args[0]).close()  # the stored configuration takes it: a resume, not a new run
    result = CliRunner().invoke(app, ["shell", "train", "--tasks", str(tmp_path / "tasks"), "--run",
                                      str(tmp_path / "new"), "--group-size", "3", "--allocator", "dapo-2"])
    assert isinstance(result.exception, ConfigError)  # a new run is still refused


@pytest.mark.parametrize("flags, message", [
    (["--group-size", "99999999999999999999"],
     "group_size: got 99999999999999999999; expected input should be less than or equal to 1024"),
    (["--epochs", "99999999999999999999"], "epochs: got 99999999999999999999; expected input should be less"),
    (["--allocator", "uniform-99999999999999999999"], "N must be at most 1024"),
])
def test_a_count_no_run_could_reach_is_refused_before_the_run_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], message: str
) -> None:
    """`group_size: 99999999999999999999` was taken: the run directory was made and the epoch never ended."""
    monkeypatch.setattr(train_module, "ShellTraining", lambda *_: pytest.fail("trained"))
    args = ["shell", "train", "--tasks", str(tmp_path), "--run", str(tmp_path / "run"), *flags]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert message in str(result.exception)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text", ["warm_start_epochs: 10000000", "redistill_passes: 10000000",
                                  "consolidation_passes: 10000000", "validation:\n  samples: 100000",
                                  "env:\n  max_steps: 10000000", "trainer:\n  update_epochs: 10000000",
                                  "workers: 100000"])
def test_passes_and_counts_in_a_config_file_have_upper_bounds(tmp_path: Path, text: str) -> None:
    from aios_rl.contracts.config import load_config

    (tmp_path / "c.yaml").write_text(text + "\n")
    with pytest.raises(ConfigError, match="expected input should be less than or equal to"):
        load_config(train_module.ShellTrainConfig, tmp_path / "c.yaml")

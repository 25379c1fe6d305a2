"""`aios-rl bench rollouts`: its --out directory is checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aios_rl.cli.main import app
from aios_rl.contracts.config import MAX_SEED
from aios_rl.contracts.errors import ConfigError


@pytest.mark.parametrize("kind", ["file", "non-empty directory"])
def test_out_that_is_not_a_new_directory_is_a_config_error(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("not a directory\n")
    else:
        out.mkdir()
        (out / "results.json").write_text("{}\n")
    args = ["bench", "rollouts", "--tasks", str(tmp_path / "tasks"), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert "--out" in str(result.exception)
    assert out.exists() and (out.is_file() or [p.name for p in out.iterdir()] == ["results.json"])


@pytest.mark.parametrize("flags", [["--first-seed", str(MAX_SEED + 1)], ["--seed-list", f"0,{2**64}"],
                                   ["--first-seed", str(MAX_SEED - 1), "--seeds", "3"]])
def test_a_seed_torch_cannot_take_is_refused_before_out_exists(tmp_path: Path, flags: list[str]) -> None:
    """Each seed becomes shell train's seed; beyond its bound torch raised a bare ValueError once --out
    held the seed's initial run."""
    out = tmp_path / "out"
    args = ["bench", "rollouts", "--tasks", str(tmp_path), "--out", str(out), *flags]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert f"seeds must be between 0 and {MAX_SEED}" in str(result.exception)
    assert not out.exists()


@pytest.mark.parametrize("key, value, instead", [
    ("seed", "7", "seeds, first_seed or seed_list"), ("allocator", "rail", "methods"),
    ("tasks_per_epoch", "2", "tasks_per_round"), ("rollout_budget", "64", "budget"),
    ("group_size", "16", "methods"), ("epochs", "3", "budget"),
])
def test_train_settings_the_bench_sets_itself_are_refused(
    tmp_path: Path, key: str, value: str, instead: str
) -> None:
    """Every method's run overwrote these, so `train: {seed: 7}` ran seed 0 without a word."""
    (tmp_path / "b.yaml").write_text(f"train:\n  {key}: {value}\n")
    out = tmp_path / "out"
    args = ["bench", "rollouts", "--tasks", str(tmp_path), "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--config", str(tmp_path / "b.yaml")])
    assert isinstance(result.exception, ConfigError), result.exception
    assert f"train.{key} is set by bench rollouts itself" in str(result.exception)
    assert f"give {instead}" in str(result.exception) and not out.exists()


def test_a_rail_method_with_no_room_to_branch_is_refused_before_any_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["bench", "rollouts", "--tasks", str(tmp_path / "tasks"), "--methods", "uniform-6,rail-6",
            "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert "'rail-6'" in str(result.exception) and "never branch" in str(result.exception)
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("flags, key", [(["--budget", "99999999999999"], "budget"),
                                        (["--seeds", "99999999"], "seeds"),
                                        (["--eval-samples", "99999999"], "eval_samples")])
def test_counts_beyond_their_bound_are_refused_before_out_exists(
    tmp_path: Path, flags: list[str], key: str
) -> None:
    """A typo such as `--budget 99999999999999` was taken and the bench ran without end."""
    out = tmp_path / "out"
    args = ["bench", "rollouts", "--tasks", str(tmp_path), "--out", str(out), *flags]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert f"{key}: got" in str(result.exception) and "less than or equal to" in str(result.exception)
    assert not out.exists()


@pytest.mark.parametrize("methods, same", [("rail-3,RAIL-3", "'rail-3' and 'RAIL-3'"),
                                           ("uniform-8, grpo-8", "'uniform-8' and 'grpo-8'")])
def test_two_names_of_one_allocator_are_refused_before_out_exists(
    tmp_path: Path, methods: str, same: str
) -> None:
    """Allocator names are read case-blind (GRPO-N is uniform-N), but the distinct check compared the text:
    `--methods rail-3,RAIL-3` trained the same allocator twice as two methods."""
    out = tmp_path / "out"
    args = ["bench", "rollouts", "--tasks", str(tmp_path), "--out", str(out), "--methods", methods]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert "--methods needs distinct allocator names" in str(result.exception)
    assert f"{same} name the same allocator" in str(result.exception) and not out.exists()

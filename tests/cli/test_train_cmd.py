"""`shell train --json` and `shell redistill --json`: what they print is valid JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from aios_rl.cli.main import app
from aios_rl.contracts.config import MAX_SEED, MIN_SEED
from aios_rl.contracts.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def strict_json(text: str) -> dict:
    """``json.loads`` that refuses NaN and Infinity, which are no JSON (jq and most parsers reject them)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_the_json_summary_of_a_distillation_only_run_is_valid_json(tmp_path: Path) -> None:
    make_task(tmp_path)
    config = tmp_path / "train.yaml"
    config.write_text("warm_start_epochs: 1\nworkers: 1\n")
    result = CliRunner().invoke(app, [
        "shell", "train", "--tasks", str(tmp_path / "tasks"), "--run", str(tmp_path / "run"), "--epochs", "1",
        "--no-rl", "--tasks-per-epoch", "1", "--group-size", "2", "--config", str(config), "--json",
    ])
    assert result.exit_code == 0, result.output
    summary = strict_json(result.stdout)
    [epoch] = summary["epochs_run"]
    assert epoch["phase"] == "distill"
    assert epoch["train/first_ratio_mean"] is None  # no surrogate step: unknown, as metrics.jsonl writes it


def test_the_json_of_a_redistillation_is_valid_json(tmp_path: Path, monkeypatch) -> None:
    from aios_rl.campaign import train as train_module
    from aios_rl.campaign.train import EpochReport

    class Finished:  # a run whose epochs are done; its redistillation ran no surrogate step
        config = train_module.ShellTrainConfig(redistill_passes=2)

        def redistilled(self) -> bool:
            return False

        def redistill(self, passes: int) -> EpochReport:
            return EpochReport(3, "ckpt-0004", {"phase": "redistill", "passes": passes,
                                                "train/first_ratio_mean": float("nan")})

        def close(self) -> None:
            pass

    monkeypatch.setattr(train_module, "open_training", lambda run: Finished())
    result = CliRunner().invoke(app, ["shell", "redistill", "--run", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout) == {"phase": "redistill", "passes": 2, "train/first_ratio_mean": None}


def test_a_second_shell_train_on_a_run_being_trained_fails_fast_and_touches_nothing(tmp_path: Path) -> None:
    """`shell train --run R` while another process trains R: exit code 2 with the clear message, and the
    other process's checkpoint save in flight and the run's log are left as they were."""
    import os
    import subprocess

    from aios_rl.campaign.train import ShellTrainConfig, ShellTraining
    from aios_rl.control.plane import ControlPlane

    make_task(tmp_path)
    run = tmp_path / "run"
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none")
    ShellTraining(run, tmp_path / "tasks", config).close()
    with ControlPlane(run, writer=False) as before:
        events = before.store.event_count()
    holder = ("import sys\nfrom aios_rl.control.plane import ControlPlane\n"
              "plane = ControlPlane(sys.argv[1])\n"
              "(plane.checkpoints.root / '.tmp-ckpt-0009-inflight').mkdir()\n"
              "print('ready', flush=True)\nsys.stdin.read()\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", holder, str(run)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        second = subprocess.run([sys.executable, "-m", "aios_rl.cli", "shell", "train", "--run", str(run),
                                 "--epochs", "2"], capture_output=True, text=True, timeout=120, env=env)
        assert second.returncode == 2, second.stderr
        assert f"is being written by another process (pid {proc.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        assert (run / "checkpoints" / ".tmp-ckpt-0009-inflight").is_dir()
    finally:
        proc.kill()
        proc.wait(60)
    with ControlPlane(run, writer=False) as after:
        assert after.store.event_count() == events


@pytest.mark.parametrize("flag, value", [("--seed", str(2**64)), ("--seed", str(-(2**63) - 1)),
                                         ("torch_threads", str(2**31))])
def test_a_seed_or_thread_count_torch_cannot_take_is_refused_before_the_run_exists(
    tmp_path: Path, flag: str, value: str
) -> None:
    """torch.manual_seed and torch.set_num_threads raised a bare ValueError ('Overflow when unpacking long
    long'), the thread count after the run directory had stored the setting that a corrected command then
    had to match."""
    make_task(tmp_path)
    args = ["shell", "train", "--tasks", str(tmp_path / "tasks"), "--run", str(tmp_path / "run"),
            "--epochs", "1"]
    if flag.startswith("--"):
        args += [flag, value]
    else:
        (tmp_path / "c.yaml").write_text(f"{flag}: {value}\n")
        args += ["--config", str(tmp_path / "c.yaml")]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert ("seed" if flag == "--seed" else "torch_threads") in str(result.exception)
    assert not (tmp_path / "run").exists()


def test_shell_eval_refuses_a_seed_torch_cannot_take(tmp_path: Path) -> None:
    """Checked with the other flags, before a run is opened or a task run (it raised a bare ValueError)."""
    result = CliRunner().invoke(app, ["shell", "eval", "--run", str(tmp_path), "--seed", str(2**64)])
    assert isinstance(result.exception, ConfigError), result.exception
    assert f"--seed must be between {MIN_SEED} and {MAX_SEED}, got {2**64}" in str(result.exception)


def test_a_run_stored_with_a_large_seed_that_torch_took_still_evaluates_and_resumes(tmp_path: Path) -> None:
    """Code before the seed bound ran seeds up to where ``seed * 7919 + epoch`` leaves torch's range, e.g. a
    microsecond timestamp; a bound of 2**32 - 1 refused such a stored run: `shell eval` in a pydantic
    ValidationError traceback, a resume as a different configuration."""
    from aios_rl.campaign.online_config import CampaignConfig
    from aios_rl.campaign.train import TRAIN_CONFIG_KEY, ShellTrainConfig
    from aios_rl.control.plane import ControlPlane

    make_task(tmp_path)
    seed = 1_718_000_000_000_000
    run = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "shell", "train", "--tasks", str(tmp_path / "tasks"), "--run", str(run), "--epochs", "1", "--no-rl",
        "--tasks-per-epoch", "1", "--group-size", "2", "--seed", str(seed), "--teacher", "none", "--json",
    ])
    assert result.exit_code == 0, result.output
    with ControlPlane(run, writer=False) as plane:
        assert plane.store.get_meta(TRAIN_CONFIG_KEY)["seed"] == seed
    result = CliRunner().invoke(app, ["shell", "eval", "--run", str(run), "--split", "train", "--json"])
    assert result.exit_code == 0, result.exception
    assert CampaignConfig(seed=seed).seed == ShellTrainConfig(seed=seed).seed == seed
    torch.Generator().manual_seed(MAX_SEED * 7919 + 2**19)  # the bounds are what torch takes, mixed
    torch.Generator().manual_seed(MIN_SEED * 7919)

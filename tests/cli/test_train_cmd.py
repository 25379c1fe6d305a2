"""`shell train --json` and `shell redistill --json`: what they print is valid JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from aios_rl.cli.main import app

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

"""The real CLI end to end on a tiny benchmark: generate, train, resume, eval (JSON shape)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def aios(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "aios_rl.cli", *args], capture_output=True, text=True,
                            timeout=900, env=os.environ.copy())
    if check and result.returncode != 0:
        raise AssertionError(f"aios-rl {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("train")
    tasks, run = root / "tasks", root / "run"
    aios("shell", "benchmark-generate", "--count", "6", "--seed", "3", "--out", str(tasks), "--json")
    aios("shell", "train", "--tasks", str(tasks), "--run", str(run), "--epochs", "1",
         "--tasks-per-epoch", "2", "--group-size", "2", "--seed", "1")
    return tasks, run


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_train_writes_checkpoints_lineage_and_metrics(trained: tuple[Path, Path]) -> None:
    _, run = trained
    records = metrics(run)
    assert [r["phase"] for r in records] == ["warm_start", "rl"]
    assert all(r["time/phase_s"] > 0 for r in records)
    rl = records[-1]
    assert rl["rollout/episodes"] == 4 and 0.0 <= rl["rollout/success_rate"] <= 1.0
    assert rl["train/first_ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    lineage = json.loads(aios("lineage", "show", "--run", str(run), "--json").stdout)
    ids = [c["id"] for c in lineage["checkpoints"]]
    assert ids == ["ckpt-0000", "ckpt-0001", "ckpt-0002"]
    assert lineage["active"] == "ckpt-0002" and lineage["pre_update_ref"] == "ckpt-0001"
    parents = {c["id"]: c["parent"] for c in lineage["checkpoints"]}
    assert parents == {"ckpt-0000": None, "ckpt-0001": "ckpt-0000", "ckpt-0002": "ckpt-0001"}
    by_id = {c["id"]: c for c in lineage["checkpoints"]}
    assert len(by_id["ckpt-0002"]["data_window"]) == 4 and by_id["ckpt-0002"]["teacher_backend"] == "oracle"
    training = json.loads(aios("status", "--run", str(run), "--json").stdout)["training"]
    assert (training["phases"], training["epochs"]) == ({"warm_start": 1, "rl": 1}, 1)
    assert training["last"]["checkpoint"] == "ckpt-0002" and training["minutes"] > 0


def test_eval_json_shape(trained: tuple[Path, Path]) -> None:
    tasks, run = trained
    out = json.loads(aios("shell", "eval", "--run", str(run), "--split", "holdout", "--json").stdout)
    assert set(out) >= {"success_rate", "episodes", "by_family", "checkpoint"}
    holdout = [d for d in tasks.iterdir() if d.is_dir() and json.loads((d / "manifest.json").read_text())["split"] == "holdout"]
    assert out["episodes"] == len(holdout) and out["checkpoint"] == "ckpt-0002"
    assert set(out["by_family"]) == {"failing_tests"} and 0.0 <= out["success_rate"] <= 1.0
    initial = json.loads(aios("shell", "eval", "--run", str(run), "--checkpoint", "initial", "--split", "train",
                              "--samples", "1", "--json").stdout)
    assert initial["checkpoint"] == "ckpt-0000"
    uniform = json.loads(aios("shell", "eval", "--run", str(run), "--policy", "uniform", "--json").stdout)
    assert uniform["checkpoint"] == "uniform"


def test_eval_samples_at_a_temperature(trained: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    tasks, run = trained
    manifests = [json.loads((d / "manifest.json").read_text()) for d in tasks.iterdir() if d.is_dir()]
    holdout = sum(m["split"] == "holdout" for m in manifests)
    out = json.loads(aios("shell", "eval", "--run", str(run), "--samples", "2", "--temperature", "1.0",
                          "--json").stdout)
    assert out["episodes"] == 2 * holdout
    bad = aios("shell", "eval", "--run", str(run), "--temperature", "-1", check=False)
    assert bad.returncode == 2 and "--temperature must be >= 0" in bad.stderr

    from aios_rl.campaign import shell_eval

    seen = []
    real = shell_eval.evaluate
    monkeypatch.setattr(shell_eval, "evaluate", lambda *a, **k: seen.append(k["regime"]) or real(*a, **k))
    shell_eval.run_shell_eval(run, split="holdout", temperature=0.7)
    shell_eval.run_shell_eval(run, split="holdout")
    assert [r.temperature for r in seen] == [0.7, shell_eval.GREEDY.temperature]


def test_train_resumes_a_finished_run_with_more_epochs(trained: tuple[Path, Path], tmp_path: Path) -> None:
    tasks, run = trained
    aios("shell", "train", "--tasks", str(tasks), "--run", str(run), "--epochs", "2",
         "--tasks-per-epoch", "2", "--group-size", "2", "--seed", "1")
    assert [r["phase"] for r in metrics(run)] == ["warm_start", "rl", "rl"]
    changed = aios("shell", "train", "--tasks", str(tasks), "--run", str(run), "--epochs", "2",
                   "--group-size", "3", "--seed", "1", check=False)
    assert changed.returncode == 2 and "different configuration" in changed.stderr
    # Without --tasks the run continues with the settings it stored; other settings are refused, not ignored.
    out = json.loads(aios("shell", "train", "--run", str(run), "--epochs", "3", "--json").stdout)
    assert [r["phase"] for r in metrics(run)] == ["warm_start", "rl", "rl", "rl"] and out["epochs"] == 3
    assert [r["epoch"] for r in out["epochs_run"]] == [3]
    again = json.loads(aios("shell", "train", "--run", str(run), "--json").stdout)  # the count asked for last
    assert again["epochs"] == 3 and again["epochs_run"] == []
    reseeded = aios("shell", "train", "--run", str(run), "--epochs", "4", "--seed", "2", check=False)
    said = " ".join(reseeded.stderr.replace("│", " ").split())  # the error box wraps its lines
    assert reseeded.returncode == 2 and "--seed: a run continued without --tasks keeps the settings" in said
    fresh = aios("shell", "train", "--run", str(tmp_path / "new"), check=False)
    assert fresh.returncode == 2 and "needs a task directory" in " ".join(fresh.stderr.replace("│", " ").split())
    assert not (tmp_path / "new").exists()
    assert len(metrics(run)) == 4


def test_eval_unknown_checkpoint_fails_clearly(trained: tuple[Path, Path]) -> None:
    _, run = trained
    result = aios("shell", "eval", "--run", str(run), "--checkpoint", "nope", check=False)
    assert result.returncode == 2 and "not found" in result.stderr


def test_train_with_a_validation_gate(trained: tuple[Path, Path], tmp_path: Path) -> None:
    tasks, _ = trained
    run = tmp_path / "gated"
    out = json.loads(aios("shell", "train", "--tasks", str(tasks), "--run", str(run), "--epochs", "1",
                          "--tasks-per-epoch", "2", "--group-size", "2", "--seed", "1", "--val-fraction", "0.5",
                          "--json").stdout)
    epoch = out["epochs_run"][0]
    assert epoch["val/decision"] in {"better", "same", "worse"}
    lineage = json.loads(aios("lineage", "show", "--run", str(run), "--json").stdout)
    assert lineage["active"] == epoch["val/active"] == out["active"]
    # worse: back to the warm start; better: promoted; same: kept, last_stable still the initial checkpoint
    expected = {"worse": ("ckpt-0001", "ckpt-0000"), "better": ("ckpt-0002", "ckpt-0002"),
                "same": ("ckpt-0002", "ckpt-0000")}[epoch["val/decision"]]
    assert (lineage["active"], lineage["last_stable"]) == expected
    assert (run / "rollbacks" / "epoch-1.json").exists() == (epoch["val/decision"] == "worse")
    both = aios("shell", "train", "--tasks", str(tasks), "--run", str(tmp_path / "x"), "--val-fraction", "0.5",
                "--val-tasks", str(tasks), check=False)
    assert both.returncode == 2 and "not both" in both.stderr
    bad = aios("shell", "train", "--tasks", str(tasks), "--run", str(tmp_path / "y"), "--val-fraction", "1.5",
               check=False)
    assert bad.returncode == 2 and "fraction" in bad.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()

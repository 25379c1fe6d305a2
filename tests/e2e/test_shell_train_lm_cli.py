"""The real CLI end to end with the causal-LM student: `shell train --student causal-lm`, then `shell eval`.

A tiny random Qwen2 is built offline; a YAML config keeps the run small (short episodes, few candidates,
a prompt limit the tiny model's byte-heavy tokenizer needs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aios_rl.campaign.students import StudentConfig, make_student
from aios_rl.contracts.errors import ConfigError
from aios_rl.policy.tiny_lm import build_tiny_lm
from aios_rl.storage.checkpoints import CheckpointStore

pytestmark = pytest.mark.slow

CONFIG = """\
workers: 1
warm_start_epochs: 1
env:
  max_steps: 2
  max_candidates: 4
  output_cap_chars: 400
  read_cap_chars: 400
  line_spectrum: false
student:
  causal_lm:
    max_prompt_tokens: 1536
trainer:
  minibatch_size: 16
  update_epochs: 1
"""


def run_aios(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ.copy() | {"OMP_NUM_THREADS": "1"}  # the tiny model runs fastest on one thread
    return subprocess.run([sys.executable, "-m", "aios_rl.cli", *args], capture_output=True, text=True,
                          timeout=540, env=env)  # generous: a hang guard, not a speed test


def aios(*args: str) -> str:
    result = run_aios(*args)
    if result.returncode != 0:
        command = " ".join(args)
        raise AssertionError(f"aios-rl {command} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout



@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(root, tasks, model): a four-task benchmark (two train, two holdout) and a tiny LM."""
    root = tmp_path_factory.mktemp("lm-train")
    build_tiny_lm(root / "tiny-lm")
    aios("shell", "benchmark-generate", "--count", "4", "--seed", "3", "--out", str(root / "tasks"), "--json")
    return root, root / "tasks", root / "tiny-lm"


def train(workspace: tuple[Path, Path, Path], name: str, config: str) -> tuple[Path, dict]:
    root, tasks, model = workspace
    (root / f"{name}.yaml").write_text(config)
    summary = json.loads(aios(
        "shell", "train", "--tasks", str(tasks), "--run", str(root / name),
        "--student", "causal-lm", "--model", str(model), "--config", str(root / f"{name}.yaml"),
        "--epochs", "1", "--tasks-per-epoch", "1", "--group-size", "2", "--json",
    ))
    return root / name, summary


@pytest.fixture(scope="module")
def trained(workspace: tuple[Path, Path, Path]) -> tuple[Path, Path, Path, dict]:
    run, summary = train(workspace, "run", CONFIG)
    return workspace[1], run, workspace[2], summary


def test_train_writes_a_causal_lm_checkpoint(trained: tuple[Path, Path, Path, dict]) -> None:
    _, run, model, summary = trained
    assert summary["active"] == "ckpt-0002" and len(summary["epochs_run"]) == 1
    rl = summary["epochs_run"][0]
    assert rl["rollout/episodes"] == 2 and rl["rollout/candidates_scored"] > 0
    assert rl["train/first_ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    phases = [json.loads(line)["phase"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert phases == ["warm_start", "rl"]

    store = CheckpointStore(run / "checkpoints")
    initial, _ = store.load("ckpt-0000")
    tensors, meta = store.load("ckpt-0002")
    assert meta["policy"]["kind"] == "causal-lm"
    lm = meta["policy"]["config"]
    assert lm["model_path"] == str(model) and lm["mode"] == "score" and lm["max_prompt_tokens"] == 1536
    weights = [k for k in tensors if k.startswith("policy/model.")]  # the full model: no LoRA asked for
    assert weights and "policy/value_head.weight" in tensors
    assert any(not torch.equal(tensors[k], initial[k]) for k in weights)  # warm start and update moved them


def test_eval_json_of_the_lm_checkpoint(trained: tuple[Path, Path, Path, dict]) -> None:
    tasks, run, _, _ = trained
    out = json.loads(aios("shell", "eval", "--run", str(run), "--json"))
    assert set(out) >= {"success_rate", "episodes", "by_family", "mean_reward", "checkpoint"}
    manifests = [json.loads((d / "manifest.json").read_text()) for d in tasks.iterdir() if d.is_dir()]
    holdout = [m for m in manifests if m["split"] == "holdout"]
    assert out["checkpoint"] == "ckpt-0002" and out["episodes"] == len(holdout) > 0
    assert set(out["by_family"]) == {"failing_tests"} and 0.0 <= out["success_rate"] <= 1.0


def test_eval_refuses_a_run_whose_model_directory_now_holds_another_model(
    workspace: tuple[Path, Path, Path],
) -> None:
    """A LoRA checkpoint holds adapters only: `shell eval` rebuilt the student on whatever was at its
    model_path, so another model there took them silently or failed on shapes. The checkpoint's fingerprint
    of its model's config and tokenizer files makes it one clear error and exit code 2."""
    root, tasks, model = workspace
    replaced = root / "tiny-lm-replaced"
    shutil.copytree(model, replaced)
    (root / "replaced.yaml").write_text(CONFIG.replace("student:\n", "student:\n  lora: true\n"))
    run = root / "run-replaced"
    summary = json.loads(aios(
        "shell", "train", "--tasks", str(tasks), "--run", str(run), "--student", "causal-lm",
        "--model", str(replaced), "--config", str(root / "replaced.yaml"), "--teacher", "none",
        "--epochs", "1", "--tasks-per-epoch", "1", "--group-size", "2", "--json",
    ))
    shutil.rmtree(replaced)
    build_tiny_lm(replaced, hidden_size=64)  # another model under the same name
    result = run_aios("shell", "eval", "--run", str(run), "--json")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"checkpoint {run}:{summary['active']} was trained on another model" in result.stderr
    assert f"now at {replaced}" in result.stderr and "config.json differs" in result.stderr


def test_lm_student_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="student.lm_mode"):
        StudentConfig(kind="causal-lm", causal_lm={"mode": "generate"})
    bad = StudentConfig(kind="causal-lm", model_path=str(tmp_path), causal_lm={"max_prompt_token": 10})
    with pytest.raises(ConfigError, match="student.causal_lm.max_prompt_token"):
        make_student(bad, seed=0)


def test_train_in_generate_mode(workspace: tuple[Path, Path, Path]) -> None:
    """Free-text answers are trained although they are not candidates; the warm start distils target text."""
    config = CONFIG.replace("  causal_lm:\n", "  lm_mode: generate\n  causal_lm:\n    max_new_tokens: 8\n")
    run, summary = train(workspace, "run-generate", config)
    rl = summary["epochs_run"][0]
    assert rl["rollout/tokens_generated"] > 0 and rl["rollout/trained_episodes"] == 2
    assert rl["train/first_ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    warm = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert warm["phase"] == "warm_start" and warm["demonstrations"] > 0 and warm["train/distill_loss"] > 0
    _, meta = CheckpointStore(run / "checkpoints").load(summary["active"])
    assert meta["policy"]["kind"] == "causal-lm" and meta["policy"]["config"]["mode"] == "generate"

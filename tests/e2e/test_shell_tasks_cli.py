"""The real `aios-rl shell` CLI: benchmark-generate, check-tasks and import-tasks on a tiny task set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aios_rl.envs.shell.mutate import apply_unified_diff
from aios_rl.envs.shell.task import read_manifest

AIOS = [sys.executable, "-m", "aios_rl.cli"]
COUNT = 4


def aios(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AIOS, *args], capture_output=True, text=True, timeout=400, env=os.environ.copy())


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("cli") / "tasks"
    args = ["--count", str(COUNT), "--seed", "5", "--out", str(out), "--json"]
    return out, aios("shell", "benchmark-generate", *args)


def test_benchmark_generate_json(generated) -> None:
    out, result = generated
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"generated", "train", "holdout", "out"}
    assert data["generated"] == COUNT == data["train"] + data["holdout"] and data["out"] == str(out)
    assert data["holdout"] >= 2  # the two holdout repos come first in the deal
    assert len([p for p in out.iterdir() if p.is_dir()]) == COUNT and (out / "benchmark.json").is_file()


def test_benchmark_generate_refuses_a_non_empty_out(generated) -> None:
    out, _ = generated
    result = aios("shell", "benchmark-generate", "--count", "1", "--out", str(out))
    assert result.returncode == 2 and "is not empty" in result.stderr and "--force" in result.stderr


def test_check_tasks_json_all_valid(generated) -> None:
    out, _ = generated
    result = aios("shell", "check-tasks", str(out), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == {"checked": COUNT, "valid": COUNT, "invalid": []}


def test_import_reports_a_fixed_task_and_exits_1(generated, tmp_path: Path) -> None:
    out, _ = generated
    broken = sorted(p for p in out.iterdir() if p.is_dir())[0]
    apply_unified_diff(broken / "repo", read_manifest(broken).reference_patch or "")  # tests now pass
    dest = tmp_path / "imported"
    result = aios("shell", "import-tasks", str(out), "--out", str(dest))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert f"rejected {broken.name}: tests already pass as given; a task must fail before its fix" in lines
    assert lines[-1] == f"imported {COUNT - 1} task(s) into {dest}, rejected 1"
    valid = sorted(p.name for p in out.iterdir() if p.is_dir() and p != broken)
    assert sorted(p.name for p in dest.iterdir()) == valid

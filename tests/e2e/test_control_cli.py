"""The real `aios-rl` CLI on the control-plane demo: lineage show/rollback/unfreeze and the demo's moves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

AIOS = [sys.executable, "-m", "aios_rl.cli"]


def aios(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*AIOS, *args], capture_output=True, text=True, timeout=300, env=os.environ.copy())
    if check and result.returncode != 0:
        raise AssertionError(f"aios-rl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run = tmp_path_factory.mktemp("demo") / "run"
    out = aios("demo", "control", "--run", str(run)).stdout
    return run, out


def test_demo_walks_promotion_rollback_and_freeze(demo_run: tuple[Path, str]) -> None:
    _, out = demo_run
    assert "epoch closed: promote -> active=ckpt-0001 pre_update_ref=None last_stable=ckpt-0001" in out
    assert "epoch closed: rollback -> active=ckpt-0001" in out
    assert out.count("epoch closed: rollback") == 4
    assert "FROZEN" in out and "update refused while frozen" in out
    assert "pointers verify: yes" in out


def test_lineage_show_json(demo_run: tuple[Path, str]) -> None:
    run, _ = demo_run
    data = json.loads(aios("lineage", "show", "--run", str(run), "--json").stdout)
    assert data["active"] == "ckpt-0001" and data["last_stable"] == "ckpt-0001"
    assert data["pre_update_ref"] is None and data["frozen"] is True
    by_id = {c["id"]: c for c in data["checkpoints"]}
    assert set(by_id) == {f"ckpt-{i:04d}" for i in range(6)}
    assert by_id["ckpt-0001"]["verdict"] == "promoted" and by_id["ckpt-0001"]["parent"] == "ckpt-0000"
    assert all(by_id[f"ckpt-{i:04d}"]["verdict"] == "rolled_back" for i in range(2, 6))
    assert all(len(c["sha256"]) == 64 and c["created_at"] for c in data["checkpoints"])


def test_lineage_show_text_is_a_tree(demo_run: tuple[Path, str]) -> None:
    run, _ = demo_run
    lines = aios("lineage", "show", "--run", str(run)).stdout.splitlines()
    assert lines[0].startswith("frozen: yes")
    assert lines[1].startswith("ckpt-0000 ")
    assert lines[2].startswith("  ckpt-0001 ") and "<- active, last_stable" in lines[2]
    assert lines[3].startswith("    ckpt-0002 ")


def test_unfreeze_then_manual_rollback(tmp_path: Path) -> None:
    run = tmp_path / "run"
    aios("demo", "control", "--run", str(run))
    refused = aios("lineage", "rollback", "--run", str(run), "--reason", "x", check=False)
    assert refused.returncode == 2 and "nothing to roll back to" in refused.stderr
    out = aios("lineage", "unfreeze", "--run", str(run)).stdout
    assert "unfrozen" in out
    data = json.loads(aios("lineage", "show", "--run", str(run), "--json").stdout)
    assert data["frozen"] is False
    again = aios("lineage", "unfreeze", "--run", str(run), check=False)
    assert again.returncode == 2 and "not frozen" in again.stderr


def test_commands_on_a_missing_run_fail_clearly(tmp_path: Path) -> None:
    result = aios("lineage", "show", "--run", str(tmp_path / "nope"), check=False)
    assert result.returncode == 2
    assert "not a run directory" in result.stderr
    assert not (tmp_path / "nope").exists()


def test_demo_refuses_an_existing_run(demo_run: tuple[Path, str]) -> None:
    run, _ = demo_run
    result = aios("demo", "control", "--run", str(run), check=False)
    assert result.returncode == 2 and "already holds a run" in result.stderr

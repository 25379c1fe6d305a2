"""The real `aios-rl status` CLI on the control demo's run directory (promotion, 4 rollbacks, freeze)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

AIOS = [sys.executable, "-m", "aios_rl.cli"]


def aios(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*AIOS, *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"aios-rl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("status") / "run"
    aios("demo", "control", "--run", str(run))
    return run


def test_status_json_after_the_control_demo(demo_run: Path) -> None:
    r = json.loads(aios("status", "--run", str(demo_run), "--json", "--window", "5", "--recent", "3").stdout)
    # The demo ends with epoch 6's batch sealed and its update refused because the lineage froze.
    assert (r["phase"], r["epoch"], r["streak"]) == ("update", 6, 0)
    assert r["pointers"] == {"active": "ckpt-0001", "pre_update_ref": None, "last_stable": "ckpt-0001"}
    assert (r["updates"], r["promotions"], r["rollbacks"]) == (5, 1, 4)
    assert (r["frozen"], r["consecutive_rollbacks"], r["checkpoints"]) == (True, 4, 6)
    # 17 scripted comparisons: 2 better, 3 same, 12 worse (the rollback triggers stay negative).
    assert r["lanes"] == {"positive": 2, "neutral": 3, "negative": 12, "diagnostic_only": 0}
    assert (r["episodes_recorded"], r["comparisons_recorded"], r["alarms"]) == (24, 17, 0)
    assert r["last_close"] == {
        "epoch": 5, "close_reason": "rollback", "better": 0, "same": 0, "worse": 3, "failed": 0
    }
    assert [(c["epoch"], c["relative_outcome"]) for c in r["recent_comparisons"]] == [(5, "worse")] * 3
    assert r["success_rates"] == {"demo": {"5": {"episodes": 5, "successes": 5, "rate": 1.0}}}
    assert r["last_event_at"]
    assert r["training"] is None  # no `shell train` phases in a control demo


def test_status_human_block(demo_run: Path) -> None:
    lines = aios("status", "--run", str(demo_run)).stdout.splitlines()
    assert lines[1].startswith("epoch 6  phase update  streak 0/3")
    assert lines[2] == "pointers  active=ckpt-0001  pre_update_ref=-  last_stable=ckpt-0001"
    assert lines[3] == (
        "lineage   FROZEN  consecutive rollbacks 4  checkpoints 6  updates 5  promotions 1  rollbacks 4"
    )
    assert lines[4] == "lanes     positive 2  neutral 3  negative 12  diagnostic_only 0"
    assert "last closed epoch 5: rollback" in lines[6]
    assert lines[5].startswith("episodes  24 recorded  17 compared  alarms 0")
    assert lines[-2].split() == ["success", "rate", "last", "20", "last", "100"]
    assert lines[-1].split() == ["demo", "100.0%", "of", "20", "100.0%", "of", "41"]


def test_status_on_a_missing_or_non_run_directory_fails_clearly(tmp_path: Path) -> None:
    missing = aios("status", "--run", str(tmp_path / "nope"), check=False)
    assert missing.returncode == 2 and "not a run directory" in missing.stderr
    assert "Traceback" not in missing.stderr and not (tmp_path / "nope").exists()
    (tmp_path / "plain").mkdir()
    plain = aios("status", "--run", str(tmp_path / "plain"), "--json", check=False)
    assert plain.returncode == 2 and "not a run directory" in plain.stderr
    assert not (tmp_path / "plain" / "control.db").exists()


def test_human_block_without_epochs_shows_alarms_and_failed_comparisons(tmp_path: Path) -> None:
    """In process: the branches the demo never reaches (no epoch yet, an alarm, a failed comparison)."""
    import torch

    from aios_rl.cli.status_cmd import status_lines
    from aios_rl.control.plane import ControlPlane
    from aios_rl.control.status import status_report

    with ControlPlane(tmp_path / "run") as plane:
        plane.save_checkpoint("c0", {"w": torch.zeros(1)}, {})
        plane.initialize("c0")
        plane.raise_alarm("teacher_disagreement", {"rate": 0.4})
        r = status_report(plane)
    lines = status_lines(r)
    assert lines[1] == "epoch 0  phase none (no epoch opened)  streak 0/3"
    assert lines[2] == "pointers  active=c0  pre_update_ref=-  last_stable=c0"
    assert lines[5].startswith("episodes  0 recorded  0 compared  alarms 1 (last: teacher_disagreement at ")
    assert not any(line.startswith(("recent", "success", "last closed")) for line in lines)

    recent = {"episode_id": "e1", "environment": "shell", "epoch": 1, "status": "comparison_failed",
              "relative_outcome": None, "at": "x"}
    lines = status_lines({**r, "recent_comparisons": [recent]})
    assert lines[-2:] == ["recent comparisons", "  epoch 1    e1  shell  comparison_failed"]


def test_human_block_of_a_shell_train_run_has_its_training_line(tmp_path: Path) -> None:
    from aios_rl.cli.status_cmd import status_lines

    head = {"run": "r", "events": 1, "last_event_at": None, "epoch": 0, "phase": None, "streak": 0,
            "rollback_threshold": 3, "window_results": {}, "frozen": False, "consecutive_rollbacks": 0,
            "pointers": {"active": "c2", "pre_update_ref": "c1", "last_stable": "c0"}, "checkpoints": 3,
            "updates": 2, "promotions": 0, "rollbacks": 0, "lanes": {}, "episodes_recorded": 8,
            "comparisons_recorded": 0, "alarms": 0, "last_alarm": None, "last_close": None,
            "recent_comparisons": [], "success_rates": {}}
    last = {"epoch": 1, "phase": "rl", "checkpoint": "c2", "rollout/success_rate": 0.375, "train/loss": 0.9,
            "val/decision": "same", "time/phase_s": 61.2}
    training = {"phases": {"warm_start": 1, "rl": 1}, "epochs": 1, "last": last, "minutes": 3.5}
    assert status_lines(head | {"training": training})[-1] == (
        "training  1 epoch, warm start x1; last: epoch 1 (rl) -> c2, rollout success 37.5%, validation same, "
        "61 s; 3.5 min in all")
    warm = {k: None for k in last} | {"epoch": 0, "phase": "warm_start", "checkpoint": "c1"}
    lines = status_lines(head | {"training": {"phases": {"warm_start": 1}, "epochs": 0, "last": warm,
                                              "minutes": None}})
    assert lines[-1] == "training  0 epochs, warm start x1; last: warm start -> c1"
    assert status_lines(head | {"training": None})[-1].startswith("episodes  8 recorded")

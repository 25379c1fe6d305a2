"""`aios-rl shell campaign` end to end on a tiny benchmark with the compact student: a normal campaign
updates and promotes, the bad-update drill is caught by matched comparison and rolled back, and a campaign
killed with SIGKILL at random moments resumes to completion with every invariant holding."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from aios_rl.campaign.invariants import campaign_problems
from aios_rl.control.plane import ControlPlane
from aios_rl.envs.shell.generator import GeneratorConfig, generate_benchmark

pytestmark = pytest.mark.slow

# Small and fast, and a student that learns visibly from one micro-batch of a 4-task stream: a 4096-bucket
# compact student with its n-gram text scorer on (it memorises the tasks it serves, which is what an online
# campaign on repeated tasks rewards), 3-step episodes, four passes per update at a higher learning rate.
BASE: dict[str, Any] = {
    "env": {"max_steps": 3},
    "student": {"compact": {"buckets": 4096, "text_scorer": True}},
    "trainer": {"update_epochs": 4, "lr": 0.003},
}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "aios_rl.cli", "shell", "campaign", *args]


def campaign(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cli(*args), capture_output=True, text=True, timeout=600, env=os.environ.copy())
    if check and result.returncode != 0:
        raise AssertionError(
            f"campaign {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
        )
    return result


def config_file(path: Path, **changes: Any) -> Path:
    data = json.loads(json.dumps(BASE))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("campaign") / "tasks"
    summary = generate_benchmark(out, GeneratorConfig(count=6, seed=0))
    assert summary.train >= 3
    return out


def test_normal_campaign_updates_and_promotes(tasks: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    # No warm start: the first update (distillation toward the oracle's fixes on the batch's states) is a
    # clear improvement over the untrained student, which matched comparison must see as `better`.
    cfg = config_file(tmp_path / "c.yaml", warm_start_epochs=0)
    out = campaign(
        "--run", str(run), "--tasks", str(tasks), "--max-tasks", "9", "--config", str(cfg), "--json"
    )
    summary = json.loads(out.stdout)
    assert summary["status"] == "completed" and summary["tasks_run"] == 9
    assert summary["updates"] >= 2 and summary["promotions"] >= 1 and summary["rollbacks"] == 0
    assert summary["comparisons"]["better"] > summary["comparisons"]["worse"]
    assert summary["admitted"] + summary["rejected"] == 9 and summary["lanes"]["positive"] >= 1
    with ControlPlane(run, writer=False) as plane:
        lineage = plane.state.lineage
        assert (
            lineage.last_stable != "ckpt-0000"
            and lineage.checkpoints[lineage.last_stable].verdict == "promoted"
        )
        # The promoted epoch's post-update episodes were the next sealed batch.
        second = lineage.checkpoints[lineage.active] if lineage.active != lineage.last_stable else None
        if second is not None:
            assert second.parent == lineage.last_stable and len(second.data_window) >= 4
    assert campaign_problems(run) == []
    updates = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [u["update"] for u in updates] == list(range(1, summary["updates"] + 1))
    again = campaign("--run", str(run), "--tasks", str(tasks), "--config", str(cfg), check=False)
    assert again.returncode == 2 and "--resume" in again.stderr


@pytest.fixture(scope="module")
def drill_run(tasks: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("drill")
    run = root / "run"
    # A strong oracle warm start: the pre-update reference fixes the tasks, so the drilled update's failures
    # show up as `worse` in matched comparison.
    cfg = config_file(root / "c.yaml", warm_start_epochs=3)
    args = ["--run", str(run), "--tasks", str(tasks), "--max-tasks", "7", "--config", str(cfg)]
    out = campaign(*args, "--drill", "bad-update", "--json")
    return run, json.loads(out.stdout)


def test_bad_update_drill_is_detected_and_rolled_back(drill_run: tuple[Path, dict[str, Any]]) -> None:
    run, summary = drill_run
    assert summary["updates"] == 1 and summary["rollbacks"] == 1 and summary["promotions"] == 0
    assert summary["pointers"] == {"active": "ckpt-0000", "pre_update_ref": None, "last_stable": "ckpt-0000"}
    diagnosis = json.loads((run / "rollbacks" / "1.json").read_text())
    triggers = diagnosis["trigger_episodes"]
    assert len(triggers) == 3 and diagnosis["drill"] == "bad-update"
    assert [c["relative_outcome"] for c in diagnosis["trigger_comparisons"]] == ["worse"] * 3
    pairs = {(c["candidate_checkpoint"], c["reference_checkpoint"]) for c in diagnosis["trigger_comparisons"]}
    assert pairs == {("ckpt-0001", "ckpt-0000")}
    assert diagnosis["pointers_before"]["active"] == "ckpt-0001"
    assert diagnosis["pointers_after"]["active"] == "ckpt-0000"
    with ControlPlane(run, writer=False) as plane:
        negative = {e.episode_id for e in plane.state.replay.query(lane="negative")}
        assert set(triggers) <= negative and summary["lanes"]["negative"] >= 3
        assert plane.state.lineage.checkpoints["ckpt-0001"].verdict == "rolled_back"
        assert plane.state.ledger.history[-1].close_reason == "rollback"
    assert campaign_problems(run) == []


def test_invariant_checker_catches_lost_doubled_and_undiagnosed(
    drill_run: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """The crash checks below would be vacuous if the checker could not fail: corrupt copies of a run."""

    def corrupted(name: str, sql: str) -> Path:
        copy = tmp_path / name
        shutil.copytree(drill_run[0], copy)
        with sqlite3.connect(copy / "control.db") as conn:
            conn.executescript(sql)
        return copy

    lost = corrupted("lost", "DELETE FROM episodes WHERE rowid = (SELECT MIN(rowid) FROM episodes);")
    assert any("missing" in p for p in campaign_problems(lost))
    doubled = corrupted(
        "doubled",
        "INSERT INTO events (event_id, kind, payload, created_at) SELECT 'again', kind, payload, created_at "
        "FROM events WHERE kind = 'episode.recorded' LIMIT 1; DELETE FROM snapshots;",
    )
    assert any("counted by more than one event" in p for p in campaign_problems(doubled))
    undiagnosed = corrupted("undiagnosed", "SELECT 1;")
    (undiagnosed / "rollbacks" / "1.json").unlink()
    assert any("no diagnosis file" in p for p in campaign_problems(undiagnosed))


def committed_events(run: Path) -> int:
    try:
        with sqlite3.connect(f"file:{run / 'control.db'}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    except sqlite3.Error:
        return 0


def kill_after_progress(args: list[str], run: Path, rng: random.Random) -> int:
    """Start the CLI; once it committed a new event, wait a random moment and SIGKILL it (return its code)."""
    before = committed_events(run)
    proc = subprocess.Popen(cli(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while proc.poll() is None and committed_events(run) <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 1.5))
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    return proc.wait()


def test_kill_9_at_random_moments_and_resume(tasks: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = config_file(
        tmp_path / "c.yaml",
        warm_start_epochs=0,
        env__max_steps=2,
        control__ledger__batch_size=2,
        control__ledger__monitor_window=2,
    )
    args = ["--run", str(run), "--tasks", str(tasks), "--config", str(cfg), "--max-tasks", "6"]
    # The crash-after-update drill kills the process right after the first update's pointer move.
    first = campaign(*args, "--drill", "crash-after-update", check=False)
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    with ControlPlane(run, writer=False) as plane:
        assert plane.state.lineage.updates == 1 and plane.state.lineage.active == "ckpt-0001"
        assert (
            plane.state.ledger.open_epoch.phase == "monitoring" and not plane.state.ledger.open_epoch.results
        )
    assert campaign_problems(run) == []
    rng = random.Random(20261206)
    kills, max_tasks = 0, 6
    while kills < 10:
        code = kill_after_progress(["--run", str(run), "--max-tasks", str(max_tasks), "--resume"], run, rng)
        assert code in (0, -signal.SIGKILL)
        kills += code == -signal.SIGKILL
        if code == 0:  # finished between two kills: a resume may extend the campaign
            max_tasks += 2
        assert campaign_problems(run) == [], f"after kill {kills}"
    final = json.loads(
        campaign("--run", str(run), "--max-tasks", str(max_tasks), "--resume", "--json").stdout
    )
    assert final["tasks_run"] == max_tasks and final["updates"] >= 1
    assert final["admitted"] + final["rejected"] == max_tasks
    assert campaign_problems(run) == []

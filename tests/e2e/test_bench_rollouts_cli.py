"""The real CLI on tiny hand-made tasks: `bench rollouts` (JSON, result files, PNG) and
`shell train --allocator` with RAIL traces in the run store and the allocator state kept across a resume.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from aios_rl.control.plane import ControlPlane
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.task import ShellTaskManifest, write_task
from aios_rl.storage.rail_traces import RailTraceStore

pytestmark = pytest.mark.slow

CALC = "def add(a, b):\n    return a - b\n\n\ndef triple(x):\n    return x * 3\n"
TESTS = (
    "from calc import add, triple\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_triple():\n    assert triple(2) == 6\n"
)
# RAIL with a base group of 2 that branches at almost every step once it has seen one entropy.
RAIL = "allocation:\n  rail_base_group: 2\n  rail:\n    entropy_warmup: 1\n    heuristic_quantile: 0.05\n"


def aios(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "aios_rl.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"aios-rl {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
        )
    return result


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three one-bug tasks (two train, one holdout): no generator run, so the test stays fast."""
    root = tmp_path_factory.mktemp("bench")
    for i, split in enumerate(["train", "train", "holdout"]):
        src = root / f"src{i}"
        (src / "tests").mkdir(parents=True)
        buggy = CALC.replace("x * 3", f"x * {3 + i}") if i else CALC
        fixed = buggy.replace("a - b", "a + b")
        (src / "calc.py").write_text(buggy)
        (src / "tests" / "test_calc.py").write_text(TESTS.replace("== 6", f"== {2 * (3 + i)}"))
        manifest = ShellTaskManifest(
            task_id=f"calc-{i}",
            split=split,
            prompt="Make the tests pass.",
            test_command=["python", "-m", "pytest", "-q", "tests"],
            reference_patch=unified_diff(buggy, fixed, "calc.py"),
        )
        write_task(root / "tasks", manifest, src)
    (root / "bench.yaml").write_text("train:\n" + "".join(f"  {line}\n" for line in RAIL.splitlines()))
    (root / "train.yaml").write_text(RAIL + "env:\n  max_steps: 3\n")
    return root


def test_bench_rollouts_json_png_and_budgets(tasks: Path) -> None:
    out = tasks / "out"
    printed = aios(
        "bench",
        "rollouts",
        "--tasks",
        str(tasks / "tasks"),
        "--methods",
        "uniform-2,rail-3",
        "--budget",
        "4",
        "--seeds",
        "1",
        "--tasks-per-round",
        "1",
        "--eval-points",
        "2",
        "--eval-tasks",
        "1",
        "--max-steps",
        "2",
        "--warm-start-epochs",
        "0",
        "--config",
        str(tasks / "bench.yaml"),
        "--out",
        str(out),
        "--json",
    ).stdout
    rows = json.loads(printed)
    assert [r["method"] for r in rows] == ["uniform-2", "rail-3"]
    for row in rows:
        assert {
            "method",
            "success_mean",
            "success_std",
            "rollouts",
            "env_steps",
            "rollouts_to_match_uniform16",
        } <= set(row)
        assert 0.0 <= row["success_mean"] <= 1.0 and row["rollouts_to_match_uniform16"] is None
        assert len(row["curve"]) == 3 and row["curve"][0][0] == 0  # start + 2 milestones
        assert 0 < row["env_steps"] <= 2 * row["rollouts"]  # at most max_steps own steps per rollout
    uniform, rail = rows
    assert uniform["rollouts"] == 4 and rail["rollouts"] <= 4
    db = out / "seed-0" / "rail-3" / "control.db"
    with sqlite3.connect(db) as con:
        traces = con.execute("SELECT COUNT(*) FROM rail_traces").fetchone()[0]
        state = json.loads(con.execute("SELECT value FROM meta WHERE key = 'rollout_state'").fetchone()[0])
    assert traces == rail["rail"]["rail/traces"] and state["ledger"]["rollouts"] == rail["rollouts"]
    for method in ("uniform-2", "rail-3"):  # both started from the seed's one initial checkpoint
        plane = ControlPlane(out / "seed-0" / method, writer=False)
        try:
            _, meta = plane.load_checkpoint("ckpt-0000")
        finally:
            plane.close()
        assert meta["init_from"] == f"{out / 'seed-0' / 'initial'}:ckpt-0000"
    png = (out / "rollouts.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    saved = json.loads((out / "results.json").read_text())
    assert [s["method"] for s in saved] == ["uniform-2", "rail-3"] and len(saved[1]["seeds"]) == 1
    again = aios("bench", "rollouts", "--tasks", str(tasks / "tasks"), "--out", str(out), check=False)
    assert again.returncode == 2 and "not empty" in again.stderr

    # Seed 2 in a second run (another process, on a bigger machine), then one table over both seeds.
    other = tasks / "out-seed2"
    aios("bench", "rollouts", "--tasks", str(tasks / "tasks"), "--methods", "uniform-2,rail-3", "--budget", "4",
         "--seed-list", "2", "--tasks-per-round", "1", "--eval-points", "2", "--eval-tasks", "1",
         "--max-steps", "2", "--warm-start-epochs", "0", "--config", str(tasks / "bench.yaml"), "--out", str(other))
    assert (other / "seed-2" / "initial" / "control.db").is_file() and not (other / "seed-0").exists()
    merged = json.loads(aios("bench", "merge-rollouts", str(out), str(other), "--out", str(tasks / "merged"),
                             "--json").stdout)
    assert [r["method"] for r in merged] == ["uniform-2", "rail-3"]
    saved = json.loads((tasks / "merged" / "results.json").read_text())
    assert [s["seed"] for s in saved[0]["seeds"]] == [0, 2]
    assert json.loads((tasks / "merged" / "bench_config.json").read_text())["seed_list"] == [0, 2]
    single = {r["method"]: r for r in rows}
    seed2 = json.loads((other / "results.json").read_text())
    for row in merged:
        finals = [single[row["method"]]["success_mean"],
                  next(r for r in seed2 if r["method"] == row["method"])["success_mean"]]
        assert row["success_mean"] == pytest.approx(sum(finals) / 2)
    for seed_list in ("0,x", ","):
        bad = aios("bench", "rollouts", "--tasks", str(tasks / "tasks"), "--seed-list", seed_list,
                   check=False)
        assert bad.returncode == 2 and "comma-separated integers" in bad.stderr
    twice = aios("bench", "merge-rollouts", str(out), str(out), "--out", str(tasks / "m2"), check=False)
    assert twice.returncode == 2 and "repeat" in twice.stderr


def test_shell_train_allocator_traces_and_resume(tasks: Path) -> None:
    run = tasks / "run"
    common = [
        "shell",
        "train",
        "--tasks",
        str(tasks / "tasks"),
        "--run",
        str(run),
        "--allocator",
        "rail-4",
        "--tasks-per-epoch",
        "2",
        "--teacher",
        "none",
        "--config",
        str(tasks / "train.yaml"),
        "--json",
    ]
    aios(*common, "--epochs", "1")
    with sqlite3.connect(run / "control.db") as con:
        first = json.loads(con.execute("SELECT value FROM meta WHERE key = 'rollout_state'").fetchone()[0])
    # A second epoch killed before its commit would have left its traces behind: the resume drops them.
    with RailTraceStore(run / "control.db") as store:
        assert first["trace_mark"] == store.last_id() == store.count() > 0
        store.append(store.all()[-1])
    summary = json.loads(aios(*common, "--epochs", "2").stdout)
    (epoch2,) = summary["epochs_run"]
    with sqlite3.connect(run / "control.db") as con:
        state = json.loads(con.execute("SELECT value FROM meta WHERE key = 'rollout_state'").fetchone()[0])
        traces = con.execute("SELECT COUNT(*) FROM rail_traces").fetchone()[0]
        branched = sum(
            '"branch_of": {' in body or '"branch_of":{' in body
            for (body,) in con.execute("SELECT body FROM episodes")
        )
    assert first["epoch"] == 1 and state["epoch"] == 2
    controller = state["allocator"]["controller"]
    # The resumed run kept the first epoch's controller: its trace count and ledger carried over.
    assert (
        controller["n_traces"]
        == traces
        == epoch2["rail/traces"]
        >= first["allocator"]["controller"]["n_traces"]
    )
    assert state["ledger"]["rollouts"] == first["ledger"]["rollouts"] + epoch2["rollout/rollouts"]
    assert epoch2["rollout/total_branches"] == branched == state["ledger"]["branches"] > 0
    assert epoch2["rollout/total_rollouts"] <= 2 * 2 * 4  # two epochs of two rail-4 groups at most
    bad = aios(
        "shell",
        "train",
        "--tasks",
        str(tasks / "tasks"),
        "--run",
        str(tasks / "run2"),
        "--allocator",
        "rial",
        check=False,
    )
    assert bad.returncode == 2 and "did you mean 'rail'" in bad.stderr

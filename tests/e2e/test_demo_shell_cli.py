"""`aios-rl demo shell` end to end: the main job on a tiny benchmark prints the before/after table.

Its own module so the test runner's workers can run it beside the train/eval module (both take minutes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_shell_train_cli import aios

pytestmark = pytest.mark.slow


def test_demo_shell_runs_the_main_job_and_prints_the_table(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    printed = aios("demo", "shell", "--out", str(out), "--count", "6", "--epochs", "1",
                   "--tasks-per-epoch", "1").stdout
    rows = [line for line in printed.splitlines() if line.startswith(("uniform-random", "untrained", "trained"))]
    assert [r.split()[0] for r in rows] == ["uniform-random", "untrained", "trained"]
    assert "trained student (ckpt-0002)" in printed
    header = next(line for line in printed.splitlines() if line.startswith("policy"))
    assert "holdout success" in header
    for row in rows:
        assert all(0.0 <= float(cell) <= 1.0 for cell in row.split(")")[-1].split()[-2:])
    lineage = json.loads(aios("lineage", "show", "--run", str(out / "run"), "--json").stdout)
    assert lineage["active"] == "ckpt-0002"
    refused = aios("demo", "shell", "--out", str(out), check=False)
    assert refused.returncode == 2 and "not empty" in refused.stderr

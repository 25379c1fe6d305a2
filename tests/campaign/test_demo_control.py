from __future__ import annotations

from pathlib import Path

import pytest

from aios_rl.campaign.demo_control import run_control_demo
from aios_rl.control.plane import ControlPlane


def test_a_demo_failing_part_way_frees_the_runs_writer_lock(tmp_path: Path) -> None:
    # The demo returns its open plane; a failure part-way (here the report callback) left that plane open,
    # its writer lock held for as long as the traceback kept the plane alive.
    lines: list[str] = []

    def report(line: str) -> None:
        lines.append(line)
        if len(lines) == 3:
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted") as excinfo:
        run_control_demo(tmp_path / "run", report)
    assert excinfo.traceback  # the traceback, and the frames it holds, are still alive here
    ControlPlane(tmp_path / "run").close()  # a writer can open the run: the lock was released


def test_the_demo_returns_its_plane_open(tmp_path: Path) -> None:
    plane = run_control_demo(tmp_path / "run", lambda _: None)
    try:
        assert plane.state.lineage.frozen
    finally:
        plane.close()

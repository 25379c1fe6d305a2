"""The crash/resume benchmark's summary, its refusal of settings that kill nothing, and its clean-up."""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from aios_rl.campaign import invariants
from aios_rl.envs.shell import generator


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("crash_resume")


def test_a_run_whose_kills_resumed_nothing_still_prints_its_summary(bench) -> None:
    # --trials 1: the only child starts the campaign fresh, so no resume time was measured.
    lines = bench.report_lines(1, 1, 17.0, [], [], [], [2], {"collection": 1})
    assert "invariant violations 0" in lines[2]
    assert "(n=0)" in lines[3]
    assert json.loads(lines[-1]) == {"trials": 1, "violations": 0, "mean_resume_s": None,
                                     "rerun_episodes_per_kill": 2}


def test_resume_times_average_the_resumed_children(bench) -> None:
    lines = bench.report_lines(2, 1, 30.0, ["run-01 after kill 2: x"], [3.0, 4.0], [0.05, 0.07], [1, 2], {})
    assert "3.50 wall from process start, 0.060 reopening the store (n=2)" in lines[3]
    assert "  VIOLATION run-01 after kill 2: x" in lines
    assert json.loads(lines[-1])["mean_resume_s"] == pytest.approx(3.5)


@pytest.mark.parametrize("flag", ["--trials=0", "--max-delay=-1"])
def test_a_setting_that_kills_nothing_is_a_usage_error(bench, usage_error, flag: str) -> None:
    err = usage_error(bench, ["crash_resume.py", flag])
    assert flag.split("=")[0] in err


def _stub(bench, monkeypatch, root: Path, exit_code: int) -> None:
    """Children that write into their run directory and end with ``exit_code``; a task generator that
    writes nothing else; invariants that hold."""

    class Child:
        def __init__(self, run: Path, tasks: Path, config: Path) -> None:
            run.mkdir(parents=True, exist_ok=True)
            (run / "control.db").write_text("")
            self.lines = [["ready", "0", "0.5", "0.01"]]
            self.ready = threading.Event()
            self.ready.set()
            self.proc = SimpleNamespace(poll=lambda: exit_code, wait=lambda: exit_code, pid=-1)

        def rerun_episodes(self) -> int:
            return 1

    def mkdtemp(prefix: str) -> str:
        root.mkdir()
        return str(root)

    monkeypatch.setattr(bench, "Child", Child)
    monkeypatch.setattr(bench, "phase_of", lambda run: "collection")
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(generator, "generate_benchmark", lambda path, config: path.mkdir(parents=True))
    monkeypatch.setattr(invariants, "campaign_problems", lambda run: [])


def test_the_runs_and_tasks_are_removed_when_the_benchmark_ends_or_fails(
    bench, tmp_path: Path, monkeypatch, capsys
) -> None:
    root = tmp_path / "root"
    _stub(bench, monkeypatch, root, -signal.SIGKILL)
    monkeypatch.setattr(sys, "argv", ["crash_resume.py", "--trials=2", "--max-delay=0"])
    bench.main()
    assert "trials 2" in capsys.readouterr().out
    assert not root.exists()
    _stub(bench, monkeypatch, root, 1)
    with pytest.raises(SystemExit, match="exit code 1 in .*run-01 \\(removed at exit; --keep keeps it\\)"):
        bench.main()
    assert not root.exists()


def test_keep_leaves_the_runs_and_tasks_and_says_where(bench, tmp_path: Path, monkeypatch, capsys) -> None:
    root = tmp_path / "root"
    _stub(bench, monkeypatch, root, -signal.SIGKILL)
    monkeypatch.setattr(sys, "argv", ["crash_resume.py", "--trials=1", "--max-delay=0", "--keep"])
    bench.main()
    assert (root / "tasks").is_dir() and (root / "run-01" / "control.db").is_file()
    assert f"runs and tasks kept in {root}" in capsys.readouterr().err


def test_a_missing_task_directory_is_a_clear_error(bench, tmp_path: Path, usage_error) -> None:
    missing = tmp_path / "no-such-tasks"
    err = usage_error(bench, ["crash_resume.py", "--trials=1", "--tasks", str(missing)])
    assert f"error: {missing} is not a directory" in err

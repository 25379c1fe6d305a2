"""Working copies left by SIGKILLed processes are swept; live or recent ones are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from aios_rl.envs.shell import workspace
from aios_rl.envs.shell.workspace import WORKDIR_PREFIX, new_workdir, sweep_stale_workdirs


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _workdir(root: Path, name: str, age_s: float) -> Path:
    path = root / name
    (path / "repo").mkdir(parents=True)
    (path / "repo" / "calc.py").write_text("x = 1\n")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_only_old_copies_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = _workdir(tmp_path, f"{WORKDIR_PREFIX}{dead}-abc", 3600)
    recent = _workdir(tmp_path, f"{WORKDIR_PREFIX}{dead}-def", 0)
    live = _workdir(tmp_path, f"{WORKDIR_PREFIX}{os.getpid()}-ghi", 3600)
    legacy = _workdir(tmp_path, f"{WORKDIR_PREFIX}oldstyle", 3600)  # no pid: cannot tell, kept
    other = _workdir(tmp_path, "something-else", 3600)
    assert sweep_stale_workdirs(tmp_path) == 1
    assert not stale.exists()
    assert all(p.exists() for p in (recent, live, legacy, other))


def test_new_workdir_names_its_owner_and_sweeps_its_root_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(workspace, "_swept_roots", set())
    stale = _workdir(tmp_path, f"{WORKDIR_PREFIX}{_dead_pid()}-abc", 3600)
    first = new_workdir(str(tmp_path))
    assert first.name.startswith(f"{WORKDIR_PREFIX}{os.getpid()}-") and first.is_dir()
    assert not stale.exists()
    again = _workdir(tmp_path, f"{WORKDIR_PREFIX}{_dead_pid()}-xyz", 3600)
    new_workdir(str(tmp_path))
    assert again.exists()  # swept once per process and root, not on every episode

"""One writer per run directory: a second writer is refused while another process holds the run, readers are
not, and the run's in-flight checkpoint save is never swept away by the refused opener; what a crash left
behind is cleaned up only by the writer holding the lock."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from aios_rl.contracts.errors import RunLockedError, StorageError
from aios_rl.control.plane import ControlPlane

SRC = Path(__file__).resolve().parents[2] / "src"

# Opens the run for writing, starts a checkpoint save (its work directory exists) and holds the run until its
# stdin closes.
HOLDER = """
import sys
from pathlib import Path
from aios_rl.control.plane import ControlPlane
plane = ControlPlane(Path(sys.argv[1]))
(plane.checkpoints.root / ".tmp-c1-inflight").mkdir(parents=True)
print("ready", flush=True)
sys.stdin.read()
plane.close()
print("closed", flush=True)
"""


@pytest.fixture
def held_run(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    run = tmp_path / "run"
    with ControlPlane(run) as plane:  # an existing run with an active checkpoint
        plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
        plane.initialize("c0")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield run, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)


def test_a_second_writer_is_refused_and_sweeps_nothing(held_run: tuple[Path, subprocess.Popen[str]]) -> None:
    run, proc = held_run
    with pytest.raises(RunLockedError, match=rf"being written by another process \(pid {proc.pid}\)"):
        ControlPlane(run)
    assert (run / "checkpoints" / ".tmp-c1-inflight").is_dir()  # the holder's save in progress is untouched


def test_the_refusal_is_a_storage_error(held_run: tuple[Path, subprocess.Popen[str]]) -> None:
    """Callers (and the CLI's exit code 2) that catch StorageError keep working."""
    run, _ = held_run
    with pytest.raises(StorageError, match="aios-rl status"):
        ControlPlane(run)


def test_readers_open_next_to_the_writer(held_run: tuple[Path, subprocess.Popen[str]]) -> None:
    run, _ = held_run
    with ControlPlane(run, writer=False) as reader:
        assert reader.state.lineage.active == "c0"
    assert (run / "checkpoints" / ".tmp-c1-inflight").is_dir()


def test_the_run_opens_for_writing_once_the_holder_closes_it(
    held_run: tuple[Path, subprocess.Popen[str]],
) -> None:
    run, proc = held_run
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    assert proc.stdout.readline().strip() == "closed"
    with ControlPlane(run) as plane:  # the lock is released on close (the holder is still alive)
        assert plane.state.lineage.active == "c0"
    assert not (run / "checkpoints" / ".tmp-c1-inflight").exists()  # swept now: no save is in flight


def test_the_lock_dies_with_its_process(held_run: tuple[Path, subprocess.Popen[str]]) -> None:
    run, proc = held_run
    proc.kill()
    proc.wait(60)
    with ControlPlane(run) as plane:  # a SIGKILLed writer leaves no lock behind
        assert plane.state.lineage.active == "c0"


def test_a_writer_in_the_same_process_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = ControlPlane(run)
    with pytest.raises(RunLockedError, match=rf"pid {os.getpid()}"):
        ControlPlane(run)
    first.close()
    ControlPlane(run).close()


def test_a_checkpoint_killed_before_its_registration_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    """save_checkpoint writes the files, then registers them; a kill in between leaves a complete but
    unregistered directory. The next writer removes it, so the run's next save under that id (shell train
    numbers its checkpoints by count) is not refused as an immutable checkpoint with different content."""
    run = tmp_path / "run"
    with ControlPlane(run) as plane:
        plane.save_checkpoint("ckpt-0000", {"w": torch.zeros(2)}, {})
        plane.initialize("ckpt-0000")
        plane.checkpoints.save("ckpt-0001", {"w": torch.ones(2)}, {})  # the files, then the kill
    with ControlPlane(run, writer=False) as reader:  # a reader removes nothing
        assert reader.checkpoints.exists("ckpt-0001")
    with ControlPlane(run) as plane:
        assert plane.checkpoints.list_ids() == ["ckpt-0000"]
        plane.save_checkpoint("ckpt-0001", {"w": torch.full((2,), 2.0)}, {}, parent="ckpt-0000")
        plane.complete_update("ckpt-0001", in_epoch=False)
        assert plane.load_checkpoint("ckpt-0001")[0]["w"].tolist() == [2.0, 2.0]


def test_only_unregistered_checkpoints_are_removed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with ControlPlane(run) as plane:
        plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
        plane.initialize("c0")
        plane.checkpoints.save("orphan", {"w": torch.ones(2)}, {})
    (run / "checkpoints" / "notes").mkdir()  # not a checkpoint: left alone
    (run / "checkpoints" / "notes" / "todo.txt").write_text("x")
    with ControlPlane(run) as plane:
        assert plane.checkpoints.list_ids() == ["c0"]
        assert plane.verify_pointers() == []
    assert (run / "checkpoints" / "notes" / "todo.txt").is_file()


def test_replacing_the_settings_of_an_empty_run_keeps_the_lock_and_a_run_with_events_refuses(
    tmp_path: Path,
) -> None:
    from aios_rl.control.events import ControlConfig
    from aios_rl.control.ledger import LedgerConfig

    run, other = tmp_path / "run", ControlConfig(ledger=LedgerConfig(batch_size=2))
    with ControlPlane(run, ControlConfig()) as plane:
        plane.replace_config(other)
        assert plane.config == other
        with pytest.raises(RunLockedError):
            ControlPlane(run)  # still held
        plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
        plane.initialize("c0")
        with pytest.raises(StorageError, match="holds events"):
            plane.replace_config(ControlConfig())
    with ControlPlane(run, writer=False) as reader:
        assert reader.config == other

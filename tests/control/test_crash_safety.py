"""SIGKILL the control plane at random moments; the reopened state must be exactly the committed events."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aios_rl.control.plane import ControlPlane
from control_driver import Driver

SRC = Path(__file__).resolve().parents[2] / "src"
FORK = multiprocessing.get_context("fork")  # the child inherits the imported modules: no start-up cost


def _drive(run: Path, seed: int, tensor_mb: float, ready: Any) -> None:
    plane = ControlPlane(run)
    driver = Driver(plane, seed, tensor_mb)
    ready.set()
    while True:
        driver.step()


def start_driver(run: Path, seed: int, tensor_mb: float) -> Any:
    ready = FORK.Event()
    proc = FORK.Process(target=_drive, args=(run, seed, tensor_mb, ready), daemon=True)
    proc.start()
    assert ready.wait(60), "driver did not start"
    return proc


def committed_episode_ids(plane: ControlPlane) -> set[str]:
    ids = set()
    for event in plane.store.events():
        if event.kind in ("episode.recorded", "comparison.recorded"):
            ids.add(event.payload["episode_id"])
    return ids


def check_invariants(run: Path) -> ControlPlane:
    plane = ControlPlane(run)
    # Nothing half-applied: the loaded state (snapshot + tail) equals a fresh fold of the committed events.
    assert plane.state == plane.replay_from_scratch()
    # No dangling pointer: each names a registered checkpoint whose files verify.
    assert plane.verify_pointers() == []
    for cid, record in plane.state.lineage.checkpoints.items():
        plane.checkpoints.verify(cid, sha256=record.sha256, meta_sha256=record.meta_sha256)
    # Episode rows exist exactly for committed episode events.
    assert set(plane.store.episode_ids()) == committed_episode_ids(plane)
    lane_ids = {entry.episode_id for entry in plane.state.replay.query()}
    assert lane_ids <= set(plane.store.episode_ids())
    # The pre-update reference of a monitoring epoch is the parent of the active checkpoint.
    epoch = plane.state.ledger.open_epoch
    if epoch is not None and epoch.phase == "monitoring" and plane.state.lineage.pre_update_ref:
        active = plane.state.lineage.checkpoints[plane.state.lineage.active]
        assert active.parent == plane.state.lineage.pre_update_ref
    return plane


@pytest.mark.slow
def test_random_sigkills_resume_to_exactly_the_committed_state(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    killed, events_seen = 0, 0
    for trial in range(50):
        run = tmp_path / f"run-{trial:02d}"
        tensor_mb = 4.0 if trial % 5 == 0 else 0.1  # big checkpoints make mid-write kills likely
        proc = start_driver(run, seed=trial, tensor_mb=tensor_mb)
        time.sleep(rng.uniform(0.01, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        killed += proc.exitcode == -signal.SIGKILL
        plane = check_invariants(run)
        events_seen += plane.store.event_count()
        # Resume: the reopened plane keeps going from where the killed one stopped.
        plane.checkpoints.sweep_temp()
        driver = Driver(plane, seed=trial + 1000)
        for _ in range(30):
            driver.step()
        assert plane.state == plane.replay_from_scratch()
        assert plane.verify_pointers() == []
        plane.close()
    assert killed == 50
    assert events_seen > 50 * 5  # the kills landed after real work, not before the first event


@pytest.mark.slow
def test_kill_during_a_checkpoint_write_leaves_no_trace_in_the_lineage(tmp_path: Path) -> None:
    run = tmp_path / "run"
    script = (
        "import sys, torch\n"
        "from aios_rl.control.plane import ControlPlane\n"
        "plane = ControlPlane(sys.argv[1])\n"
        "plane.save_checkpoint('c0', {'w': torch.zeros(4)}, {})\n"
        "plane.initialize('c0')\n"
        "print('ready', flush=True)\n"
        "plane.save_checkpoint('huge', {'w': torch.ones(150 * 1024 * 1024)}, {}, parent='c0')\n"
        "print('saved', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", script, str(run)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    checkpoints = run / "checkpoints"
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".tmp-") for p in checkpoints.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.005)  # wait until the huge checkpoint is being written, then kill mid-write
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    leftovers = [p for p in checkpoints.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the kill should have cut the huge checkpoint off mid-write"
    plane = check_invariants(run)  # the writer's reopen sweeps the cut-off write away
    assert "huge" not in plane.state.lineage.checkpoints
    assert not plane.checkpoints.exists("huge")
    assert not any(p.exists() for p in leftovers)
    assert plane.state.lineage.active == "c0"
    plane.close()


def test_truncated_checkpoint_is_never_pointed_at(tmp_path: Path) -> None:
    import torch

    from aios_rl.contracts.errors import StorageError

    plane = ControlPlane(tmp_path / "run")
    plane.save_checkpoint("c0", {"w": torch.zeros(1000)}, {})
    plane.initialize("c0")
    plane.open_epoch()
    driver = Driver(plane, seed=1)
    while plane.state.ledger.open_epoch.phase != "update":
        driver.step()
    plane.save_checkpoint("c1", {"w": torch.ones(1000)}, {}, parent="c0")
    tensor_file = next((tmp_path / "run" / "checkpoints" / "c1").glob("*.safetensors"))
    tensor_file.write_bytes(tensor_file.read_bytes()[:100])  # cut off as if mid-write
    before = plane.state
    with pytest.raises(StorageError, match="c1"):
        plane.complete_update("c1")
    assert plane.state == before and plane.state.lineage.active == "c0"
    plane.close()  # one writer at a time: the reopening writer takes the run over
    reopened = ControlPlane(tmp_path / "run")
    assert reopened.state == before
    assert json.dumps(reopened.state.lineage.pointers()) == json.dumps(before.lineage.pointers())

"""`aios-rl lineage show`: the checkpoint tree of a run, however long its lineage."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from aios_rl.cli.lineage_cmd import lineage_tree
from aios_rl.control import lineage
from aios_rl.control.lineage import CheckpointRecord, LineageState

if TYPE_CHECKING:  # imported where used: they pull in torch
    from aios_rl.contracts.episode import Episode
    from aios_rl.control.plane import ControlPlane


def chain(n: int) -> LineageState:
    state = LineageState()
    parent = None
    for i in range(n):
        cid = f"c{i:05d}"
        state = lineage.register(state, CheckpointRecord(checkpoint_id=cid, parent=parent, sha256="ab" * 32,
                                                         meta_sha256="cd" * 32))
        parent = cid
    return lineage.initialize(state, "c00000")


def test_tree_of_a_long_chain_of_updates() -> None:
    """A long campaign updates thousands of times, each checkpoint the child of the one before."""
    state = chain(3000)  # deeper than the recursion limit (1000)
    lines = lineage_tree(state)
    assert len(lines) == 1 + 3000
    assert lines[1].startswith("c00000 ") and lines[1].endswith("<- active, last_stable")
    assert lines[-1].lstrip().startswith("c02999 ")
    assert lines[-1].startswith("  " * 2999 + "c02999")


def test_tree_lists_siblings_in_registration_order() -> None:
    state = LineageState()
    for cid, parent in [("root", None), ("a", "root"), ("a1", "a"), ("b", "root")]:
        state = lineage.register(state, CheckpointRecord(checkpoint_id=cid, parent=parent, sha256="0" * 64,
                                                         meta_sha256="1" * 64))
    assert [line.split()[0] for line in lineage_tree(state)[1:]] == ["root", "a", "a1", "b"]
    assert [len(line) - len(line.lstrip()) for line in lineage_tree(state)[1:]] == [0, 2, 4, 2]


def _monitoring_run(run: Path) -> ControlPlane:
    """A writer (the campaign) left open with its epoch monitoring c1 against c0."""
    import torch

    from aios_rl.control.plane import ControlPlane

    live = ControlPlane(run)
    live.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
    live.initialize("c0")
    live.open_epoch()
    for _ in range(4):
        live.record_episode(_episode(), admitted=True)
    live.save_checkpoint("c1", {"w": torch.ones(2)}, {}, parent="c0")
    live.complete_update("c1")
    return live


def _episode(relative: str | None = None) -> Episode:
    from aios_rl.contracts.episode import Comparison, Episode, Observation, Step

    return Episode(
        environment="shell", task_id="t", outcome="success", reward=1.0, env_reward=1.0, policy_version="x",
        trajectory=[Step(observation=Observation(text="o"), action="a", logprob=-0.1, entropy=0.1)],
        comparison=None if relative is None else Comparison(status="completed", relative_outcome=relative),
    )


def test_rollback_next_to_a_live_writer_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """`lineage rollback` while a campaign holds the run for writing: refused by the run's writer lock with
    the clear error, and the campaign goes on with the state it holds."""
    from typer.testing import CliRunner

    from aios_rl.cli.main import app
    from aios_rl.contracts.errors import RunLockedError
    from aios_rl.control.plane import ControlPlane

    run = tmp_path / "run"
    live = _monitoring_run(run)
    result = CliRunner().invoke(app, ["lineage", "rollback", "--run", str(run), "--reason", "operator"])
    assert isinstance(result.exception, RunLockedError), result.output
    assert "being written by another process" in str(result.exception)
    live.record_comparison(_episode("same"))  # the campaign's next event commits: nobody wrote beside it
    live.close()
    with ControlPlane(run, writer=False) as reopened:
        assert reopened.state == reopened.replay_from_scratch()
        assert reopened.state.lineage.active == "c1" and reopened.state.ledger.open_epoch is not None
    result = CliRunner().invoke(app, ["lineage", "rollback", "--run", str(run), "--reason", "operator"])
    assert result.exit_code == 0, result.output  # once the campaign is gone the rollback goes through


def test_a_writer_that_bypassed_the_lock_never_leaves_an_unopenable_run(tmp_path: Path) -> None:
    """Below the lock (an older aios-rl, or a store opened without it): an event another writer committed
    makes the live writer's next event, folded on the stale state it holds, refused rather than committed
    where the log's fold cannot apply it."""
    from aios_rl.contracts.episode import utc_now
    from aios_rl.contracts.errors import StorageError
    from aios_rl.control.plane import ControlPlane
    from aios_rl.storage.db import RunStore

    run = tmp_path / "run"
    live = _monitoring_run(run)
    with RunStore(run / "control.db") as other:  # the operator's rollback, committed without the lock
        other.append_event("op-rollback", "lineage.rolled_back", {"reason": "operator"}, utc_now())
    with pytest.raises(StorageError, match="another process"):
        live.record_comparison(_episode("same"))  # its epoch was closed by the rollback it has not seen
    live.close()
    with ControlPlane(run, writer=False) as reopened:  # the run still opens, with the operator's rollback
        assert reopened.state == reopened.replay_from_scratch()
        assert reopened.state.lineage.active == "c0" and reopened.state.ledger.open_epoch is None

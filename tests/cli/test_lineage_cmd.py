"""`aios-rl lineage show`: the checkpoint tree of a run, however long its lineage."""

from __future__ import annotations

from pathlib import Path

import pytest

from aios_rl.cli.lineage_cmd import lineage_tree
from aios_rl.control import lineage
from aios_rl.control.lineage import CheckpointRecord, LineageState


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


def test_rollback_next_to_a_live_writer_never_leaves_an_unopenable_run(tmp_path: Path) -> None:
    """`lineage rollback` commits while a campaign holds its own plane: the campaign's next event, folded on
    the stale state it holds, must be refused, not committed where the log's fold cannot apply it."""
    import torch
    from typer.testing import CliRunner

    from aios_rl.cli.main import app
    from aios_rl.contracts.episode import Comparison, Episode, Observation, Step
    from aios_rl.contracts.errors import StorageError
    from aios_rl.control.plane import ControlPlane

    def episode(relative: str | None = None) -> Episode:
        return Episode(
            environment="shell", task_id="t", outcome="success", reward=1.0, env_reward=1.0,
            policy_version="x",
            trajectory=[Step(observation=Observation(text="o"), action="a", logprob=-0.1, entropy=0.1)],
            comparison=(None if relative is None
                        else Comparison(status="completed", relative_outcome=relative)),
        )

    run = tmp_path / "run"
    live = ControlPlane(run)  # the campaign
    live.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
    live.initialize("c0")
    live.open_epoch()
    for _ in range(4):
        live.record_episode(episode(), admitted=True)
    live.save_checkpoint("c1", {"w": torch.ones(2)}, {}, parent="c0")
    live.complete_update("c1")  # monitoring c1 against c0
    result = CliRunner().invoke(app, ["lineage", "rollback", "--run", str(run), "--reason", "operator"])
    assert result.exit_code == 0, result.output
    with pytest.raises(StorageError, match="another process"):
        live.record_comparison(episode("same"))  # its epoch was closed by the rollback it has not seen
    live.close()
    with ControlPlane(run, writer=False) as reopened:  # the run still opens, with the operator's rollback
        assert reopened.state == reopened.replay_from_scratch()
        assert reopened.state.lineage.active == "c0" and reopened.state.ledger.open_epoch is None

"""A promotion outside the ledger (`lineage.promoted`, the validation gate's `better`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aios_rl.contracts.errors import LineageError
from aios_rl.control.events import ControlConfig
from aios_rl.control.plane import ControlPlane


def test_promotion_moves_last_stable_ends_the_rollback_streak_and_is_refused_inside_an_epoch(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "run", ControlConfig())
    try:
        for number in range(3):
            plane.save_checkpoint(f"ckpt-{number}", {"w": torch.zeros(1) + number}, {},
                                  parent=f"ckpt-{number - 1}" if number else None)
        plane.initialize("ckpt-0")
        plane.complete_update("ckpt-1", in_epoch=False)
        plane.rollback("validation worse")
        assert plane.state.lineage.consecutive_rollbacks == 1
        plane.complete_update("ckpt-2", in_epoch=False)
        plane.promote("validation better")
        lineage = plane.state.lineage
        assert (lineage.active, lineage.last_stable, lineage.consecutive_rollbacks) == ("ckpt-2", "ckpt-2", 0)
        assert lineage.checkpoints["ckpt-2"].verdict == "promoted"
        assert plane.replay_from_scratch().lineage == lineage
        plane.open_epoch()
        with pytest.raises(LineageError, match="no update epoch open"):
            plane.promote("inside an epoch")
        assert plane.state.lineage.last_stable == "ckpt-2"
    finally:
        plane.close()


def test_an_epoch_closed_without_rollback_breaks_the_row_of_rollbacks(tmp_path: Path) -> None:
    """Rollback x3, an epoch that closes as no_improvement, then a rollback: no freeze (the row broke)."""
    from aios_rl.contracts.episode import Comparison, Episode, Observation, Step
    from aios_rl.control.ledger import LedgerConfig

    config = ControlConfig(ledger=LedgerConfig(batch_size=1, monitor_window=1, max_monitor_windows=1))
    plane = ControlPlane(tmp_path / "run", config)

    def episode(version: str, outcome: str | None = None) -> Episode:
        step = Step(observation=Observation(text="o", candidates=["a"]), action="a", logprob=0.0, entropy=0.0,
                    terminated=True)
        comparison = None if outcome is None else Comparison(
            status="completed", relative_outcome=outcome, candidate_checkpoint=version,
            reference_checkpoint="c0")
        return Episode(environment="shell", task_id="t", trajectory=[step], outcome="failure", reward=-1.0,
                       env_reward=-1.0, policy_version=version, comparison=comparison)

    def epoch(number: int, outcome: str) -> None:
        plane.open_epoch()
        plane.record_episode(episode("c0"), admitted=True, lane="neutral")
        plane.save_checkpoint(f"c{number}", {"w": torch.zeros(1) + number}, {}, parent="c0")
        plane.complete_update(f"c{number}")
        for _ in range(3 if outcome == "worse" else 1):
            plane.record_comparison(episode(f"c{number}", outcome))
        plane.close_epoch(plane.pending_decision())

    try:
        plane.save_checkpoint("c0", {"w": torch.zeros(1)}, {})
        plane.initialize("c0")
        for number in (1, 2, 3):
            epoch(number, "worse")
        assert plane.state.lineage.consecutive_rollbacks == 3
        epoch(4, "same")
        assert plane.state.ledger.current.close_reason == "no_improvement"
        assert plane.state.lineage.consecutive_rollbacks == 0 and plane.state.lineage.last_stable == "c0"
        epoch(5, "worse")
        lineage = plane.state.lineage
        assert lineage.consecutive_rollbacks == 1 and not lineage.frozen and lineage.active == "c4"
        assert plane.replay_from_scratch() == plane.state
    finally:
        plane.close()


def test_meta_values_commit_with_the_pointer_move_or_not_at_all(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "run", ControlConfig())
    try:
        plane.save_checkpoint("c0", {"w": torch.zeros(1)}, {})
        plane.initialize("c0")
        plane.save_checkpoint("c1", {"w": torch.ones(1)}, {}, parent="c0")
        plane.complete_update("c1", in_epoch=False, meta={"rollout_state": {"epoch": 1}})
        assert plane.state.lineage.active == "c1" and plane.store.get_meta("rollout_state") == {"epoch": 1}
        plane.save_checkpoint("c2", {"w": torch.ones(1) * 2}, {}, parent="c1")
        events = plane.store.event_count()
        with pytest.raises(TypeError):  # the meta value fails inside the transaction: the move rolls back too
            plane.complete_update("c2", in_epoch=False, meta={"rollout_state": {"epoch": 2}, "bad": object()})
        assert plane.store.event_count() == events and plane.state.lineage.active == "c1"
        assert plane.store.get_meta("rollout_state") == {"epoch": 1}
        reopened = plane.replay_from_scratch()
        assert reopened.lineage.active == "c1"
    finally:
        plane.close()


def test_a_run_stored_before_the_fold_rules_had_a_version_reopens_to_its_state(tmp_path: Path) -> None:
    from aios_rl.contracts.episode import Comparison, Episode, Observation, Step
    from aios_rl.control.ledger import LedgerConfig
    from aios_rl.control.plane import CONFIG_KEY

    ledger = LedgerConfig(batch_size=1, monitor_window=1, max_monitor_windows=3, rollback_threshold=10)
    plane = ControlPlane(tmp_path / "run", ControlConfig(ledger=ledger, semantics=1))  # the old code's fold

    def episode(version: str, status: str = "completed", outcome: str | None = None) -> Episode:
        step = Step(observation=Observation(text="o", candidates=["a"]), action="a", logprob=0.0, entropy=0.0,
                    terminated=True)
        comparison = None if outcome is None and status == "completed" else Comparison(
            status=status, relative_outcome=outcome, candidate_checkpoint=version, reference_checkpoint="c0")
        return Episode(environment="shell", task_id="t", trajectory=[step], outcome="failure", reward=-1.0,
                       env_reward=-1.0, policy_version=version, comparison=comparison)

    plane.save_checkpoint("c0", {"w": torch.zeros(1)}, {})
    plane.initialize("c0")
    plane.open_epoch()
    plane.record_episode(episode("c0"), admitted=True, lane="neutral")
    plane.save_checkpoint("c1", {"w": torch.ones(1)}, {}, parent="c0")
    plane.complete_update("c1")
    for _ in range(3):  # three windows reopened for a failed comparison: under version 1 none of them counted
        plane.record_comparison(episode("c1", status="comparison_failed"))
        plane.close_epoch(plane.pending_decision())
    plane.record_comparison(episode("c1", outcome="better"))
    plane.close_epoch(plane.pending_decision())
    state = plane.state
    assert state.lineage.last_stable == "c1" and state.ledger.current.close_reason == "promoted"
    stored = plane.store.get_meta(CONFIG_KEY)
    del stored["semantics"]  # what the old code stored
    plane.store.set_meta(CONFIG_KEY, stored)
    plane.close()
    reopened = ControlPlane(tmp_path / "run", writer=False)
    try:
        assert reopened.config.semantics == 1 and reopened.state == state
        assert reopened.replay_from_scratch() == state
    finally:
        reopened.close()
    assert ControlConfig().semantics == 3  # new runs fold under today's rules


@pytest.mark.parametrize(("snapshot_every", "change"), [
    (1, "UPDATE snapshots SET state = json_insert(state, '$.from_the_future', 1)"),
    (1000, "UPDATE events SET kind = 'from_the_future' WHERE seq = (SELECT MAX(seq) FROM events)"),
])
def test_a_log_this_version_cannot_read_is_a_storage_error(
    tmp_path: Path, snapshot_every: int, change: str
) -> None:
    import sqlite3

    from aios_rl.contracts.errors import StorageError

    with ControlPlane(tmp_path / "run", ControlConfig(snapshot_every=snapshot_every)) as plane:
        plane.save_checkpoint("c0", {"w": torch.zeros(1)}, {})
        plane.initialize("c0")
        plane.open_epoch()
    with sqlite3.connect(tmp_path / "run" / "control.db") as conn:
        conn.execute(change)
    conn.close()
    for writer in (True, False):
        with pytest.raises(StorageError, match="does not read under this aios-rl"):
            ControlPlane(tmp_path / "run", writer=writer)


def test_an_update_outside_the_ledger_is_refused_while_an_epoch_is_open(tmp_path: Path) -> None:
    """Inside an update epoch pre_update_ref stays frozen until it closes (ARCHITECTURE §5): an ungated
    update (``in_epoch=False``, shell train's) there would move it under the comparisons being counted."""
    from aios_rl.contracts.episode import Episode, Observation, Step
    from aios_rl.contracts.errors import LedgerError
    from aios_rl.control.ledger import LedgerConfig

    step = Step(observation=Observation(text="o", candidates=["a"]), action="a", logprob=0.0, entropy=0.0,
                terminated=True)
    episode = Episode(environment="shell", task_id="t", trajectory=[step], outcome="failure", reward=-1.0,
                      env_reward=-1.0, policy_version="c0")
    plane = ControlPlane(tmp_path / "run", ControlConfig(ledger=LedgerConfig(batch_size=1)))
    try:
        for number in range(3):
            plane.save_checkpoint(f"c{number}", {"w": torch.zeros(1) + number}, {},
                                  parent=f"c{number - 1}" if number else None)
        plane.initialize("c0")
        plane.open_epoch()
        with pytest.raises(LedgerError, match="no update epoch open"):
            plane.complete_update("c1", in_epoch=False)  # collection
        plane.record_episode(episode, admitted=True)  # seals the batch
        plane.complete_update("c1")  # monitoring c1 against c0
        before, events = plane.state, plane.store.event_count()
        with pytest.raises(LedgerError, match="no update epoch open"):
            plane.complete_update("c2", in_epoch=False)
        assert plane.state == before and plane.store.event_count() == events
        assert (plane.state.lineage.pre_update_ref, plane.state.lineage.active) == ("c0", "c1")
    finally:
        plane.close()

"""The data of one online update: the sealed batch plus quota-sized lane samples drawn from the rest, and the
staleness of replayed episodes (updates between the checkpoint that collected one and ``active``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aios_rl.campaign.online_update import replay_staleness, update_data
from aios_rl.contracts.episode import Episode, Observation, Step, TeacherSignal
from aios_rl.control.events import ControlConfig
from aios_rl.control.ledger import LedgerConfig
from aios_rl.control.plane import ControlPlane
from aios_rl.control.replay import ReplayConfig


def make(task: str, version: str = "c0") -> Episode:
    step = Step(observation=Observation(text="o", candidates=["a"]), action="a", logprob=0.0, entropy=0.0,
                terminated=True)
    return Episode(environment="shell", task_id=task, trajectory=[step], outcome="failure", reward=-1.0,
                   env_reward=-1.0, policy_version=version, admission_status="admitted")


@pytest.mark.parametrize("seed", range(5))
def test_lane_samples_fill_their_quota_from_episodes_outside_the_sealed_batch(
    tmp_path: Path, seed: int
) -> None:
    config = ControlConfig(ledger=LedgerConfig(batch_size=4), replay=ReplayConfig(neutral_quota=4))
    plane = ControlPlane(tmp_path / "run", config)
    plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
    plane.initialize("c0")
    plane.open_epoch()
    for i in range(10):  # older neutral episodes, not in this batch
        plane.record_episode(make(f"old{i}"), admitted=False, lane="neutral")
    batch = [make(f"t{i}") for i in range(4)]
    for episode in batch:  # the batch itself is routed into the neutral lane as it is collected
        plane.record_episode(episode, admitted=True, lane="neutral")
    assert plane.state.ledger.open_epoch.phase == "update"
    data = update_data(plane, seed, max_staleness=4)
    sealed = {e.episode_id for e in batch}
    assert [e.episode_id for e in data.batch] == [e.episode_id for e in batch]
    # ten other neutral episodes are there: the quota of four is met, and none of them repeats the batch
    assert len(data.neutral) == 4 and not sealed & {e.episode_id for e in data.neutral}
    plane.close()


@pytest.mark.parametrize("seed", range(3))
def test_lane_samples_are_drawn_from_episodes_within_the_staleness_bound(tmp_path: Path, seed: int) -> None:
    """The offline update drops replayed episodes more than max_staleness updates old. Drawn from the whole
    lane, a quota was mostly spent on such episodes (and the checkpoint's data window named them) while
    fresh ones stayed in the lane: the quota is drawn from the episodes the update can train on."""
    config = ControlConfig(ledger=LedgerConfig(batch_size=4), replay=ReplayConfig(positive_quota=2))
    plane = ControlPlane(tmp_path / "run", config)
    try:
        plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
        plane.initialize("c0")
        for i in range(10):  # collected by c0, six updates before the active c6
            plane.record_episode(make(f"old{i}", "c0"), admitted=False, lane="positive")
        for number in range(1, 7):
            plane.save_checkpoint(f"c{number}", {"w": torch.zeros(2) + number}, {}, parent=f"c{number - 1}")
            plane.complete_update(f"c{number}", in_epoch=False)
        fresh = [make(f"new{i}", "c5") for i in range(2)]  # one update old
        for episode in fresh:
            plane.record_episode(episode, admitted=False, lane="positive")
        plane.open_epoch()
        for i in range(4):
            plane.record_episode(make(f"t{i}", "c6"), admitted=True, lane="neutral")
        data = update_data(plane, seed, max_staleness=4)
        assert sorted(e.episode_id for e in data.positive) == sorted(e.episode_id for e in fresh)
    finally:
        plane.close()


def test_a_boundary_episode_evicted_from_the_diagnostic_only_lane_is_still_kept_out_of_the_batch(
    tmp_path: Path,
) -> None:
    """diagnostic_only episodes are never trained on (ARCHITECTURE §5). With a small diagnostic_only capacity
    a later boundary case evicts an earlier one of the same batch; the evicted one must still be left out."""
    config = ControlConfig(ledger=LedgerConfig(batch_size=4), replay=ReplayConfig(diagnostic_only_capacity=1))
    plane = ControlPlane(tmp_path / "run", config)
    try:
        plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
        plane.initialize("c0")
        plane.open_epoch()
        boundary = TeacherSignal(status="complete", backend="oracle", boundary=True)
        batch = [make(f"t{i}") for i in range(4)]
        batch[0] = batch[0].model_copy(update={"teacher_signal": boundary})
        batch[1] = batch[1].model_copy(update={"teacher_signal": boundary})
        for episode in batch:
            lane = "diagnostic_only" if episode.teacher_signal is not None else "neutral"
            plane.record_episode(episode, admitted=True, lane=lane)
        assert plane.state.replay.counts()["diagnostic_only"] == 1  # batch[0] was evicted by batch[1]
        data = update_data(plane, 0, max_staleness=4)
        assert [e.episode_id for e in data.batch] == [batch[2].episode_id, batch[3].episode_id]
    finally:
        plane.close()


def test_an_episode_of_a_rolled_back_checkpoint_is_as_old_as_the_updates_on_both_sides_of_the_fork(
    tmp_path: Path,
) -> None:
    """c0 -> c1 -> c2; c2 is rolled back to c1 and c3 trained from c1. Episodes collected by c2 are two
    updates from c3 (c2 -> c1 -> c3), not depth(c3) - depth(c2) = 0, which passed them as fresh under any
    bound."""
    plane = ControlPlane(tmp_path / "run", ControlConfig())
    try:
        plane.save_checkpoint("c0", {"w": torch.zeros(1)}, {})
        plane.initialize("c0")
        for number in (1, 2):
            plane.save_checkpoint(f"c{number}", {"w": torch.zeros(1) + number}, {}, parent=f"c{number - 1}")
            plane.complete_update(f"c{number}", in_epoch=False)
        plane.rollback("validation worse")
        assert plane.state.lineage.active == "c1"
        plane.save_checkpoint("c3", {"w": torch.zeros(1) + 3}, {}, parent="c1")
        plane.complete_update("c3", in_epoch=False)
        assert replay_staleness(plane, ["c3", "c1", "c0", "c2"]) == [0, 1, 2, 2]
        assert replay_staleness(plane, ["not-a-checkpoint"])[0] > 1 << 19  # unknown: older than any bound
    finally:
        plane.close()

"""The data of one online update: the sealed batch plus quota-sized lane samples drawn from the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aios_rl.campaign.online_update import update_data
from aios_rl.contracts.episode import Episode, Observation, Step
from aios_rl.control.events import ControlConfig
from aios_rl.control.ledger import LedgerConfig
from aios_rl.control.plane import ControlPlane
from aios_rl.control.replay import ReplayConfig


def make(task: str) -> Episode:
    step = Step(observation=Observation(text="o", candidates=["a"]), action="a", logprob=0.0, entropy=0.0,
                terminated=True)
    return Episode(environment="shell", task_id=task, trajectory=[step], outcome="failure", reward=-1.0,
                   env_reward=-1.0, policy_version="c0", admission_status="admitted")


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
    data = update_data(plane, seed)
    sealed = {e.episode_id for e in batch}
    assert [e.episode_id for e in data.batch] == [e.episode_id for e in batch]
    # ten other neutral episodes are there: the quota of four is met, and none of them repeats the batch
    assert len(data.neutral) == 4 and not sealed & {e.episode_id for e in data.neutral}
    plane.close()

"""Monitoring compares every slot's episode with its matched reference run, admitted or not: an update whose
episodes are rejected (every action invalid, or verification never completing) still feeds the degradation
streak and is rolled back, while the rejected episodes stay out of the monitored count and the replay
lanes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from aios_rl.campaign.online import OnlineCampaign
from aios_rl.campaign.online_config import CampaignConfig
from aios_rl.contracts.episode import Episode, Observation, Step, Task, Verification
from aios_rl.control.events import ControlConfig
from aios_rl.control.ledger import LedgerConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def episode(task: Task, checkpoint: str, episode_id: str, *, kind: str) -> Episode:
    """``fixed`` (the reference's run), ``invalid`` (every action invalid, tests still failing) or
    ``blocked``."""
    step = Step(
        observation=Observation(text="o", candidates=["a"]),
        action="a",
        logprob=0.0,
        entropy=0.0,
        terminated=True,
        info={"invalid_action": kind == "invalid"},
    )
    if kind == "blocked":
        verification = Verification(completed=False, outcome="blocked", evidence={"error": "sandbox died"})
    else:
        fixed = kind == "fixed"
        verification = Verification(
            completed=True,
            outcome="success" if fixed else "failure",
            evidence={"target_unresolved": 0 if fixed else 1, "new_failures": 0},
        )
    return Episode(
        episode_id=episode_id,
        environment="shell",
        task_id=task.task_id,
        trajectory=[] if kind == "blocked" else [step],
        outcome=verification.outcome,
        reward=1.0 if kind == "fixed" else -1.0,
        env_reward=1.0 if kind == "fixed" else -1.0,
        policy_version=checkpoint,
        verification=verification,
    )


@pytest.fixture()
def monitoring(tmp_path: Path):
    """A campaign whose first update (c1) has just completed, with c0 as its pre-update reference."""
    make_task(tmp_path)
    control = ControlConfig(ledger=LedgerConfig(batch_size=1))
    config = CampaignConfig(teacher="none", control=control)
    campaign = OnlineCampaign(tmp_path / "run", tmp_path / "tasks", config)
    plane, task = campaign.plane, campaign.tasks[0]
    plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
    plane.initialize("c0")
    plane.open_epoch()
    plane.record_episode(episode(task, "c0", "batch-0", kind="fixed"), admitted=True, lane="neutral")
    plane.save_checkpoint("c1", {"w": torch.ones(2)}, {}, parent="c0")
    plane.complete_update("c1")
    campaign.policy = lambda checkpoint: None  # the episodes below are made, not run
    yield campaign
    campaign.plane.close()


@pytest.mark.parametrize(("kind", "status", "outcome"), [("invalid", "completed", "worse"),
                                                         ("blocked", "comparison_failed", None)])
def test_rejected_episodes_of_a_bad_update_still_roll_it_back(
    monitoring: OnlineCampaign, kind: str, status: str, outcome: str | None
) -> None:
    calls: list[str] = []

    def run(task: Task, seed: int, checkpoint: str, policy: object, episode_id: str,
            act_metrics: object = None) -> Episode:
        calls.append(checkpoint)
        return episode(task, checkpoint, episode_id, kind="fixed" if checkpoint == "c0" else kind)

    monitoring._episode = run  # type: ignore[method-assign]
    plane = monitoring.plane
    for k in range(1, 4):
        monitoring._run_slot(k)
    epoch = plane.state.ledger.open_epoch
    assert [(r.status, r.relative_outcome) for r in epoch.results] == [(status, outcome)] * 3
    assert epoch.streak == 3 and plane.pending_decision() == "rollback"
    # a blocked candidate is retried once before its comparison fails; an invalid one is compared as it is
    assert calls.count("c1") == (6 if kind == "blocked" else 3)
    assert epoch.monitored == [] and len(plane.state.replay.entries) == 1  # only the batch episode
    stored = plane.store.episode_bodies([r.episode_id for r in epoch.results])
    assert len(stored) == 3
    assert plane.replay_from_scratch() == plane.state


def test_a_retried_comparison_stores_the_run_it_compared(monitoring: OnlineCampaign) -> None:
    runs: list[str] = []

    def run(task: Task, seed: int, checkpoint: str, policy: object, episode_id: str,
            act_metrics: object = None) -> Episode:
        runs.append(checkpoint)
        if checkpoint == "c0":
            return episode(task, checkpoint, episode_id, kind="invalid")
        first = runs.count("c1") == 1  # the update's first run is blocked (a sandbox hiccup), the retry fixes
        return episode(task, checkpoint, episode_id, kind="blocked" if first else "fixed")

    monitoring._episode = run  # type: ignore[method-assign]
    plane = monitoring.plane
    monitoring._run_slot(1)
    (result,) = plane.state.ledger.open_epoch.results
    assert (result.status, result.relative_outcome) == ("completed", "better")
    stored = Episode.model_validate_json(plane.store.episode_bodies([result.episode_id])[result.episode_id])
    assert stored.outcome == "success" and stored.admission_status == "admitted"
    assert plane.state.ledger.open_epoch.monitored == [result.episode_id]
    assert plane.state.replay.query(lane="positive")[0].episode_id == result.episode_id


@pytest.mark.parametrize("kind", ["invalid", "blocked"])
def test_the_diagnosis_of_a_rollback_by_rejected_episodes_names_them(
    monitoring: OnlineCampaign, kind: str
) -> None:
    def run(task: Task, seed: int, checkpoint: str, policy: object, episode_id: str,
            act_metrics: object = None) -> Episode:
        return episode(task, checkpoint, episode_id, kind="fixed" if checkpoint == "c0" else kind)

    monitoring._episode = run  # type: ignore[method-assign]
    plane = monitoring.plane
    for k in range(1, 4):
        monitoring._run_slot(k)
    streak = [r.episode_id for r in plane.state.ledger.open_epoch.results]
    monitoring._close(plane.pending_decision())
    assert plane.state.lineage.active == "c0"
    diagnosis = json.loads((monitoring.run_dir / "rollbacks" / "1.json").read_text())
    # the three rejected episodes are what rolled the update back: the diagnosis must say so
    assert diagnosis["trigger_episodes"] == streak
    assert [c["episode_id"] for c in diagnosis["comparisons"]] == streak
    assert [c["reference_outcome"] for c in diagnosis["trigger_comparisons"]] == ["success"] * 3
    assert plane.replay_from_scratch() == plane.state


def test_a_window_that_ends_undecided_is_not_reported_as_a_closed_epoch(monitoring: OnlineCampaign) -> None:
    def run(task: Task, seed: int, checkpoint: str, policy: object, episode_id: str,
            act_metrics: object = None) -> Episode:
        return episode(task, checkpoint, episode_id, kind="fixed")  # same as the reference every time

    events: list[tuple[str, dict]] = []
    monitoring._episode = run  # type: ignore[method-assign]
    monitoring.on_event = lambda kind, info: events.append((kind, info))
    plane = monitoring.plane
    for k in range(1, 5):
        monitoring._run_slot(k)
    assert plane.pending_decision() == "keep_monitoring"
    monitoring._close("keep_monitoring")
    assert plane.state.ledger.open_epoch is not None  # a fresh window of the same epoch
    (close,) = [info for kind, info in events if kind == "close"]
    assert close["reason"] == "keep_monitoring" and close["closed"] is False

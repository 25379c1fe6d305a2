"""What the campaign needs from the control plane: one event per task slot (the episode with its matched
reference run), idempotent re-commits, a failed update that re-marks its batch, and the diagnosis file."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from aios_rl.campaign.diagnosis import comparison_record, rollback_diagnosis, write_diagnosis
from aios_rl.contracts.episode import Comparison, Episode, Observation, Step
from aios_rl.control.events import ControlConfig
from aios_rl.control.ledger import LedgerConfig
from aios_rl.control.plane import ControlPlane


def make(task: str, version: str, *, outcome: str | None = None, ref: str | None = None) -> Episode:
    step = Step(
        observation=Observation(text="o", candidates=["a"]),
        action="a",
        logprob=0.0,
        entropy=0.0,
        terminated=True,
    )
    comparison = (
        None
        if outcome is None
        else Comparison(
            status="completed",
            relative_outcome=outcome,
            candidate_checkpoint=version,
            reference_checkpoint=ref,
            primary_evidence={"target_unresolved": {"candidate": 2, "reference": 0}},
        )
    )
    return Episode(
        environment="shell",
        task_id=task,
        trajectory=[step],
        outcome="failure",
        reward=-1.0,
        env_reward=-1.0,
        policy_version=version,
        comparison=comparison,
        admission_status="admitted",
    )


def plane_in_monitoring(tmp_path: Path) -> ControlPlane:
    plane = ControlPlane(tmp_path / "run", ControlConfig(ledger=LedgerConfig(batch_size=1)))
    plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
    plane.initialize("c0")
    plane.open_epoch()
    plane.record_episode(make("t0", "c0"), admitted=True, lane="neutral", event_id="slot-0")
    plane.save_checkpoint("c1", {"w": torch.ones(2)}, {}, parent="c0")
    plane.complete_update("c1")
    return plane


def test_a_slot_commits_its_episode_and_reference_run_once(tmp_path: Path) -> None:
    plane = plane_in_monitoring(tmp_path)
    active, ref = make("t1", "c1", outcome="worse", ref="c0"), make("t1", "c0")
    plane.record_comparison(active, reference=ref, event_id="slot-1")
    state, events = plane.state, plane.store.event_count()
    assert set(plane.store.episode_bodies([active.episode_id, ref.episode_id])) == {
        active.episode_id,
        ref.episode_id,
    }
    # A re-run after a kill produces the same ids: re-committing is a no-op, nothing is counted twice.
    plane.record_comparison(active, reference=ref, event_id="slot-1")
    plane.record_episode(make("t0", "c0"), admitted=True, lane="neutral", event_id="slot-0")
    assert plane.state == state and plane.store.event_count() == events
    assert [r.episode_id for r in state.ledger.current.results] == [active.episode_id]
    assert (
        state.ledger.current.streak == 1
        and state.replay.query(lane="negative")[0].episode_id == active.episode_id
    )
    assert plane.replay_from_scratch() == plane.state
    plane.close()


def test_failed_update_stores_its_batch_as_update_failed(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "run", ControlConfig(ledger=LedgerConfig(batch_size=1)))
    plane.save_checkpoint("c0", {"w": torch.zeros(2)}, {})
    plane.initialize("c0")
    plane.open_epoch()
    episode = make("t0", "c0")
    plane.record_episode(episode, admitted=True)
    failed = episode.model_copy(
        update={"admission_status": "update_failed", "admission_reason": "no trainable step"}
    )
    plane.fail_update("no trainable step", episodes=[failed])
    stored = Episode.model_validate_json(plane.store.episode_body(episode.episode_id))
    assert stored.admission_status == "update_failed" and plane.state.ledger.current.failed_batches == [
        [episode.episode_id]
    ]
    assert plane.state.ledger.current.phase == "collection"
    plane.close()


def test_diagnosis_file_names_the_triggers_with_their_evidence(tmp_path: Path) -> None:
    worse = [make(f"t{i}", "c1", outcome="worse", ref="c0") for i in range(3)]
    refs = [make(f"t{i}", "c0") for i in range(3)]
    same = make("t9", "c1", outcome="same", ref="c0")
    records = [comparison_record(e, r) for e, r in zip([same, *worse], [None, *refs], strict=True)]
    body = rollback_diagnosis(
        epoch=2,
        reason="streak",
        streak=3,
        threshold=3,
        update={"checkpoint": "c1"},
        triggers=[e.episode_id for e in worse],
        comparisons=records,
        pointers_before={"active": "c1", "pre_update_ref": "c0", "last_stable": "c0"},
        pointers_after={"active": "c0", "pre_update_ref": None, "last_stable": "c0"},
        frozen_after=False,
        drill="bad-update",
    )
    path = write_diagnosis(tmp_path, 2, body)
    assert path == tmp_path / "rollbacks" / "2.json" and not list((tmp_path / "rollbacks").glob(".*"))
    loaded = json.loads(path.read_text())
    assert loaded["trigger_episodes"] == [e.episode_id for e in worse]
    assert [c["relative_outcome"] for c in loaded["trigger_comparisons"]] == ["worse"] * 3
    assert loaded["trigger_comparisons"][0]["reference_episode_id"] == refs[0].episode_id
    assert loaded["trigger_comparisons"][0]["primary_evidence"]["target_unresolved"] == {
        "candidate": 2,
        "reference": 0,
    }
    assert len(loaded["comparisons"]) == 4 and loaded["pointers_after"]["active"] == "c0"

"""The event fold (control/events.py) on hand-built event sequences."""

from __future__ import annotations

import pytest

from aios_rl.contracts.errors import LedgerError
from aios_rl.control.events import ControlConfig, ControlState, Event, reduce
from aios_rl.control.lineage import CheckpointRecord


def _checkpoint(checkpoint_id: str, parent: str | None = None) -> Event:
    record = CheckpointRecord(checkpoint_id=checkpoint_id, parent=parent, sha256="s", meta_sha256="m")
    return Event(kind="checkpoint.registered", payload={"checkpoint": record.model_dump(mode="json")})


def _monitoring(*comparisons: tuple[str, str, bool]) -> list[Event]:
    """c0 initialised, one epoch with a sealed batch of 4, the update to c1, then ``comparisons``
    (episode id, relative outcome, teacher boundary)."""
    events = [_checkpoint("c0"), Event(kind="lineage.initialized", payload={"checkpoint_id": "c0"}),
              Event(kind="epoch.opened")]
    events += [Event(kind="episode.recorded", payload={"episode_id": f"e{i}", "environment": "shell",
                                                       "admitted": True, "lane": "neutral"})
               for i in range(4)]
    events += [_checkpoint("c1", "c0"), Event(kind="update.completed", payload={"checkpoint_id": "c1"})]
    events += [Event(kind="comparison.recorded", payload={"episode_id": episode_id, "environment": "shell",
                                                          "status": "completed", "relative_outcome": outcome,
                                                          "boundary": boundary})
               for episode_id, outcome, boundary in comparisons]
    return events


def _lanes(state: ControlState) -> dict[str, str]:
    return {e.episode_id: e.lane for e in state.replay.entries}


def test_a_rollback_moves_its_triggers_to_negative_but_a_boundary_case_stays_diagnostic_only() -> None:
    events = _monitoring(("m0", "worse", True), ("m1", "worse", False), ("m2", "worse", False))
    payload = {"decision": "rollback", "trigger_episodes": ["m0", "m1", "m2"]}
    close = Event(kind="epoch.closed", payload=payload)
    before = reduce(events, ControlConfig())
    assert _lanes(before)["m0"] == "diagnostic_only" and before.ledger.current.streak == 3
    after = reduce([close], ControlConfig(), before)
    assert after.lineage.active == "c0"
    # ARCHITECTURE §5: boundary -> diagnostic_only first (analysis only, never trained on); the negative
    # lane is trained on (KL targets), so a boundary case must not be moved there by the rollback.
    assert _lanes(after) == {"e0": "neutral", "e1": "neutral", "e2": "neutral", "e3": "neutral",
                             "m0": "diagnostic_only", "m1": "negative", "m2": "negative"}
    # A run stored under semantics 2 moved it, and reopens to the state it had.
    old = reduce([*events, close], ControlConfig(semantics=2))
    assert _lanes(old)["m0"] == "negative"


def test_an_epoch_closed_with_an_unknown_decision_is_refused_by_the_fold() -> None:
    """Folding it would close the epoch as a rollback while the lineage kept the update: refused instead."""
    before = reduce(_monitoring(("m0", "worse", False)), ControlConfig())
    with pytest.raises(LedgerError, match="unknown close decision 'promoted'"):
        reduce([Event(kind="epoch.closed", payload={"decision": "promoted"})], ControlConfig(), before)

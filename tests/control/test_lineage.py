"""Hand-written transition table for the three lineage pointers."""

from __future__ import annotations

import pytest

from aios_rl.contracts.errors import LineageError
from aios_rl.control import lineage
from aios_rl.control.lineage import CheckpointRecord, LineageState


def rec(cid: str, parent: str | None = None) -> CheckpointRecord:
    return CheckpointRecord(checkpoint_id=cid, parent=parent, sha256="0" * 64, meta_sha256="1" * 64)


def started(*ids: str) -> LineageState:
    """c0 initialised as active and last_stable; further ids registered as a chain."""
    state = lineage.register(LineageState(), rec("c0"))
    state = lineage.initialize(state, "c0")
    parent = "c0"
    for cid in ids:
        state = lineage.register(state, rec(cid, parent))
        parent = cid
    return state


def test_initialize_sets_active_and_last_stable() -> None:
    state = started()
    assert state.pointers() == {"active": "c0", "pre_update_ref": None, "last_stable": "c0"}
    assert state.checkpoints["c0"].verdict == "initial"


def test_initialize_twice_refused() -> None:
    state = lineage.register(started(), rec("c1", "c0"))
    with pytest.raises(LineageError, match="already initialised"):
        lineage.initialize(state, "c1")


def test_initialize_unknown_checkpoint_refused() -> None:
    with pytest.raises(LineageError, match="not registered"):
        lineage.initialize(LineageState(), "nope")


def test_register_duplicate_and_unknown_parent_refused() -> None:
    state = started()
    with pytest.raises(LineageError, match="already registered"):
        lineage.register(state, rec("c0"))
    with pytest.raises(LineageError, match="unknown parent"):
        lineage.register(state, rec("c9", "ghost"))


def test_update_completed_moves_active_and_freezes_reference() -> None:
    state = lineage.update_completed(started("c1"), "c1")
    assert state.pointers() == {"active": "c1", "pre_update_ref": "c0", "last_stable": "c0"}
    assert state.updates == 1


def test_update_completed_refusals() -> None:
    with pytest.raises(LineageError, match="no active"):
        lineage.update_completed(lineage.register(LineageState(), rec("c0")), "c0")
    with pytest.raises(LineageError, match="not registered"):
        lineage.update_completed(started(), "ghost")
    with pytest.raises(LineageError, match="again"):
        lineage.update_completed(started(), "c0")


def test_update_failed_keeps_active_and_last_stable_clears_reference() -> None:
    state = lineage.update_completed(started("c1", "c2"), "c1")
    after = lineage.update_failed(state)
    assert after.pointers() == {"active": "c1", "pre_update_ref": None, "last_stable": "c0"}


def test_promote_moves_last_stable_and_releases_reference() -> None:
    state = lineage.update_completed(started("c1"), "c1")
    after = lineage.promote(state, "1 better, 0 worse")
    assert after.pointers() == {"active": "c1", "pre_update_ref": None, "last_stable": "c1"}
    assert after.checkpoints["c1"].verdict == "promoted"
    assert after.checkpoints["c1"].verdict_reason == "1 better, 0 worse"
    assert after.promotions == 1


def test_promote_resets_consecutive_rollbacks() -> None:
    state = lineage.rollback(lineage.update_completed(started("c1", "c2"), "c1"), "r")
    state = lineage.promote(lineage.update_completed(state, "c2"), "ok")
    assert state.consecutive_rollbacks == 0


def test_rollback_goes_to_pre_update_ref() -> None:
    state = lineage.update_completed(started("c1"), "c1")
    after = lineage.rollback(state, "streak 3")
    assert after.pointers() == {"active": "c0", "pre_update_ref": None, "last_stable": "c0"}
    assert after.checkpoints["c1"].verdict == "rolled_back"
    assert after.rollbacks == 1 and after.consecutive_rollbacks == 1


def test_rollback_without_reference_goes_to_last_stable() -> None:
    state = lineage.update_completed(started("c1", "c2"), "c1")
    state = lineage.promote(state, "ok")  # last_stable c1
    state = lineage.update_failed(lineage.update_completed(state, "c2"))  # active c2, no reference
    after = lineage.rollback(state, "manual")
    assert after.active == "c1"


def test_rollback_with_nowhere_to_go_refused() -> None:
    with pytest.raises(LineageError, match="nothing to roll back to"):
        lineage.rollback(started(), "manual")


def test_freeze_after_more_than_three_consecutive_rollbacks() -> None:
    state = started("c1", "c2", "c3", "c4")
    for i, cid in enumerate(["c1", "c2", "c3", "c4"], start=1):
        state = lineage.update_completed(state, cid)
        state = lineage.rollback(state, "streak", max_consecutive=3)
        assert state.consecutive_rollbacks == i
        assert state.frozen == (i > 3)
    with pytest.raises(LineageError, match="frozen"):
        lineage.update_completed(lineage.register(state, rec("c5", "c0")), "c5")


def test_unfreeze() -> None:
    with pytest.raises(LineageError, match="not frozen"):
        lineage.unfreeze(started())
    state = started("c1")
    state = lineage.rollback(lineage.update_completed(state, "c1"), "r", max_consecutive=0)
    assert state.frozen
    after = lineage.unfreeze(state)
    assert not after.frozen and after.consecutive_rollbacks == 0


def test_rollback_target_rules() -> None:
    assert lineage.rollback_target(started()) is None
    state = lineage.update_completed(started("c1"), "c1")
    assert lineage.rollback_target(state) == "c0"

"""Lineage: the three checkpoint pointers and their transitions (ARCHITECTURE §5).

``active`` serves new tasks; ``pre_update_ref`` is the checkpoint captured immediately before the latest
update, frozen for the whole update epoch (the comparison baseline and first rollback target);
``last_stable`` is the most recent checkpoint that closed an epoch with a promotion. Every function here is
pure: it takes a :class:`LineageState` and returns a new one, or raises :class:`LineageError` when the
transition is not allowed. The control plane persists the resulting state; nothing here does I/O.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aios_rl.contracts.episode import Record
from aios_rl.contracts.errors import LineageError


class CheckpointRecord(Record):
    """What the control plane knows about one checkpoint (its files live in the checkpoint store)."""

    checkpoint_id: str = Field(min_length=1)
    parent: str | None = None
    sha256: str = Field(description="sha256 of the checkpoint's tensor file.")
    meta_sha256: str = Field(description="sha256 of the checkpoint's meta.json.")
    config_hash: str = ""
    data_window: list[str] = Field(default_factory=list, description="Episode ids the update trained on.")
    teacher_backend: str | None = None
    env_versions: dict[str, str] = Field(default_factory=dict)
    created_at: str = ""
    verdict: str | None = Field(default=None, description="promoted | rolled_back | update_of_epoch_N ...")
    verdict_reason: str = ""


class LineageState(Record):
    """The three pointers, the checkpoint records and the rollback counters."""

    checkpoints: dict[str, CheckpointRecord] = Field(default_factory=dict)
    active: str | None = None
    pre_update_ref: str | None = None
    last_stable: str | None = None
    frozen: bool = False
    consecutive_rollbacks: int = 0
    updates: int = 0
    rollbacks: int = 0
    promotions: int = 0

    def pointers(self) -> dict[str, str | None]:
        return {"active": self.active, "pre_update_ref": self.pre_update_ref, "last_stable": self.last_stable}


def _with_verdict(state: LineageState, checkpoint_id: str, verdict: str, reason: str) -> dict[str, Any]:
    record = state.checkpoints[checkpoint_id].model_copy(update={"verdict": verdict, "verdict_reason": reason})
    return {**state.checkpoints, checkpoint_id: record}


def register(state: LineageState, record: CheckpointRecord) -> LineageState:
    """Add a checkpoint record. Its parent, when given, must already be registered."""
    if record.checkpoint_id in state.checkpoints:
        raise LineageError(f"checkpoint {record.checkpoint_id} is already registered")
    if record.parent is not None and record.parent not in state.checkpoints:
        raise LineageError(f"checkpoint {record.checkpoint_id} names unknown parent {record.parent}")
    return state.model_copy(update={"checkpoints": {**state.checkpoints, record.checkpoint_id: record}})


def initialize(state: LineageState, checkpoint_id: str) -> LineageState:
    """Point ``active`` and ``last_stable`` at the initial checkpoint of a new lineage."""
    if state.active is not None:
        raise LineageError(f"lineage is already initialised (active={state.active})")
    _require_known(state, checkpoint_id)
    checkpoints = _with_verdict(state, checkpoint_id, "initial", "initial checkpoint")
    return state.model_copy(
        update={"active": checkpoint_id, "last_stable": checkpoint_id, "checkpoints": checkpoints}
    )


def update_completed(state: LineageState, new_checkpoint_id: str) -> LineageState:
    """``pre_update_ref ← active``, ``active ← new``. Refused while frozen or before initialisation."""
    if state.frozen:
        raise LineageError("lineage is frozen after repeated rollbacks; run `aios-rl lineage unfreeze` first")
    if state.active is None:
        raise LineageError("lineage has no active checkpoint; initialise it first")
    _require_known(state, new_checkpoint_id)
    if new_checkpoint_id == state.active:
        raise LineageError(f"update produced the active checkpoint {new_checkpoint_id} again")
    return state.model_copy(
        update={"pre_update_ref": state.active, "active": new_checkpoint_id, "updates": state.updates + 1}
    )


def update_failed(state: LineageState) -> LineageState:
    """A failed update leaves ``active`` and ``last_stable`` as they are and clears the update reference."""
    return state.model_copy(update={"pre_update_ref": None})


def promote(state: LineageState, reason: str) -> LineageState:
    """Epoch closed with a promotion: ``last_stable ← active``; the epoch's reference is released."""
    if state.active is None:
        raise LineageError("cannot promote: lineage has no active checkpoint")
    return state.model_copy(
        update={
            "last_stable": state.active,
            "pre_update_ref": None,
            "consecutive_rollbacks": 0,
            "promotions": state.promotions + 1,
            "checkpoints": _with_verdict(state, state.active, "promoted", reason),
        }
    )


def survive(state: LineageState) -> LineageState:
    """Epoch closed without promotion and without rollback (``no_improvement``): the row of rollbacks that a
    freeze counts is broken; the pointers stay as they are."""
    return state.model_copy(update={"consecutive_rollbacks": 0})


def rollback_target(state: LineageState) -> str | None:
    """Where a rollback goes: ``pre_update_ref``, else ``last_stable``; None when that is ``active`` itself."""
    target = state.pre_update_ref or state.last_stable
    return None if target == state.active else target


def rollback(state: LineageState, reason: str, *, max_consecutive: int = 3) -> LineageState:
    """``active ← pre_update_ref`` (else ``last_stable``); freeze after more than ``max_consecutive``."""
    target = rollback_target(state)
    if target is None or state.active is None:
        raise LineageError(
            f"nothing to roll back to: active={state.active}, pre_update_ref={state.pre_update_ref}, "
            f"last_stable={state.last_stable}"
        )
    streak = state.consecutive_rollbacks + 1
    return state.model_copy(
        update={
            "active": target,
            "pre_update_ref": None,
            "consecutive_rollbacks": streak,
            "rollbacks": state.rollbacks + 1,
            "frozen": state.frozen or streak > max_consecutive,
            "checkpoints": _with_verdict(state, state.active, "rolled_back", reason),
        }
    )


def unfreeze(state: LineageState) -> LineageState:
    """Lift the freeze (an operator decision) and restart the consecutive-rollback count."""
    if not state.frozen:
        raise LineageError("lineage is not frozen")
    return state.model_copy(update={"frozen": False, "consecutive_rollbacks": 0})


def _require_known(state: LineageState, checkpoint_id: str) -> None:
    if checkpoint_id not in state.checkpoints:
        raise LineageError(f"checkpoint {checkpoint_id} is not registered")

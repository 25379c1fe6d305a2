"""Control events and the pure reducer that folds them into the control state.

The control plane is event-sourced: the state (lineage, ledger, replay lanes) is by definition the fold of
the committed events, ``reduce(events)``. Snapshots only make reopening fast; a fresh replay of the event
log must always give the same state, which the crash tests check after random SIGKILLs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Record, new_id, utc_now
from aios_rl.contracts.errors import LedgerError, LineageError
from aios_rl.control import ledger, lineage, replay
from aios_rl.control.ledger import ComparisonResult, LedgerConfig, LedgerState
from aios_rl.control.lineage import CheckpointRecord, LineageState
from aios_rl.control.replay import LaneEntry, ReplayConfig, ReplayPool

EventKind = Literal[
    "checkpoint.registered",
    "lineage.initialized",
    "epoch.opened",
    "episode.recorded",
    "update.completed",
    "update.failed",
    "comparison.recorded",
    "epoch.closed",
    "lineage.rolled_back",
    "lineage.promoted",
    "lineage.unfrozen",
    "teacher.alarm",
]


class ControlConfig(ConfigModel):
    """Control-plane settings; stored with the run so a reopened run folds events the same way."""

    ledger: LedgerConfig = Field(default_factory=LedgerConfig, description="Epoch ledger settings.")
    replay: ReplayConfig = Field(default_factory=ReplayConfig, description="Replay lane settings.")
    max_consecutive_rollbacks: int = Field(
        default=3, ge=0, description="More rollbacks in a row than this freeze the lineage."
    )
    snapshot_every: int = Field(default=64, ge=1, description="Write a state snapshot every N events.")
    semantics: int = Field(
        default=3,
        ge=1,
        le=3,
        description="Fold rules the run's events were written under (a stored run keeps its own, so it "
        "reopens to the state it had). 3: a rollback's trigger episodes move to the negative lane except "
        "teacher boundary cases, which stay diagnostic_only (never trained on). 2: runs stored before that, "
        "where a rollback moved those too. 2 and 3: windows reopened for failed comparisons or missing "
        "coverage count toward ledger.max_monitor_windows, and an epoch closed as no_improvement ends a row "
        "of rollbacks. 1: runs stored before that, where neither did.",
    )


class Event(Record):
    """One control event; ``event_id`` is globally unique and makes applying it idempotent."""

    event_id: str = Field(default_factory=new_id)
    kind: EventKind
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=utc_now)


class ControlState(Record):
    """Everything the control plane decides with."""

    lineage: LineageState = Field(default_factory=LineageState)
    ledger: LedgerState = Field(default_factory=LedgerState)
    replay: ReplayPool = Field(default_factory=ReplayPool)
    episodes_recorded: int = 0
    alarms: int = Field(default=0, description="Teacher-disagreement alarms raised (ledger events).")
    applied: int = Field(default=0, description="Number of events folded into this state.")


def apply(state: ControlState, event: Event, config: ControlConfig) -> ControlState:
    """Fold one event into the state. Raises LineageError/LedgerError if the transition is not allowed."""
    p = event.payload
    lin, led, pool = state.lineage, state.ledger, state.replay
    recorded, alarms = state.episodes_recorded, state.alarms
    match event.kind:
        case "checkpoint.registered":
            lin = lineage.register(lin, CheckpointRecord.model_validate(p["checkpoint"]))
        case "lineage.initialized":
            lin = lineage.initialize(lin, p["checkpoint_id"])
        case "epoch.opened":
            led = ledger.open_epoch(led, list(p.get("carry", [])), config.ledger)
        case "episode.recorded":
            recorded += 1
            if p.get("admitted") and led.open_epoch is not None:
                led = ledger.admit(led, p["episode_id"], config.ledger)
            if p.get("lane"):
                pool = pool.add(_entry(p, p["lane"], led), config.replay)
        case "update.completed":
            if not p.get("in_epoch", True) and led.open_epoch is not None:
                # as for a promotion outside the ledger: pre_update_ref stays frozen until the epoch closes
                raise LedgerError(
                    f"an update outside the ledger (in_epoch false) needs no update epoch open; epoch "
                    f"{led.open_epoch.epoch} is in phase {led.open_epoch.phase}: complete it in the epoch or "
                    "close the epoch first"
                )
            lin = lineage.update_completed(lin, p["checkpoint_id"])
            if p.get("in_epoch", True):
                led = ledger.update_completed(led)
        case "update.failed":
            lin = lineage.update_failed(lin)
            led = ledger.update_failed(led)
        case "comparison.recorded":
            result = ComparisonResult(
                episode_id=p["episode_id"],
                environment=p["environment"],
                status=p["status"],
                relative_outcome=p.get("relative_outcome"),
            )
            led = ledger.record_comparison(led, result)
            if p.get("admitted", True):  # a rejected episode feeds the streak only: no trainable lane
                led = ledger.admit(led, p["episode_id"], config.ledger)
                lane = replay.route(
                    boundary=bool(p.get("boundary", False)),
                    relative_outcome=result.relative_outcome,
                    comparison_status=result.status,
                )
                pool = pool.add(_entry(p, lane, led), config.replay)
        case "epoch.closed":
            decision = p["decision"]
            led = ledger.close(led, decision, config.ledger, count_reopened=config.semantics >= 2)
            if decision == "promote":
                lin = lineage.promote(lin, p.get("reason", "epoch promoted"))
            elif decision == "rollback":
                lin = lineage.rollback(
                    lin, p.get("reason", "degradation streak"), max_consecutive=config.max_consecutive_rollbacks
                )
                # A teacher boundary case stays diagnostic_only, as route_episode routes a rollback batch.
                boundary = pool.query(lane="diagnostic_only") if config.semantics >= 3 else []
                keep = {e.episode_id for e in boundary}
                for episode_id in p.get("trigger_episodes", []):
                    if episode_id not in keep:
                        pool = pool.move(episode_id, "negative", config.replay)
            elif config.semantics >= 2 and led.current is not None and (
                led.current.close_reason == "no_improvement"
            ):
                lin = lineage.survive(lin)
        case "lineage.rolled_back":
            lin = lineage.rollback(lin, p.get("reason", "manual"), max_consecutive=config.max_consecutive_rollbacks)
            led = ledger.close_manual(led, "manual_rollback")
        case "lineage.promoted":
            if led.open_epoch is not None:  # inside an update epoch pre_update_ref stays frozen until it closes
                raise LineageError("a promotion outside the ledger needs no update epoch open; close it instead")
            lin = lineage.promote(lin, p.get("reason", "promoted"))
        case "lineage.unfrozen":
            lin = lineage.unfreeze(lin)
        case "teacher.alarm":
            alarms += 1  # recorded for audit and status; no pointer or epoch changes
        case _:  # pragma: no cover - Event.kind is a closed Literal
            raise LedgerError(f"unknown event kind {event.kind}")
    return ControlState(
        lineage=lin, ledger=led, replay=pool, episodes_recorded=recorded, alarms=alarms, applied=state.applied + 1
    )


def _entry(payload: dict[str, Any], lane: str, led: LedgerState) -> LaneEntry:
    epoch = led.current.epoch if led.current is not None else 0
    return LaneEntry(
        episode_id=payload["episode_id"],
        lane=lane,
        environment=payload["environment"],
        epoch=epoch,
        task_id=payload.get("task_id", ""),
    )


def reduce(events: Iterable[Event], config: ControlConfig, state: ControlState | None = None) -> ControlState:
    """Fold events in order, starting from ``state`` (an empty control state by default)."""
    current = state or ControlState()
    for event in events:
        current = apply(current, event, config)
    return current

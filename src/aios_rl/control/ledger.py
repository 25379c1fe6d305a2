"""The epoch ledger: phases, micro-batches, the degradation streak and the epoch-close decision.

An update epoch runs ``collection → update → monitoring → closed``. Collection seals a micro-batch of
``batch_size`` admitted episodes (phase ``update``); a completed update starts monitoring, where every task
is also run under ``pre_update_ref`` and the matched comparison feeds the streak. Reopen rules: a failed
update returns the epoch to ``collection`` (its batch kept for diagnosis); a ``replay_only`` close (failed
comparisons or insufficient coverage) returns it to ``monitoring`` with fresh results and the same streak,
and counts as a window toward ``max_monitor_windows`` like an undecided one, after which the epoch closes as
``no_improvement`` (runs stored under ``ControlConfig.semantics`` 1 did not count it). All functions are
pure; see ARCHITECTURE §5 and ``reference/original-aios-rl.md`` §3 for the semantics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

from pydantic import Field

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import ComparisonStatus, Record, RelativeOutcome
from aios_rl.contracts.errors import LedgerError

Phase = Literal["collection", "update", "monitoring", "closed"]
CloseDecision = Literal["rollback", "insufficient_coverage", "failed_comparisons", "promote", "keep_monitoring"]


class LedgerConfig(ConfigModel):
    """Ledger settings (defaults from ARCHITECTURE §5)."""

    batch_size: int = Field(default=4, ge=1, description="Admitted episodes that seal one micro-batch.")
    rollback_threshold: int = Field(default=3, ge=1, description="Degradation streak that triggers rollback.")
    monitor_window: int = Field(
        default=4, ge=1, description="Comparisons after an update before the epoch-close decision is taken."
    )
    max_monitor_windows: int = Field(
        default=3,
        ge=1,
        description="Windows without a promotion or rollback (undecided, failed comparisons or missing "
        "coverage) before the epoch closes without promotion.",
    )


class ComparisonResult(Record):
    """One matched comparison as the ledger counts it."""

    episode_id: str
    environment: str
    status: ComparisonStatus
    relative_outcome: RelativeOutcome | None = None


class EpochState(Record):
    """The open (or last) update epoch."""

    epoch: int = Field(ge=1)
    phase: Phase = "collection"
    batch: list[str] = Field(default_factory=list, description="Admitted episodes under collection.")
    sealed: list[str] = Field(default_factory=list, description="The sealed micro-batch of the update.")
    failed_batches: list[list[str]] = Field(default_factory=list, description="Batches whose update failed.")
    results: list[ComparisonResult] = Field(default_factory=list, description="Comparisons this window.")
    monitored: list[str] = Field(default_factory=list, description="Admitted post-update episode ids.")
    streak: int = Field(default=0, ge=0)
    windows: int = Field(
        default=0, ge=0, description="Monitoring windows completed without a promotion or rollback "
        "(undecided, failed comparisons or missing coverage)."
    )
    close_reason: str | None = None


class EpochSummary(Record):
    """What remains of a closed epoch. The counts are its last monitoring window's (the fold keeps no more;
    `aios-rl status` counts every window of the last closed epoch from the event log)."""

    epoch: int
    close_reason: str
    better: int = 0
    same: int = 0
    worse: int = 0
    failed: int = 0


class LedgerState(Record):
    current: EpochState | None = None
    history: list[EpochSummary] = Field(default_factory=list)

    @property
    def open_epoch(self) -> EpochState | None:
        return self.current if self.current is not None and self.current.phase != "closed" else None


def next_streak(streak: int, status: ComparisonStatus, outcome: RelativeOutcome | None) -> int:
    """Degradation streak rule: worse or comparison_failed +1, better resets, same leaves it."""
    if status == "comparison_failed" or outcome == "worse":
        return streak + 1
    if outcome == "better":
        return 0
    return streak


def counts(results: Iterable[ComparisonResult]) -> dict[str, int]:
    tally = {"better": 0, "same": 0, "worse": 0, "failed": 0}
    for r in results:
        tally["failed" if r.status == "comparison_failed" else str(r.relative_outcome)] += 1
    return tally


def open_epoch(state: LedgerState, carry: list[str], config: LedgerConfig) -> LedgerState:
    """Start the next epoch (only one may be open), seeded with carried-over admitted episodes."""
    if state.open_epoch is not None:
        raise LedgerError(f"epoch {state.open_epoch.epoch} is still open ({state.open_epoch.phase})")
    number = 1 if state.current is None else state.current.epoch + 1
    epoch = EpochState(epoch=number)
    for episode_id in carry[: config.batch_size]:
        epoch = _admit(epoch, episode_id, config)
    return state.model_copy(update={"current": epoch})


def admit(state: LedgerState, episode_id: str, config: LedgerConfig) -> LedgerState:
    """Count an admitted episode: into the batch under collection, or as monitored after an update."""
    epoch = _require_open(state)
    if epoch.phase == "collection":
        return state.model_copy(update={"current": _admit(epoch, episode_id, config)})
    if epoch.phase == "monitoring":
        if episode_id in epoch.monitored:
            return state
        return state.model_copy(update={"current": epoch.model_copy(update={"monitored": [*epoch.monitored, episode_id]})})
    raise LedgerError(f"epoch {epoch.epoch} is in phase {epoch.phase}; episodes are admitted in collection or monitoring")


def _admit(epoch: EpochState, episode_id: str, config: LedgerConfig) -> EpochState:
    if episode_id in epoch.batch:
        return epoch
    batch = [*epoch.batch, episode_id]
    if len(batch) >= config.batch_size:  # a full micro-batch is sealed and waits for its update
        return epoch.model_copy(update={"batch": [], "sealed": batch, "phase": "update"})
    return epoch.model_copy(update={"batch": batch})


def update_completed(state: LedgerState) -> LedgerState:
    epoch = _require_phase(state, "update")
    return state.model_copy(update={"current": epoch.model_copy(update={"phase": "monitoring"})})


def update_failed(state: LedgerState) -> LedgerState:
    """Reopen rule ``update_failed``: back to collection, the batch kept aside, streak reset."""
    epoch = _require_phase(state, "update")
    reopened = epoch.model_copy(
        update={
            "phase": "collection",
            "failed_batches": [*epoch.failed_batches, epoch.sealed],
            "sealed": [],
            "results": [],
            "streak": 0,
        }
    )
    return state.model_copy(update={"current": reopened})


def record_comparison(state: LedgerState, result: ComparisonResult) -> LedgerState:
    epoch = _require_phase(state, "monitoring")
    if result.status == "completed" and result.relative_outcome is None:
        raise LedgerError(
            f"comparison of episode {result.episode_id} is completed but has no relative_outcome; record "
            "better/same/worse, or status comparison_failed"
        )
    if any(r.episode_id == result.episode_id for r in epoch.results):
        return state
    updated = epoch.model_copy(
        update={
            "results": [*epoch.results, result],
            "streak": next_streak(epoch.streak, result.status, result.relative_outcome),
        }
    )
    return state.model_copy(update={"current": updated})


def decide_close(epoch: EpochState, config: LedgerConfig, *, coverage_ok: bool = True) -> CloseDecision:
    """The epoch-close decision, in precedence order.

    rollback (streak ≥ threshold) > insufficient coverage > failed comparisons > promotion (≥ 1 better and
    no worse) > keep monitoring. Before a full window of comparisons only a rollback can be decided.
    """
    if epoch.streak >= config.rollback_threshold:
        return "rollback"
    if len(epoch.results) < config.monitor_window:
        return "keep_monitoring"
    tally = counts(epoch.results)
    if not coverage_ok:
        return "insufficient_coverage"
    if tally["failed"] > 0:
        return "failed_comparisons"
    if tally["better"] >= 1 and tally["worse"] == 0:
        return "promote"
    return "keep_monitoring"


def close(
    state: LedgerState, decision: CloseDecision, config: LedgerConfig, *, count_reopened: bool = True
) -> LedgerState:
    """Apply a close decision: close the epoch, reopen it for replay, or start another window.

    ``count_reopened`` False folds a run stored before reopened windows counted toward the limit
    (``ControlConfig.semantics`` 1): a reopen then starts a fresh window without counting it.
    """
    if decision not in get_args(CloseDecision):
        raise LedgerError(
            f"unknown close decision {decision!r}; expected one of {', '.join(get_args(CloseDecision))}"
        )
    epoch = _require_phase(state, "monitoring")
    if not count_reopened and decision in ("insufficient_coverage", "failed_comparisons"):
        return state.model_copy(update={"current": epoch.model_copy(update={"results": []})})
    if decision in ("insufficient_coverage", "failed_comparisons", "keep_monitoring"):
        # A fresh window with the same pointer pair and the streak carried on (for the first two this is the
        # reopen rule replay_only). Every window counts toward the limit, so an epoch that keeps failing a
        # comparison without ever reaching the rollback streak still ends.
        windows = epoch.windows + 1
        if windows < config.max_monitor_windows:
            return state.model_copy(update={"current": epoch.model_copy(update={"results": [], "windows": windows})})
        return _closed(state, epoch, "no_improvement")
    return _closed(state, epoch, "promoted" if decision == "promote" else "rollback")


def close_manual(state: LedgerState, reason: str) -> LedgerState:
    """Close whatever epoch is open (an operator rollback ends it)."""
    epoch = state.open_epoch
    return state if epoch is None else _closed(state, epoch, reason)


def _closed(state: LedgerState, epoch: EpochState, reason: str) -> LedgerState:
    tally = counts(epoch.results)
    summary = EpochSummary(epoch=epoch.epoch, close_reason=reason, **tally)
    done = epoch.model_copy(update={"phase": "closed", "close_reason": reason})
    return state.model_copy(update={"current": done, "history": [*state.history, summary]})


def _require_open(state: LedgerState) -> EpochState:
    epoch = state.open_epoch
    if epoch is None:
        raise LedgerError("no epoch is open; open one first")
    return epoch


def _require_phase(state: LedgerState, phase: Phase) -> EpochState:
    epoch = _require_open(state)
    if epoch.phase != phase:
        raise LedgerError(f"epoch {epoch.epoch} is in phase {epoch.phase}, expected {phase}")
    return epoch

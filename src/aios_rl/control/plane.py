"""The control plane service: the single writer that turns decisions into committed events.

``ControlPlane`` owns a run directory's ``control.db`` and ``checkpoints/``. Each method validates the
transition on the in-memory state first (nothing is written when it is refused), checks that every pointer
the event would move names a checkpoint whose files verify, then commits the event in one transaction.
Reopening a run folds the latest snapshot plus the events after it, so a killed process resumes exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from aios_rl.contracts.episode import Episode, utc_now
from aios_rl.contracts.errors import ConfigError, LineageError, StorageError
from aios_rl.control import ledger
from aios_rl.control.events import ControlConfig, ControlState, Event, EventKind, apply, reduce
from aios_rl.control.lineage import CheckpointRecord
from aios_rl.storage.checkpoints import CheckpointStore
from aios_rl.storage.db import EpisodeRow, RunStore
from aios_rl.storage.run_lock import WriterLock

log = logging.getLogger(__name__)

CONFIG_KEY = "control_config"


class ControlPlane:
    """Single-writer control plane of one run directory.

    Args:
        run_dir: the run directory (``control.db`` and ``checkpoints/`` live there).
        config: control settings for a NEW run; an existing run keeps the settings it was created with
            (passing different ones is a ConfigError, so a run directory alone reproduces the run).
        writer: False for read-only inspection (status, lineage show) next to a running writer. A writer
            holds the run's writer lock until :meth:`close` (see :mod:`aios_rl.storage.run_lock`).

    Raises:
        RunLockedError: ``writer`` and another open writer (in any process) holds the run.
    """

    def __init__(
        self,
        run_dir: Path,
        config: ControlConfig | None = None,
        *,
        synchronous: str = "NORMAL",
        writer: bool = True,
    ) -> None:
        self.run_dir = Path(run_dir)
        # Held until close: a second writer is refused here, before it can sweep or commit anything.
        self._lock = WriterLock(self.run_dir) if writer else None
        try:
            self.store = RunStore(self.run_dir / "control.db", synchronous=synchronous)
        except BaseException:
            self._release_lock()
            raise
        try:
            self.checkpoints = CheckpointStore(self.run_dir / "checkpoints")
            if writer:
                # Leftovers of checkpoint saves a crash cut off; only the lock holder may remove them.
                swept = self.checkpoints.sweep_temp()
                if swept:
                    log.warning("removed %d partial checkpoint write(s) left by a crash in %s", swept,
                                self.run_dir)
            self.writer = writer
            try:
                self.config = self._resolve_config(config)
                self.seq, self.state = self._load()
                if writer:  # files a crash left between a save and its registration: nothing names them
                    self.checkpoints.remove_unregistered(self.state.lineage.checkpoints)
            except ValidationError as exc:  # a field or an event kind this version does not know
                raise StorageError(
                    f"{self.run_dir}: its control log does not read under this aios-rl (written by a newer "
                    f"version, or damaged): {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
                ) from None
        except BaseException:
            self.close()  # e.g. a changed control config: the refused opener holds no connection (nor lock)
            raise

    def _resolve_config(self, config: ControlConfig | None) -> ControlConfig:
        stored = self.store.get_meta(CONFIG_KEY)
        if stored is None:
            resolved = config or ControlConfig()
            if self.writer:  # a reader never writes: the writer creating the run stores its own config
                self.store.set_meta(CONFIG_KEY, resolved.model_dump(mode="json"))
            return resolved
        # A run stored before the fold rules had a version was written under version 1.
        resolved = ControlConfig.model_validate({"semantics": 1} | stored)
        if config is not None and config.model_copy(update={"semantics": resolved.semantics}) != resolved:
            raise ConfigError(
                f"{self.run_dir} was created with a different control config; "
                "reuse it unchanged or start a new run directory"
            )
        return resolved

    def replace_config(self, config: ControlConfig) -> None:
        """Store ``config`` as the control settings of this run, which holds no event yet (a start refused
        or killed before its first event left its own settings); the writer lock stays held throughout.

        Raises:
            StorageError: the run holds events, folded under the settings it has.
        """
        assert self.writer, "a read-only control plane never writes"
        if self.store.event_count() > 0:
            raise StorageError(f"{self.run_dir} holds events; its control settings cannot change")
        self.store.set_meta(CONFIG_KEY, config.model_dump(mode="json"))
        self.config = config

    def _load(self) -> tuple[int, ControlState]:
        snap = self.store.latest_snapshot()
        seq, state = (0, ControlState()) if snap is None else (snap[0], ControlState.model_validate_json(snap[1]))
        for stored in self.store.events(after_seq=seq):
            state = apply(state, _event(stored), self.config)
            seq = stored.seq
        return seq, state

    def replay_from_scratch(self) -> ControlState:
        """The state a fresh fold of every committed event gives (must equal ``self.state``)."""
        return reduce((_event(s) for s in self.store.events()), self.config)

    # -- the one write path -------------------------------------------------------------------------

    def emit(
        self,
        kind: EventKind,
        payload: Mapping[str, Any],
        *,
        event_id: str | None = None,
        episodes: Sequence[Episode] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> ControlState:
        """Validate, verify pointers, and commit one event (a no-op if ``event_id`` was already applied);
        ``meta`` values (e.g. a trainer's state that must move with a checkpoint) commit in the same
        transaction. Raises StorageError, writing nothing, when another process (e.g. `aios-rl lineage
        rollback`) committed events since this plane last folded the log."""
        event = Event(kind=kind, payload=dict(payload), **({"event_id": event_id} if event_id else {}))
        if self.store.has_event(event.event_id):
            return self.state
        new_state = apply(self.state, event, self.config)
        self._verify_moved_pointers(new_state)
        snapshot = new_state.model_dump_json() if new_state.applied % self.config.snapshot_every == 0 else None
        rows = [
            EpisodeRow(e.episode_id, e.environment, e.task_id, e.model_dump_json()) for e in episodes
        ]
        seq = self.store.append_event(
            event.event_id, event.kind, event.payload, event.created_at, episodes=rows, snapshot=snapshot,
            meta=meta, after_seq=self.seq,
        )
        if seq is None:  # committed by someone else between the check and the insert
            return self.state
        self.seq, self.state = seq, new_state
        return new_state

    def _verify_moved_pointers(self, new_state: ControlState) -> None:
        old = self.state.lineage.pointers()
        for name, checkpoint_id in new_state.lineage.pointers().items():
            if checkpoint_id is not None and checkpoint_id != old[name]:
                record = new_state.lineage.checkpoints[checkpoint_id]
                self.checkpoints.verify(checkpoint_id, sha256=record.sha256, meta_sha256=record.meta_sha256)

    # -- convenience wrappers (one event each) ----------------------------------------------------

    def save_checkpoint(
        self,
        checkpoint_id: str,
        tensors: Mapping[str, torch.Tensor],
        meta: Mapping[str, Any],
        *,
        parent: str | None = None,
        config_hash: str = "",
        data_window: Sequence[str] = (),
        teacher_backend: str | None = None,
        env_versions: Mapping[str, str] | None = None,
    ) -> CheckpointRecord:
        """Write the checkpoint files atomically, then register them (files first: a crash in between
        leaves an unregistered directory, never a record without files; the next writer removes it)."""
        files = self.checkpoints.save(checkpoint_id, tensors, meta)
        record = CheckpointRecord(
            checkpoint_id=checkpoint_id,
            parent=parent,
            sha256=files.sha256,
            meta_sha256=files.meta_sha256,
            config_hash=config_hash,
            data_window=list(data_window),
            teacher_backend=teacher_backend,
            env_versions=dict(env_versions or {}),
            created_at=utc_now(),
        )
        self.emit("checkpoint.registered", {"checkpoint": record.model_dump(mode="json")})
        return record

    def load_checkpoint(self, checkpoint_id: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Load a registered checkpoint, verifying it against the sha256 recorded in the store."""
        record = self.state.lineage.checkpoints.get(checkpoint_id)
        if record is None:
            raise StorageError(f"checkpoint {checkpoint_id} is not registered in {self.store.path}")
        return self.checkpoints.load(checkpoint_id, sha256=record.sha256, meta_sha256=record.meta_sha256)

    def resolve_checkpoint(self, name: str) -> str:
        """``active``, ``last_stable``, ``pre_update_ref``, ``initial`` or an id → a registered checkpoint id.

        Raises:
            StorageError: no such checkpoint in this run (the message lists the known ones).
        """
        lineage = self.state.lineage
        if name in ("active", "last_stable", "pre_update_ref"):
            found = getattr(lineage, name)
        elif name == "initial":
            found = next((c.checkpoint_id for c in lineage.checkpoints.values() if c.parent is None), None)
        else:
            found = name if name in lineage.checkpoints else None
        if found is None:
            known = ", ".join(lineage.checkpoints) or "none"
            raise StorageError(f"checkpoint {name!r} not found in {self.run_dir} (known: {known})")
        return found

    def initialize(self, checkpoint_id: str) -> ControlState:
        return self.emit("lineage.initialized", {"checkpoint_id": checkpoint_id})

    def open_epoch(self, carry: Sequence[str] = ()) -> ControlState:
        return self.emit("epoch.opened", {"carry": list(carry)})

    def record_episode(
        self,
        episode: Episode,
        *,
        admitted: bool,
        lane: str | None = None,
        event_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> ControlState:
        """Store an episode; admitted ones count toward the epoch's batch; ``lane`` puts it in replay.

        ``event_id`` (optional) makes a re-commit after a crash a no-op (campaigns derive it from the task);
        ``meta`` values commit in the same transaction (see :meth:`emit`).
        """
        payload = {
            "episode_id": episode.episode_id,
            "environment": episode.environment,
            "task_id": episode.task_id,
            "admitted": admitted,
            "lane": lane,
        }
        return self.emit("episode.recorded", payload, event_id=event_id, episodes=[episode], meta=meta)

    def ensure_can_update(self) -> None:
        """Raise LineageError when an update would be refused (frozen or uninitialised lineage), so callers
        can skip the expensive training step instead of discovering the refusal afterwards."""
        lin = self.state.lineage
        if lin.frozen:
            raise LineageError("lineage is frozen after repeated rollbacks; run `aios-rl lineage unfreeze` first")
        if lin.active is None:
            raise LineageError("lineage has no active checkpoint; initialise it first")

    def complete_update(
        self, checkpoint_id: str, *, in_epoch: bool = True, meta: Mapping[str, Any] | None = None
    ) -> ControlState:
        """``active ← checkpoint_id``; ``meta`` values commit with the pointer move (see :meth:`emit`)."""
        payload = {"checkpoint_id": checkpoint_id, "in_epoch": in_epoch}
        return self.emit("update.completed", payload, meta=meta)

    def fail_update(self, reason: str, *, episodes: Sequence[Episode] = ()) -> ControlState:
        """Record a failed update; ``episodes`` (the batch, re-marked ``update_failed``) are stored with it."""
        return self.emit("update.failed", {"reason": reason}, episodes=episodes)

    def record_comparison(
        self,
        episode: Episode,
        *,
        admitted: bool = True,
        reference: Episode | None = None,
        event_id: str | None = None,
    ) -> ControlState:
        """Store a monitored episode with its matched comparison; updates the streak and routes its lane.

        ``reference`` (optional) is the matched run under ``pre_update_ref``, stored in the same transaction;
        ``event_id`` (optional) makes a re-commit after a crash a no-op.
        """
        if episode.comparison is None:
            raise ConfigError(f"episode {episode.episode_id} carries no comparison")
        boundary = bool(episode.teacher_signal and episode.teacher_signal.boundary)
        payload = {
            "episode_id": episode.episode_id,
            "environment": episode.environment,
            "task_id": episode.task_id,
            "status": episode.comparison.status,
            "relative_outcome": episode.comparison.relative_outcome,
            "boundary": boundary,
            "admitted": admitted,
        }
        stored = [episode] if reference is None else [episode, reference]
        return self.emit("comparison.recorded", payload, event_id=event_id, episodes=stored)

    def pending_decision(self, *, coverage_ok: bool = True) -> ledger.CloseDecision | None:
        """The close decision the open monitoring epoch calls for now, or None if it should keep going."""
        epoch = self.state.ledger.open_epoch
        if epoch is None or epoch.phase != "monitoring":
            return None
        decision = ledger.decide_close(epoch, self.config.ledger, coverage_ok=coverage_ok)
        if decision == "keep_monitoring" and len(epoch.results) < self.config.ledger.monitor_window:
            return None
        return decision

    def close_epoch(
        self, decision: ledger.CloseDecision, *, reason: str = "", trigger_episodes: Sequence[str] = ()
    ) -> ControlState:
        payload = {"decision": decision, "reason": reason or decision, "trigger_episodes": list(trigger_episodes)}
        return self.emit("epoch.closed", payload)

    def rollback(self, reason: str) -> ControlState:
        """Operator rollback: ``active ← pre_update_ref`` (else ``last_stable``); closes an open epoch."""
        return self.emit("lineage.rolled_back", {"reason": reason})

    def promote(self, reason: str) -> ControlState:
        """Promotion outside a monitoring epoch (a validation gate's ``better``): ``last_stable ← active``."""
        return self.emit("lineage.promoted", {"reason": reason})

    def raise_alarm(
        self, kind: str, payload: Mapping[str, Any], *, event_id: str | None = None
    ) -> ControlState:
        """Record an alarm (e.g. teacher disagreement past its threshold) as a ledger event; ``event_id``
        (optional) makes raising it again a no-op."""
        return self.emit("teacher.alarm", {"kind": kind, **dict(payload)}, event_id=event_id)

    def unfreeze(self) -> ControlState:
        return self.emit("lineage.unfrozen", {})

    def verify_pointers(self) -> list[str]:
        """Problems with the current pointers (empty when every pointer names a verifying checkpoint)."""
        problems = []
        for name, checkpoint_id in self.state.lineage.pointers().items():
            if checkpoint_id is None:
                continue
            record = self.state.lineage.checkpoints.get(checkpoint_id)
            if record is None:
                problems.append(f"{name} names unregistered checkpoint {checkpoint_id}")
                continue
            try:
                self.checkpoints.verify(checkpoint_id, sha256=record.sha256, meta_sha256=record.meta_sha256)
            except Exception as exc:  # noqa: BLE001 - reported, not raised: this is a health check
                problems.append(f"{name} -> {checkpoint_id}: {exc}")
        return problems

    def close(self) -> None:
        self.store.close()
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _event(stored: Any) -> Event:
    return Event(event_id=stored.event_id, kind=stored.kind, payload=stored.payload, created_at=stored.created_at)

"""The rollout half of a training epoch: the allocator, its persisted state, RAIL traces and the ledger.

:class:`RolloutCollector` owns the run's allocator (``shell train --allocator NAME``). Each epoch it gives
the :class:`~aios_rl.rollout.engine.RolloutEngine` a batch budget of the chosen tasks' caps, never more
than what is left of the run's ``rollout_budget``. RAIL's realized interventions are appended to the
``rail_traces`` table of ``RUN/control.db`` as they happen. Each epoch's checkpoint commits, in the same
transaction, the allocator's state (controller, traces window, VIP history, RNG streams), the cumulative
ledger and the newest trace row (:meth:`state_meta`), so a resumed run continues the same controller. A run
killed before that commit reruns the epoch; the traces its killed attempt appended are discarded on resume,
so the table holds exactly the traces the stored controller has seen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aios_rl.contracts.episode import DecodingRegime, Task
from aios_rl.contracts.protocols import Teacher
from aios_rl.control.plane import ControlPlane
from aios_rl.control.reward import RewardConfig
from aios_rl.policy.base import Policy
from aios_rl.rollout.allocators import AllocatorConfig, RailAllocator, RolloutBudget, make_allocator
from aios_rl.rollout.budget import Budget
from aios_rl.rollout.engine import BatchResult, EpisodeNamer, GroupOutcome, RolloutEngine
from aios_rl.rollout.runner import DistinctMode, EnvFactory
from aios_rl.storage.rail_traces import RailTraceStore

log = logging.getLogger(__name__)

ROLLOUT_STATE_KEY = "rollout_state"


class RolloutCollector:
    """One run's allocator and cumulative rollout ledger, restored from the run store when resuming.

    Args:
        plane: the run's control plane (its store keeps the allocator state; its ``control.db`` the traces).
        allocator: an allocator name (``uniform-4``, ``rail``, ...).
        rollout_budget: total rollouts the run may spend, branches included; 0 means no limit.
    """

    def __init__(
        self, plane: ControlPlane, allocator: str, config: AllocatorConfig, *, rollout_budget: int = 0
    ) -> None:
        self.plane, self.rollout_budget = plane, rollout_budget
        self.allocator = make_allocator(allocator, config)
        self.ledger = Budget()
        self.saved_epoch = 0
        self.shortfall = 0  # rollouts the last epoch's groups start with that the run's budget cut
        self._trace_mark = 0  # the newest RAIL trace row the allocator state has seen
        state: dict[str, Any] | None = plane.store.get_meta(ROLLOUT_STATE_KEY)
        if state is not None:
            self.allocator.load_state_dict(state["allocator"])
            self.ledger = Budget.from_state_dict(state["ledger"])
            self.saved_epoch = int(state["epoch"])
            self._trace_mark = int(state.get("trace_mark", -1))  # -1: stored before marks were kept
        if isinstance(self.allocator, RailAllocator) and self._trace_mark >= 0:
            # Traces of an epoch killed before its commit: its controller state was never stored with them.
            with RailTraceStore(Path(self.plane.run_dir) / "control.db") as store:
                dropped = store.discard_after(self._trace_mark)
            if dropped:
                log.warning("discarded %d RAIL traces of an epoch that was not committed", dropped)

    @property
    def remaining(self) -> int | None:
        """Rollouts the run may still spend (None: unlimited)."""
        return None if self.rollout_budget == 0 else max(0, self.rollout_budget - self.ledger.rollouts)

    def collect(
        self,
        make_env: EnvFactory,
        policy: Policy,
        tasks: Sequence[Task],
        *,
        epoch: int,
        seed: int,
        policy_version: str,
        regime: DecodingRegime,
        max_steps: int,
        workers: int,
        teacher: Teacher | None,
        reward_config: RewardConfig,
        on_group: Callable[[GroupOutcome], None] | None = None,
        distinct: DistinctMode = "off",
        name: EpisodeNamer | None = None,
    ) -> BatchResult:
        """Run one epoch's groups; the batch budget is the tasks' caps (or what is left of the run's).

        When what is left of the run's budget is less than the rollouts the groups start with, the epoch
        runs fewer episodes than planned (none once it is spent, or once the groups' equal shares of what is
        left are 0): a warning says so, and ``shortfall`` counts the rollouts cut
        (``rollout/budget_shortfall``), what the shares leave unused included.

        ``distinct``: how a task's rollouts draw actions: off, first or states (``run_rollouts``); ``name``:
        the episodes' ids (``RolloutEngine.collect``).
        """
        if epoch != self.saved_epoch + 1:
            log.warning(
                "epoch %d starts from the allocator state saved after epoch %d", epoch, self.saved_epoch
            )
        plans = [self.allocator.group_plan(t.task_id) for t in tasks]
        caps, planned = sum(p.cap for p in plans), sum(p.initial for p in plans)
        left = self.remaining
        self.shortfall = 0  # a batch that raises leaves no count of the epoch before
        budget = RolloutBudget(caps if left is None else min(caps, left))
        engine = RolloutEngine(
            make_env,
            self.allocator,
            max_steps=max_steps,
            workers=workers,
            teacher=teacher,
            reward_config=reward_config,
            distinct=distinct,
        )
        store = self._open_traces()
        try:
            batch = engine.collect(
                policy,
                tasks,
                budget,
                seed=seed,
                policy_version=policy_version,
                regime=regime,
                on_group=on_group,
                name=name,
            )
        finally:
            if store is not None:
                self._trace_mark = store.last_id()
                store.close()
                self.allocator.store = None  # type: ignore[attr-defined]
        self.ledger.add(batch.ledger)
        # planned - started, not planned - left: equal shares (left // tasks) may leave part of it unused
        self.shortfall = 0 if left is None else max(0, planned - batch.started)
        if self.shortfall:
            cut = "it runs no episode" if batch.started == 0 else "its groups are cut short"
            log.warning(
                "epoch %d: the run's rollout_budget of %d leaves %d rollout%s for the %d this epoch's groups "
                "start with: %s (give fewer epochs or a larger rollout_budget)",
                epoch, self.rollout_budget, left, "" if left == 1 else "s", planned, cut,
            )
        return batch

    def _open_traces(self) -> RailTraceStore | None:
        if not isinstance(self.allocator, RailAllocator):
            return None
        self.allocator.store = RailTraceStore(Path(self.plane.run_dir) / "control.db")
        return self.allocator.store

    def metrics(self) -> dict[str, float]:
        """The allocator's metrics and the run's cumulative ledger (``rollout/total_...``)."""
        totals = {k.replace("rollout/", "rollout/total_"): v for k, v in self.ledger.metrics().items()}
        return self.allocator.metrics() | totals

    def state_meta(self, epoch: int) -> dict[str, Any]:
        """The allocator, the ledger and the trace mark after ``epoch``, as the meta values to commit with
        that epoch's checkpoint (``ControlPlane.complete_update(meta=...)``): one transaction, so a kill
        never leaves a checkpoint without its rollout state or the other way round."""
        state = {
            "epoch": epoch,
            "allocator": self.allocator.state_dict(),
            "ledger": self.ledger.state_dict(),
            "trace_mark": self._trace_mark,
        }
        return {ROLLOUT_STATE_KEY: state}

    def committed(self, epoch: int) -> None:
        """``epoch``'s state was committed with its checkpoint."""
        self.saved_epoch = epoch

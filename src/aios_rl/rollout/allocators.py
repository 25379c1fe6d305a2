"""Rollout allocators: who gets how many rollouts, where to branch and how, always within a budget.

The rollout engine drives every allocator through the same calls (reference/rail-and-baselines.md §3.6):

1. ``plan_batch(task_ids, batch_budget)``: a :class:`GroupPlan` per task, with the rollouts to start
   now (reserved from the batch budget) and the group's cap. The engine then gives each group
   ``batch_budget.sub(plan.cap - plan.initial)`` for everything the group spends later.
2. ``branch(anchor, group_budget)`` at each turn boundary of each live rollout: a :class:`BranchPlan`
   (m extra continuations from that state, under a decoding regime) or None.
3. ``expand(trajectories, round_, group_budget)`` once per expansion round after the current rollouts
   finish: fork points for tree search (Tree-GRPO), or [].
4. ``record_gain(plan, base_rewards, branch_rewards)`` once a branch's rollouts are rewarded.
5. ``finish_group(result, group_budget)``: keep the group, top it up, or resample it (DAPO).

Every method that plans rollouts reserves them with :meth:`RolloutBudget.spend` before returning, so a
plan can never exceed the counter it was given. One rollout is one completed trajectory, base or branch,
even though a branch shares its prefix (reference §1.8). Tokens are counted by the engine's ledger.
"""

from __future__ import annotations

import difflib
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from aios_rl.contracts.config import MAX_GROUP_SIZE, MAX_RESAMPLES, ConfigModel
from aios_rl.contracts.episode import DecodingRegime
from aios_rl.contracts.errors import AiosRlError, ConfigError
from aios_rl.rollout.rail import RailConfig, RailController, StepInfo
from aios_rl.rollout.rail_features import ContextInputs, realized_gain, reward_variance
from aios_rl.storage.rail_traces import RailTrace, RailTraceStore

__all__ = [
    "ALLOCATOR_KINDS", "AllocatorConfig", "Allocator", "Anchor", "ArpoAllocator", "BranchPlan",
    "BudgetExceeded", "DapoAllocator", "Expansion", "GroupPlan", "GroupResult", "GroupVerdict",
    "RailAllocator", "RolloutBudget", "TrajectoryShape", "TreeAllocator", "UniformAllocator", "VipAllocator",
    "canonical_allocator_name", "check_rail_cap", "make_allocator", "parse_allocator_name",
    "proportional_allocation",
]

log = logging.getLogger(__name__)


class BudgetExceeded(AiosRlError):
    """A plan tried to spend more rollouts than its budget has left."""


class RolloutBudget:
    """A rollout counter that can never go negative; a child budget also debits its parent.

    Example:
        >>> batch = RolloutBudget(10); group = batch.sub(4); group.spend(3)
        >>> (batch.remaining, group.remaining)
        (7, 1)
    """

    def __init__(self, total: int, parent: RolloutBudget | None = None) -> None:
        if total < 0:
            raise BudgetExceeded(f"a budget needs total >= 0, got {total}")
        self.total, self.spent, self.parent = total, 0, parent

    @property
    def remaining(self) -> int:
        own = self.total - self.spent
        return own if self.parent is None else min(own, self.parent.remaining)

    def spend(self, n: int) -> None:
        if n < 0 or n > self.remaining:
            raise BudgetExceeded(f"cannot spend {n} rollouts: {self.remaining} left of {self.total}")
        self.spent += n
        if self.parent is not None:
            self.parent.spend(n)

    def sub(self, cap: int) -> RolloutBudget:
        """A child budget of at most ``cap`` rollouts, drawn from this one."""
        return RolloutBudget(max(0, cap), parent=self)


# ---------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class GroupPlan:
    """Rollouts to start now for a task, and the most the group may use in total."""

    initial: int
    cap: int


@dataclass(frozen=True)
class Anchor:
    """A candidate branch step: a turn boundary of a live rollout, after the environment's feedback."""

    group_id: str
    task_id: str
    step: int
    inputs: ContextInputs
    parent_reward: float | None = None  # the reward of the finished episode this step belongs to


@dataclass(frozen=True)
class BranchPlan:
    """Fork ``m`` continuations from the anchor's state under ``regime`` (None: the group's own regime, as
    its fresh rollouts use); ``arm`` names the choice."""

    plan_id: str
    m: int
    regime: DecodingRegime | None
    arm: str


@dataclass(frozen=True)
class TrajectoryShape:
    """One finished trajectory of a tree, ``length`` steps long.

    ``fork_step`` is None for a tree's first chain; for an expansion it is the ``Expansion.step`` it was
    forked at, so it shares its parent's first ``fork_step`` steps and owns the states after steps
    ``fork_step + 1 .. length - 1``.
    """

    tree: int
    fork_step: int | None
    length: int


@dataclass(frozen=True)
class Expansion:
    """Continue trajectory ``parent`` from the state after its first ``step`` steps with a new rollout."""

    parent: int
    step: int


@dataclass(frozen=True)
class GroupResult:
    """A group's rewards once its rollouts finished; ``round`` counts earlier resample/top-up rounds."""

    task_id: str
    group_id: str
    rewards: tuple[float, ...]
    round: int = 0


@dataclass(frozen=True)
class GroupVerdict:
    """Train on the group (``keep``); run ``fresh_rollouts`` more that join it or ``replace`` it."""

    keep: bool
    fresh_rollouts: int = 0
    replace: bool = False


class AllocatorConfig(ConfigModel):
    """Hyperparameters of the baseline allocators and of RAIL (defaults: reference §2, guesses marked)."""

    seed: int = Field(default=0, description="Seed of ARPO draws and tree nodes.")
    arpo_initial_fraction: float = Field(default=0.5, gt=0, le=1, description="ARPO: initial rollouts / N.")
    arpo_branch_probability: float = Field(default=0.5, ge=0, le=1, description="ARPO τ, branch_probability.")
    arpo_entropy_weight: float = Field(default=0.2, ge=0, description="ARPO β (entropy_weight).")
    arpo_beam_size: int = Field(
        default=2, ge=2, le=MAX_GROUP_SIZE, description="ARPO beam_size (branches <= it - 1; at most 1024)."
    )
    dapo_max_resamples: int = Field(
        default=2, ge=0, le=MAX_RESAMPLES, description="DAPO: resamples per group (guess; at most 1000)."
    )
    dapo_variance_tol: float = Field(default=1e-12, ge=0, description="DAPO: variance counted as zero.")
    tree_expand_nodes: int = Field(
        default=2, ge=1, le=MAX_GROUP_SIZE,
        description="Tree-GRPO n: nodes per tree per round (at most 1024).",
    )
    tree_iterations: int = Field(default=1, ge=1, description="Tree-GRPO l: expansion rounds.")
    vip_prior_alpha: float = Field(default=1.0, gt=0, description="VIP: Beta prior successes (guess).")
    vip_prior_beta: float = Field(default=1.0, gt=0, description="VIP: Beta prior failures (guess).")
    vip_discount: float = Field(default=0.5, ge=0, le=1, description="VIP: history decay per group (guess).")
    vip_floor: int = Field(default=2, ge=0, description="VIP: fewest rollouts of a funded task.")
    vip_cap_multiple: float = Field(
        default=2.0, ge=1, le=MAX_GROUP_SIZE, description="VIP: cap per task = this x N (at most 1024)."
    )
    vip_success_threshold: float = Field(default=0.5, description="VIP: reward counted as success.")
    rail_base_group: int = Field(
        default=8, ge=1, le=MAX_GROUP_SIZE, description="RAIL G0: base rollouts (guess; at most 1024)."
    )
    rail_cap: int = Field(
        default=32, ge=1, le=MAX_GROUP_SIZE,
        description="RAIL B_max per task when the name has no -N (at most 1024).",
    )
    rail: RailConfig = Field(default_factory=RailConfig, description="RAIL controller settings.")


# ---------------------------------------------------------------------------------------------- allocators


class Allocator:
    """Base allocator: N fresh rollouts per task, no branching, keep every group (GRPO-N)."""

    kind = "uniform"
    forks = False  # True: may branch or expand, so the engine keeps environment snapshots for it

    def __init__(self, n: int, config: AllocatorConfig | None = None) -> None:
        self.n, self.config = n, config or AllocatorConfig()
        self.name: str = f"{self.kind}-{n}"
        self._rng = np.random.default_rng(self.config.seed)

    def group_plan(self, task_id: str) -> GroupPlan:
        """The task's plan when the budget is ample."""
        return GroupPlan(self.n, self.n)

    def plan_batch(self, task_ids: Sequence[str], budget: RolloutBudget) -> dict[str, GroupPlan]:
        """Initial rollouts per task, reserved from ``budget``; a task planned 0 is skipped this batch.

        Every task gets its ``group_plan`` count, all shrunk to ``budget.remaining // len(tasks)`` when the
        budget is short (equal groups keep GRPO's advantages comparable).
        """
        plans = {t: self.group_plan(t) for t in task_ids}
        share = budget.remaining // max(1, len(plans))
        out = {t: GroupPlan(min(p.initial, share), p.cap) for t, p in plans.items()}
        budget.spend(sum(p.initial for p in out.values()))
        return out

    def branch(self, anchor: Anchor, budget: RolloutBudget) -> BranchPlan | None:
        """Whether to fork at ``anchor``; a plan's ``m`` rollouts are already reserved from ``budget``."""
        return None

    def expand(
        self, trajectories: Sequence[TrajectoryShape], round_: int, budget: RolloutBudget
    ) -> list[Expansion]:
        """Fork points for expansion round ``round_`` (0-based) over the group's trajectories, reserved."""
        return []

    def record_gain(
        self, plan: BranchPlan, base_rewards: Sequence[float], branch_rewards: Sequence[float]
    ) -> float:
        """The realized gain of a branch once its rollouts are rewarded (RAIL learns from it)."""
        return realized_gain(base_rewards, branch_rewards)

    def finish_group(self, result: GroupResult, budget: RolloutBudget) -> GroupVerdict:
        """What to do with a finished group; fresh rollouts in the verdict are already reserved."""
        return GroupVerdict(keep=True)

    def metrics(self) -> dict[str, float]:
        """Allocator metrics (RAIL: ``rail/...``)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._rng.bit_generator.state = state["rng"]


class UniformAllocator(Allocator):
    """GRPO-N: N independent rollouts per task, no branching."""

    kind = "uniform"


class DapoAllocator(Allocator):
    """DAPO dynamic sampling (arXiv 2503.14476): a zero-variance group gives no gradient, so drop it and
    draw a fresh group of N for the task, at most ``dapo_max_resamples`` times, then drop it for good.
    DAPO refills the batch with new prompts; re-drawing the same task keeps the batch's task mix (guess)."""

    kind = "dapo"

    def group_plan(self, task_id: str) -> GroupPlan:
        return GroupPlan(self.n, self.n * (1 + self.config.dapo_max_resamples))

    def __init__(self, n: int, config: AllocatorConfig | None = None) -> None:
        super().__init__(n, config)
        self.counts = {"resampled": 0, "dropped": 0}  # the run's
        self.batch_counts = dict.fromkeys(self.counts, 0)  # the latest batch's (plan_batch starts one)

    def plan_batch(self, task_ids: Sequence[str], budget: RolloutBudget) -> dict[str, GroupPlan]:
        self.batch_counts = dict.fromkeys(self.counts, 0)
        return super().plan_batch(task_ids, budget)

    def finish_group(self, result: GroupResult, budget: RolloutBudget) -> GroupVerdict:
        if reward_variance(result.rewards) > self.config.dapo_variance_tol:
            return GroupVerdict(keep=True)
        if result.round < self.config.dapo_max_resamples and budget.remaining >= self.n:
            budget.spend(self.n)
            self._count("resampled")
            return GroupVerdict(keep=False, fresh_rollouts=self.n, replace=True)
        self._count("dropped")
        log.warning("task %s: zero-variance group dropped after %d resamples", result.task_id, result.round)
        return GroupVerdict(keep=False)

    def _count(self, kind: str) -> None:
        self.counts[kind] += 1
        self.batch_counts[kind] += 1

    def metrics(self) -> dict[str, float]:
        """The latest batch's resampled and dropped groups (``rollout/dapo_*``, as the epoch's own ledger) and
        the run's (``rollout/total_dapo_*``, as the ledger's totals)."""
        batch = {f"rollout/dapo_{k}_groups": float(v) for k, v in self.batch_counts.items()}
        return batch | {f"rollout/total_dapo_{k}_groups": float(v) for k, v in self.counts.items()}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "counts": dict(self.counts)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.counts = dict(state["counts"])


class ArpoAllocator(Allocator):
    """ARPO (arXiv 2507.19849, code ``vllm_rollout_with_tools.py``): start N·fraction rollouts; after each
    tool result, ΔH = H_now − H_first (normalized), and each of beam_size−1 candidate branches forks iff
    u − β·ΔH <= τ with u ~ U(0, 1), i.e. with probability clip(τ + β·ΔH, 0, 1). Free slots are finally
    filled with fresh rollouts from the prompt."""

    kind = "arpo"
    forks = True

    def group_plan(self, task_id: str) -> GroupPlan:
        return GroupPlan(max(1, round(self.n * self.config.arpo_initial_fraction)), self.n)

    def branch(self, anchor: Anchor, budget: RolloutBudget) -> BranchPlan | None:
        c = self.config
        ent = anchor.inputs.normalized_entropies()
        delta_h = float(ent[-1] - ent[0])
        draws = self._rng.random(c.arpo_beam_size - 1)
        wins = int(np.sum(draws - c.arpo_entropy_weight * delta_h <= c.arpo_branch_probability))
        m = min(wins, budget.remaining)
        if m < 1:
            return None
        budget.spend(m)
        return BranchPlan(uuid.uuid4().hex, m, None, f"m{m}")  # branches sample as the group's rollouts do

    def finish_group(self, result: GroupResult, budget: RolloutBudget) -> GroupVerdict:
        fresh = min(self.n - len(result.rewards), budget.remaining)
        if fresh <= 0:
            return GroupVerdict(keep=True)
        budget.spend(fresh)
        return GroupVerdict(keep=True, fresh_rollouts=fresh)


class TreeAllocator(Allocator):
    """Tree-GRPO (arXiv 2509.21240, ``expand_mode=random``): m = N // (1 + n·l) trees of one chain each;
    each of l rounds expands n nodes per tree drawn uniformly with replacement from the tree's root and
    inner nodes, each with one new full rollout. All leaves are kept (their k = 1 + n·l)."""

    kind = "tree"
    forks = True

    def group_plan(self, task_id: str) -> GroupPlan:
        c = self.config
        return GroupPlan(max(1, self.n // (1 + c.tree_expand_nodes * c.tree_iterations)), self.n)

    def expand(
        self, trajectories: Sequence[TrajectoryShape], round_: int, budget: RolloutBudget
    ) -> list[Expansion]:
        if round_ >= self.config.tree_iterations:
            return []
        nodes: dict[int, list[Expansion]] = {}
        for j, t in enumerate(trajectories):  # a node is owned by the trajectory that first reached it
            first = 0 if t.fork_step is None else t.fork_step + 1
            nodes.setdefault(t.tree, []).extend(Expansion(j, s) for s in range(first, t.length))
        out: list[Expansion] = []
        for tree in sorted(nodes):
            for _ in range(self.config.tree_expand_nodes):
                if len(out) < budget.remaining and nodes[tree]:
                    out.append(nodes[tree][int(self._rng.integers(len(nodes[tree])))])
        budget.spend(len(out))
        return out


def proportional_allocation(weights: Sequence[float], total: int, floor: int, cap: int) -> list[int]:
    """Integers n_i with Σ n_i <= total, n_i = 0 or floor <= n_i <= cap, extra shares ∝ weights.

    When ``total`` cannot give every task its floor, only the ``total // floor`` highest-weight tasks are
    funded (VIP drops the rest) and they share the whole of ``total`` as below. Every funded task gets the
    floor, the rest is water-filled ∝ weight under the cap, and the fractions are rounded by largest
    remainder, so Σ n_i = ``total`` unless the funded tasks' caps are reached first.
    """
    k, a = len(weights), np.asarray(weights, dtype=np.float64)
    if k == 0 or total <= 0 or cap <= 0:
        return [0] * k
    floor = min(floor, cap)
    if floor * k > total:  # floor >= 1 here
        funded = sorted(sorted(range(k), key=lambda i: (-a[i], i))[: total // floor])
        counts = [0] * k
        shares = proportional_allocation(a[funded].tolist(), total, floor, cap)
        for i, n_i in zip(funded, shares, strict=True):
            counts[i] = n_i
        return counts
    extra, room, left = np.zeros(k), np.full(k, float(cap - floor)), float(total - floor * k)
    active = room > 0
    while left > 1e-9 and active.any():
        share = a * active
        share = share / share.sum() if share.sum() > 0 else active / active.sum()
        give = np.minimum(share * left, room - extra)
        extra += give
        left -= give.sum()
        active &= extra < room - 1e-9
    n = np.floor(extra + 1e-9).astype(int)
    spare = min(total - floor * k - int(n.sum()), int(np.sum(room - n)))
    for i in sorted(range(k), key=lambda i: (-(extra[i] - n[i]), i)):
        if spare <= 0:
            break
        if n[i] < room[i]:
            n[i] += 1
            spare -= 1
    return [int(floor + v) for v in n]


class VipAllocator(Allocator):
    """VIP (arXiv 2602.01601): split N·K rollouts ∝ p(1 − p), the gradient variance of a Bernoulli task.
    p is the Beta(α0, β0) posterior mean of the task's discounted success history, standing in for VIP's
    embedding GP; the floor/cap and largest-remainder rounding stand in for its SLSQP + greedy rounding."""

    kind = "vip"

    def __init__(self, n: int, config: AllocatorConfig | None = None) -> None:
        super().__init__(n, config)
        self.history: dict[str, list[float]] = {}  # task -> [discounted successes, discounted attempts]

    def success_rate(self, task_id: str) -> float:
        c = self.config
        s, n = self.history.get(task_id, (0.0, 0.0))
        return (c.vip_prior_alpha + s) / (c.vip_prior_alpha + c.vip_prior_beta + n)

    def plan_batch(self, task_ids: Sequence[str], budget: RolloutBudget) -> dict[str, GroupPlan]:
        c, tasks = self.config, list(dict.fromkeys(task_ids))
        weights = [(p := self.success_rate(t)) * (1 - p) for t in tasks]
        total = min(self.n * len(tasks), budget.remaining)
        cap = max(1, int(c.vip_cap_multiple * self.n))
        counts = proportional_allocation(weights, total, c.vip_floor, cap)
        budget.spend(sum(counts))
        return {t: GroupPlan(k, k) for t, k in zip(tasks, counts)}

    def finish_group(self, result: GroupResult, budget: RolloutBudget) -> GroupVerdict:
        c = self.config
        s, n = self.history.get(result.task_id, (0.0, 0.0))
        wins = sum(r >= c.vip_success_threshold for r in result.rewards)
        self.history[result.task_id] = [c.vip_discount * s + wins, c.vip_discount * n + len(result.rewards)]
        return GroupVerdict(keep=True)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "history": self.history}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.history = {k: list(v) for k, v in state["history"].items()}


class RailAllocator(Allocator):
    """RAIL: G0 base rollouts, then the :class:`RailController` decides at each anchor (cap B_max = N).
    Realized gains become traces for the controller and, when a store is given, rows in ``control.db``.
    Branches still in flight are not checkpointed: checkpoint between training steps."""

    kind = "rail"
    forks = True

    def __init__(
        self, n: int, config: AllocatorConfig | None = None, store: RailTraceStore | None = None
    ) -> None:
        super().__init__(n, config)
        self.controller, self.store = RailController(self.config.rail), store
        self._pending: dict[str, tuple[Anchor, tuple[float, ...], str]] = {}

    def group_plan(self, task_id: str) -> GroupPlan:
        return GroupPlan(min(self.config.rail_base_group, self.n), self.n)

    def branch(self, anchor: Anchor, budget: RolloutBudget) -> BranchPlan | None:
        z = self.controller.context(anchor.inputs)
        entropy = float(anchor.inputs.normalized_entropies()[-1])
        info = StepInfo(anchor.group_id, anchor.task_id, anchor.step, entropy, budget.remaining)
        decision = self.controller.decide(z, info)
        if decision.arm.is_null:
            return None
        budget.spend(decision.arm.m)
        arm = decision.arm
        plan = BranchPlan(uuid.uuid4().hex, arm.m, arm.regime, arm.name)
        self._pending[plan.plan_id] = (anchor, tuple(float(v) for v in z), decision.mode)
        return plan

    def record_gain(
        self, plan: BranchPlan, base_rewards: Sequence[float], branch_rewards: Sequence[float]
    ) -> float:
        y = realized_gain(base_rewards, branch_rewards)
        anchor, z, mode = self._pending.pop(plan.plan_id)
        trace = RailTrace(
            z=z, arm=plan.arm, y=y, hidden=anchor.inputs.hidden, task_id=anchor.task_id,
            group_id=anchor.group_id, step=anchor.step, mode=mode,  # type: ignore[arg-type]
            base_rewards=tuple(float(r) for r in base_rewards),
            branch_rewards=tuple(float(r) for r in branch_rewards), parent_reward=anchor.parent_reward,
        )
        self.controller.observe(trace)
        if self.store is not None:
            self.store.append(trace)
        return y

    def finish_group(self, result: GroupResult, budget: RolloutBudget) -> GroupVerdict:
        self.controller.end_group(result.group_id)
        lost = [k for k, (anchor, _, _) in self._pending.items() if anchor.group_id == result.group_id]
        for key in lost:
            del self._pending[key]
        if lost:
            log.warning("group %s finished with %d RAIL branches never rewarded", result.group_id, len(lost))
        return GroupVerdict(keep=True)

    def metrics(self) -> dict[str, float]:
        return self.controller.diagnostics()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "controller": self.controller.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.controller.load_state_dict(state["controller"])


# ---------------------------------------------------------------------------------------------- names

_CLASSES: dict[str, type[Allocator]] = {
    c.kind: c
    for c in (UniformAllocator, DapoAllocator, ArpoAllocator, TreeAllocator, VipAllocator, RailAllocator)
}
ALLOCATOR_KINDS: tuple[str, ...] = tuple(_CLASSES)
_ALIASES = {"grpo": "uniform"}  # GRPO-N in the papers' tables is uniform-N here
_NAME = re.compile(r"^([a-z]+)(?:-(\d+))?$")


def parse_allocator_name(name: str) -> tuple[str, int | None]:
    """``"dapo-16"`` → ("dapo", 16); ``"rail"`` → ("rail", None). Raises ConfigError with a did-you-mean."""
    text = name.strip().lower()
    match = _NAME.match(text)
    kind = match.group(1) if match else re.split(r"[^a-z]", text)[0]
    kind = _ALIASES.get(kind, kind)
    if kind not in _CLASSES:
        close = difflib.get_close_matches(kind, ALLOCATOR_KINDS, n=1)
        size = match.group(2) if match and match.group(2) else "8"
        hint = (f"; did you mean '{close[0] if close[0] == 'rail' else close[0] + '-' + size}'?" if close
                else f"; valid: {', '.join(f'{k}-N' for k in ALLOCATOR_KINDS)} or rail")
        raise ConfigError(f"unknown allocator {name!r}{hint}")
    # a name to copy: rail-8 would start at the default base group of 8 and never branch (check_rail_cap)
    example = f"rail-{AllocatorConfig().rail_cap}" if kind == "rail" else f"{kind}-8"
    if match is None:
        raise ConfigError(f"allocator {name!r}: expected '{kind}-N' with an integer N >= 1, e.g. '{example}'")
    n = None if match.group(2) is None else int(match.group(2))
    if n is None and kind != "rail":
        raise ConfigError(f"allocator {name!r} needs a group size: '{kind}-N', e.g. '{example}'")
    if n is not None and n < 1:
        raise ConfigError(f"allocator {name!r}: N must be >= 1, e.g. '{example}'")
    if n is not None and n > MAX_GROUP_SIZE:  # a typo: a group this large would never finish
        raise ConfigError(f"allocator {name!r}: N must be at most {MAX_GROUP_SIZE} (rollouts of one task), "
                          f"e.g. '{example}'")
    return kind, n


def canonical_allocator_name(name: str, rail_cap: int) -> str:
    """The one name of what ``make_allocator(name)`` builds, with ``rail_cap`` as its config's:
    ``"Dapo-3"`` → ``"dapo-3"``, ``"grpo-4"`` → ``"uniform-4"``, ``"rail"`` → ``"rail-<rail_cap>"``.
    Raises ConfigError as :func:`parse_allocator_name` does."""
    kind, n = parse_allocator_name(name)
    return f"{kind}-{n or rail_cap}"


def check_rail_cap(name: str, config: AllocatorConfig) -> None:
    """Refuse a RAIL allocator that can never branch: a group starts with ``min(rail_base_group, N)``
    rollouts and branches only up to the cap N, so with N <= rail_base_group it is uniform-N by another name.

    Raises:
        ConfigError: ``name`` is rail-N (or rail, with ``rail_cap`` as N) and N <= ``rail_base_group``.
    """
    kind, n = parse_allocator_name(name)
    cap, base = n or config.rail_cap, config.rail_base_group
    if kind == "rail" and cap <= base:
        source = f"N = {cap}" if n else f"allocation.rail_cap = {cap} ('rail' alone)"
        raise ConfigError(
            f"allocator {name!r}: RAIL starts each group with its base group of {base} rollouts "
            f"(allocation.rail_base_group) and branches only up to the cap {source}, so it would never "
            f"branch and run as uniform-{cap}; use rail-N with N > {base} (e.g. rail-{4 * base}), a smaller "
            f"allocation.rail_base_group, or uniform-{cap}"
        )


def make_allocator(
    name: str, config: AllocatorConfig | None = None, *, store: RailTraceStore | None = None
) -> Allocator:
    """Build an allocator by name: uniform-N, dapo-N, arpo-N, tree-N, vip-N, rail or rail-N."""
    kind, n = parse_allocator_name(name)
    config = config or AllocatorConfig()
    if kind == "rail":
        return RailAllocator(n or config.rail_cap, config, store)
    return _CLASSES[kind](n, config)  # type: ignore[arg-type]

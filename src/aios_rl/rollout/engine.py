"""The rollout engine: runs an allocator's plans for a batch of tasks, branching from environment snapshots.

One call to :meth:`RolloutEngine.collect` drives every allocator through the calls documented in
:mod:`aios_rl.rollout.allocators`, for all groups of the batch at once:

1. ``plan_batch``: each task's initial rollouts. All of them run together in one lockstep
   :func:`~aios_rl.rollout.runner.run_rollouts` call (one batched ``policy.act`` per step and regime).
2. Per group, one decision at a time, and all groups' resulting jobs again in one lockstep call per round:

   * **anchors**: every turn boundary of the group's finished trajectories, in time order (step index,
     then arrival): ``branch(anchor)``. A plan forks m continuations from the snapshot taken before that
     step's action, under the plan's decoding regime (the group's own when the plan names none). Once
     they finish, ``record_gain(plan, base, new)`` gets y = I(group ∪ new) − I(group) with I the reward
     variance, the group being everything that had finished before. The branches' own turn boundaries
     join the queue. Deciding one anchor at a time after the base rollouts finished is RAIL's
     "accept-or-stop" reading (reference §1.4): each decision sees the group's rewards so far (z[5:9])
     and the gains realized before it. Branching later from a snapshot is the same as branching at the
     time: the restored state is exactly the parent's.
   * **expansions** (Tree-GRPO): ``expand(shapes, round)`` while it returns fork points.
   * **finish**: ``finish_group``; fresh rollouts join the group (ARPO top-up) or replace it (DAPO), and
     the group goes back to its anchors; otherwise the group is done and kept or dropped.

Turn boundaries are the states after step 1, 2, ... (after an action's environment feedback; ARPO
branches after tool results); step 0 is the reset state, where a branch is just a fresh rollout, so only
tree expansions use it. A branched episode's trajectory is its parent's first k steps (the same records)
plus its own, with ``branch_of = (parent episode, k)``; it joins its task's GRPO group as an ordinary
member ("soft" prefix attribution, as ARPO and RAIL do: reference §1.7).
"""

from __future__ import annotations

import heapq
import math
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from aios_rl.contracts.episode import DecodingRegime, Episode, Step, Task
from aios_rl.contracts.errors import ContractError
from aios_rl.contracts.protocols import Teacher
from aios_rl.control.reward import RewardConfig
from aios_rl.policy.base import Policy
from aios_rl.rollout.allocators import (
    Allocator,
    Anchor,
    BranchPlan,
    GroupPlan,
    GroupResult,
    RolloutBudget,
    TrajectoryShape,
)
from aios_rl.rollout.budget import ActMetrics, Budget
from aios_rl.rollout.rail_features import ContextInputs, reward_variance
from aios_rl.rollout.runner import DistinctMode, EnvFactory, Fork, Rollout, RolloutJob, run_rollouts

__all__ = ["BatchResult", "EpisodeNamer", "GroupOutcome", "RolloutEngine"]

ZERO_VARIANCE = 1e-12

EpisodeNamer = Callable[[Task, int], str]
"""``name(task, index)``: the id of the ``index``-th episode (0-based, in arrival order over every round,
discarded ones included) of ``task``'s group."""


@dataclass
class GroupOutcome:
    """A finished group: the episodes to train on, and what else it cost.

    Attributes:
        episodes: the group's members in arrival order (base, branches, fresh top-ups).
        discarded: episodes of earlier rounds that a resample replaced (never trained on).
        keep: False when the allocator dropped the group (then ``episodes`` are not trained on either).
        gains: realized gains of the group's branch plans, in decision order.
    """

    task: Task
    group_id: str
    episodes: list[Episode]
    discarded: list[Episode]
    keep: bool
    gains: list[float]

    @property
    def zero_variance(self) -> bool:
        return reward_variance([e.reward for e in self.episodes]) < ZERO_VARIANCE


@dataclass
class BatchResult:
    """Every group of one ``collect`` call, the ledger of what it consumed, what the policy reported
    about its ``act`` calls (``act_metrics.means()``: the ``policy/*`` metrics of the batch) and the rollouts
    the groups started with (``started``: the allocator's ``plan_batch``, within the budget)."""

    groups: list[GroupOutcome]
    ledger: Budget
    act_metrics: ActMetrics = field(default_factory=ActMetrics)
    started: int = 0

    def training_batch(self) -> tuple[list[Episode], list[int]]:
        """Episodes of the kept groups and the group index of each (for GRPO advantages)."""
        episodes, index = [], []
        for g, group in enumerate(g for g in self.groups if g.keep):
            episodes.extend(group.episodes)
            index.extend([g] * len(group.episodes))
        return episodes, index

    def all_episodes(self) -> list[Episode]:
        """Every episode run, kept or not."""
        return [e for g in self.groups for e in (*g.discarded, *g.episodes)]

    @property
    def zero_variance_share(self) -> float:
        """Share of groups whose final rewards had zero variance (dropped groups included)."""
        return sum(g.zero_variance for g in self.groups) / len(self.groups) if self.groups else 0.0


class RolloutEngine:
    """Runs an allocator's rollout plans with batched inference, parallel workers and snapshot branching.

    Args:
        make_env: builds one environment (with ``snapshot``/``restore`` when the allocator forks).
        allocator: any :class:`~aios_rl.rollout.allocators.Allocator` (``make_allocator(name)``).
        max_steps: the environment's step limit (RAIL's progress feature).
        distinct: how a task's rollouts draw actions: off, first or states (``run_rollouts``).

    Example:
        >>> engine = RolloutEngine(make_env, make_allocator("rail-16"), max_steps=12)
        >>> batch = engine.collect(policy, tasks, RolloutBudget(16 * len(tasks)), seed=0, policy_version="c0")
        >>> episodes, groups = batch.training_batch()
    """

    def __init__(
        self,
        make_env: EnvFactory,
        allocator: Allocator,
        *,
        max_steps: int,
        workers: int = 2,
        teacher: Teacher | None = None,
        reward_config: RewardConfig | None = None,
        distinct: DistinctMode = "off",
    ) -> None:
        self.make_env, self.allocator, self.max_steps = make_env, allocator, max_steps
        self.workers, self.teacher, self.reward_config = workers, teacher, reward_config
        self.distinct = distinct  # off / first / states: how a task's rollouts draw actions (run_rollouts)

    def collect(
        self,
        policy: Policy,
        tasks: Sequence[Task],
        budget: RolloutBudget,
        *,
        seed: int,
        policy_version: str,
        regime: DecodingRegime | None = None,
        ledger: Budget | None = None,
        on_group: Callable[[GroupOutcome], None] | None = None,
        name: EpisodeNamer | None = None,
    ) -> BatchResult:
        """Run one batch of task groups within ``budget`` (rollouts); ``on_group`` sees each as it ends.

        ``name`` gives each episode its id as it joins its group (a branch's ``branch_of`` names its parent
        by that id), so a batch run again with the same seed names its episodes as before; without it the
        ids are random.

        The ledger's ``wall_s`` grows by this call's whole duration (rollouts and the allocator's decisions,
        RAIL's refits included) less the time spent in ``on_group``."""
        start, callbacks = time.perf_counter(), 0.0
        ids = [t.task_id for t in tasks]
        if len(set(ids)) != len(ids):
            raise ContractError(f"a batch needs distinct tasks, got {ids}")
        regime = regime or DecodingRegime()
        ledger = ledger if ledger is not None else Budget()
        act_metrics = ActMetrics()
        wall_before = ledger.wall_s  # run_rollouts adds its own share; the total below replaces it
        seeds, generator = random.Random(seed), torch.Generator().manual_seed(seed)
        plans = self.allocator.plan_batch(ids, budget)
        vocab = getattr(policy, "vocab_size", None)  # a policy writing tokens: log|V| bounds their entropy
        token_entropy_max = math.log(vocab) if vocab and vocab > 1 else None
        groups = [
            _Group(t, plans[t.task_id], budget, regime, self.max_steps, token_entropy_max, name)
            for t in tasks
        ]
        pending = {g: g.fresh(g.plan.initial, seeds) for g in groups if g.plan.initial > 0}  # 0: skipped
        outcomes: dict[_Group, GroupOutcome] = {}
        while pending:
            jobs = [job for js in pending.values() for job in js]
            rollouts = iter(
                run_rollouts(
                    jobs,
                    self.make_env,
                    policy,
                    policy_version=policy_version,
                    generator=generator,
                    teacher=self.teacher,
                    reward_config=self.reward_config,
                    workers=self.workers,
                    budget=ledger,
                    snapshots=self.allocator.forks,
                    distinct=self.distinct,
                    act_metrics=act_metrics,
                )
            )
            finished = {g: [next(rollouts) for _ in js] for g, js in pending.items()}
            pending = {}
            for g, done in finished.items():
                g.absorb(done, self.allocator)
                more = g.next_jobs(self.allocator, seeds)
                if more:
                    pending[g] = more
                    continue
                outcomes[g] = g.outcome()
                ledger.discarded += len(g.discarded) + (0 if g.keep else len(g.members))
                if on_group is not None:
                    called = time.perf_counter()
                    on_group(outcomes[g])
                    callbacks += time.perf_counter() - called
        ledger.wall_s = wall_before + time.perf_counter() - start - callbacks
        started = sum(g.plan.initial for g in groups)
        return BatchResult([outcomes[g] for g in groups if g in outcomes], ledger, act_metrics, started)


@dataclass(eq=False)
class _Group:
    """One task's group while it runs: members, the anchor queue and where it is in the allocator calls."""

    task: Task
    plan: GroupPlan
    batch_budget: RolloutBudget
    regime: DecodingRegime
    max_steps: int
    token_entropy_max: float | None = None  # log|V| of a policy that writes its actions
    name: EpisodeNamer | None = None  # the ids of the group's episodes (None: the random ones they have)
    group_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    members: list[Rollout] = field(default_factory=list)
    shapes: list[TrajectoryShape] = field(default_factory=list)
    discarded: list[Rollout] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)
    keep: bool = True

    def __post_init__(self) -> None:
        # Everything after the initial rollouts is drawn from the batch through the group's own counter.
        self.budget = self.batch_budget.sub(self.plan.cap - self.plan.initial)
        self._anchors: list[tuple[int, int, int]] = []  # heap of (step, arrival, member index)
        self._arrivals = self._trees = self._expand_round = self._finish_round = 0
        self._open: BranchPlan | None = None

    def fresh(self, n: int, seeds: random.Random) -> list[RolloutJob]:
        return [RolloutJob(self.task, seeds.randrange(1 << 30), self.regime) for _ in range(n)]

    def absorb(self, rollouts: list[Rollout], allocator: Allocator) -> None:
        """Add finished rollouts; the gain of the branch plan they came from is realized now."""
        if self._open is not None:
            base = [m.episode.reward for m in self.members]
            self.gains.append(allocator.record_gain(self._open, base, [r.episode.reward for r in rollouts]))
            self._open = None
        for rollout in rollouts:
            self._add(rollout, allocator.forks)

    def _add(self, rollout: Rollout, forks: bool) -> None:
        if self.name is not None:  # before any branch of it is forked, so its branches name it so too
            arrived = len(self.discarded) + len(self.members)  # every episode the group has had so far
            episode_id = self.name(self.task, arrived)
            rollout.episode = rollout.episode.model_copy(update={"episode_id": episode_id})
        j, fork, length = len(self.members), rollout.job.fork, len(rollout.episode.trajectory)
        if fork is None:
            tree, first = self._trees, 1
            self._trees += 1
        else:
            tree, first = self.shapes[self._index(fork.parent)].tree, fork.step + 1
        self.members.append(rollout)
        self.shapes.append(TrajectoryShape(tree, None if fork is None else fork.step, length))
        for k in range(first, length) if forks else ():
            heapq.heappush(self._anchors, (k, self._arrivals, j))
            self._arrivals += 1

    def _index(self, rollout: Rollout) -> int:
        return next(i for i, m in enumerate(self.members) if m is rollout)

    def next_jobs(self, allocator: Allocator, seeds: random.Random) -> list[RolloutJob]:
        """The group's next jobs: a branch plan, a tree expansion or fresh rollouts; [] when it is done."""
        while self._anchors:
            k, _, j = heapq.heappop(self._anchors)
            plan = allocator.branch(self._anchor(j, k), self.budget)
            if plan is not None:
                self._open, parent = plan, self.members[j]
                regime = self.regime if plan.regime is None else plan.regime
                return [RolloutJob(self.task, parent.job.seed, regime, Fork(parent, k))] * plan.m
        expansions = allocator.expand(self.shapes, self._expand_round, self.budget) if allocator.forks else []
        if expansions:
            self._expand_round += 1
            forks = [Fork(self.members[e.parent], e.step) for e in expansions]
            return [RolloutJob(self.task, f.parent.job.seed, self.regime, f) for f in forks]
        rewards = tuple(m.episode.reward for m in self.members)
        verdict = allocator.finish_group(
            GroupResult(self.task.task_id, self.group_id, rewards, self._finish_round), self.budget
        )
        if verdict.fresh_rollouts:
            self._finish_round += 1
            if verdict.replace:
                self.discarded += self.members
                self.members, self.shapes, self._anchors, self._trees = [], [], [], 0
            return self.fresh(verdict.fresh_rollouts, seeds)
        self.keep = verdict.keep
        return []

    def _anchor(self, j: int, k: int) -> Anchor:
        rollout = self.members[j]
        steps = rollout.episode.trajectory
        inputs = ContextInputs(
            step_entropies=tuple(_normalized_entropy(s, self.token_entropy_max) for s in steps[: k + 1]),
            anchor_logprob=_action_logprob(steps[k]),
            group_rewards=tuple(m.episode.reward for m in self.members),
            base_group_size=max(1, self.plan.initial),
            max_steps=self.max_steps,
            budget_left=self.budget.remaining,
            budget_total=max(1, self.plan.cap),
            hidden=rollout.hidden[k],
            max_entropy=1.0,  # each entropy is already divided by the log of its step's action-space size
        )
        return Anchor(self.group_id, self.task.task_id, k, inputs, rollout.episode.reward)

    def outcome(self) -> GroupOutcome:
        return GroupOutcome(
            self.task,
            self.group_id,
            [m.episode for m in self.members],
            [m.episode for m in self.discarded],
            self.keep,
            self.gains,
        )


def _written(step: Step) -> bool:
    """Whether the policy wrote this action token by token (an LM in generate mode, whose action
    log-probability is the sum of its token log-probabilities) rather than choosing it among candidates (the
    compact student; an LM in score mode, whose log-probability is normalised over the candidates)."""
    tokens = step.token_logprobs
    return bool(tokens) and math.isclose(step.logprob, sum(tokens), rel_tol=1e-9, abs_tol=1e-9)


def _action_logprob(step: Step) -> float:
    """RAIL's anchor log-probability: per token for a written action, else the whole chosen action's."""
    if _written(step):
        return min(0.0, step.logprob / len(step.token_logprobs or ()))
    return min(0.0, step.logprob)


def _normalized_entropy(step: Step, token_entropy_max: float | None) -> float:
    """The step's entropy over the log of its action-space size: log|V| for a written action (its entropy is
    the mean token entropy; 1 when the policy does not say its vocabulary size), log(#candidates) else."""
    if _written(step):
        return step.entropy / (token_entropy_max or 1.0)
    candidates = len(step.observation.candidates)
    return step.entropy / (math.log(candidates) if candidates > 1 else 1.0)

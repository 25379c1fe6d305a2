"""The interfaces the parts of aios-rl meet at (ARCHITECTURE §6–§8).

Protocols, not base classes: an environment, policy, teacher, task source or allocator only has to have
these methods. They carry no torch and no SQL so that every layer can import them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from aios_rl.contracts.episode import (
    DecodingRegime,
    Episode,
    Observation,
    StepResult,
    Task,
    TeacherSignal,
    Verification,
)


@runtime_checkable
class Env(Protocol):
    """A text environment: reset to a task, step with action text, snapshot for branching, verify."""

    env_id: str
    version: str

    def reset(self, task: Task, *, seed: int) -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def snapshot(self) -> Any: ...

    def restore(self, state: Any) -> None: ...

    def verify(self) -> Verification: ...

    def close(self) -> None: ...


class PolicySample(Protocol):
    """One action chosen by a policy, with what training and RAIL need about it."""

    action: str
    logprob: float
    entropy: float


@runtime_checkable
class Policy(Protocol):
    """A student: chooses actions for a batch of observations; its training lives elsewhere."""

    def act(self, observations: Sequence[Observation], regime: DecodingRegime) -> Sequence[PolicySample]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> Any: ...


@runtime_checkable
class Teacher(Protocol):
    """Critiques an episode of a task; never raises for backend failures (status says what happened)."""

    def signal(self, task: Task, episode: Episode) -> TeacherSignal: ...


@runtime_checkable
class TaskSource(Protocol):
    """Yields tasks of one split."""

    def tasks(self, split: str) -> Iterator[Task]: ...


@runtime_checkable
@runtime_checkable
class Allocator(Protocol):
    """Decides how many rollouts a task group gets, where to branch and under which regime.

    The rollout engine (``rollout/engine.py``) calls these in order: ``plan_batch`` once per batch, then,
    as rollouts run, ``branch`` at each anchor (a step after environment feedback) and ``expand`` between
    expansion rounds, ``record_gain`` when a branch's rollouts are rewarded, and ``finish_group`` when a
    task's group is done (keep it, drop it, or resample). Every rollout a method returns is already
    reserved from the budget passed in. The plan records (``GroupPlan``, ``Anchor``, ``BranchPlan``,
    ``TrajectoryShape``, ``Expansion``, ``GroupResult``, ``GroupVerdict``) and the budget live in
    ``rollout/allocators.py``; the base class there implements the no-branching default (GRPO-N).
    """

    name: str  # e.g. "uniform-16", "rail"
    forks: bool  # True: may branch or expand, so the engine keeps environment snapshots

    def plan_batch(self, task_ids: Sequence[str], budget: Any) -> dict[str, Any]: ...

    def branch(self, anchor: Any, budget: Any) -> Any | None: ...

    def expand(self, trajectories: Sequence[Any], round_: int, budget: Any) -> list[Any]: ...

    def record_gain(self, plan: Any, base_rewards: Sequence[float], branch_rewards: Sequence[float]) -> float: ...

    def finish_group(self, result: Any, budget: Any) -> Any: ...

    def metrics(self) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

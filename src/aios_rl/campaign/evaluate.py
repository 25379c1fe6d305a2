"""Evaluate a policy on a task set: success overall, per family, and per holdout kind."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aios_rl.contracts.episode import DecodingRegime, Episode, Task
from aios_rl.contracts.protocols import Env
from aios_rl.policy.base import Policy
from aios_rl.rollout.budget import Budget
from aios_rl.rollout.runner import run_group

GREEDY = DecodingRegime(name="greedy", temperature=1e-4, top_p=1.0)


@dataclass
class EvalResult:
    success_rate: float
    episodes: int
    by_family: dict[str, float]
    by_group: dict[str, float] = field(default_factory=dict)
    mean_reward: float = 0.0
    checkpoint: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "success_rate": self.success_rate,
            "episodes": self.episodes,
            "by_family": self.by_family,
            "by_group": self.by_group,
            "mean_reward": self.mean_reward,
            "checkpoint": self.checkpoint,
        }


def _rate(episodes: Sequence[Episode]) -> float:
    return sum(e.outcome == "success" for e in episodes) / len(episodes) if episodes else 0.0


def evaluate(
    policy: Policy,
    tasks: Sequence[Task],
    make_env: Callable[[], Env],
    *,
    samples: int = 1,
    seed: int = 0,
    regime: DecodingRegime = GREEDY,
    version: str = "eval",
    group_of: Callable[[Task], str] | None = None,
    workers: int = 2,
    on_task: Callable[[Task, list[Episode]], None] | None = None,
) -> EvalResult:
    """Run every task ``samples`` times with no teacher and no updates.

    ``group_of`` names a reporting group per task (e.g. ``unseen_mutants`` vs ``unseen_repos``).
    """
    by_family: dict[str, list[Episode]] = defaultdict(list)
    by_group: dict[str, list[Episode]] = defaultdict(list)
    everything: list[Episode] = []
    budget = Budget()
    for i, task in enumerate(tasks):
        episodes = run_group(
            make_env, task, policy, size=samples, seed=seed + 1000 * i, policy_version=version,
            regime=regime, workers=workers, budget=budget,
        )
        everything.extend(episodes)
        by_family[task.family].extend(episodes)
        if group_of is not None:
            by_group[group_of(task)].extend(episodes)
        if on_task is not None:
            on_task(task, episodes)
    return EvalResult(
        success_rate=_rate(everything),
        episodes=len(everything),
        by_family={k: _rate(v) for k, v in sorted(by_family.items())},
        by_group={k: _rate(v) for k, v in sorted(by_group.items())},
        mean_reward=sum(e.reward for e in everything) / len(everything) if everything else 0.0,
        checkpoint=version,
    )

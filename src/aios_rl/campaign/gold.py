"""Gold sets for judge calibration, rolled out from a task directory.

For every task, two episodes: one that follows the oracle's reference fix whenever it is offered (mostly
successes) and one from the uniform-random candidate policy (mostly failures), so a teacher is scored on
both kinds. Episodes carry their verification; the oracle judges them from the reference patch.
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence
from pathlib import Path

import torch

from aios_rl.contracts.episode import DecodingRegime, Episode, Observation, Task
from aios_rl.contracts.errors import ConfigError
from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.oracle import reference_action
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import load_tasks
from aios_rl.policy.base import ActionSample
from aios_rl.policy.uniform import UniformPolicy
from aios_rl.rollout.runner import run_group


class ReferencePolicy(UniformPolicy):
    """Takes the reference action when it is a candidate, otherwise acts uniformly at random."""

    def __init__(self, action: str | None) -> None:
        self.action = action

    def act(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        regime: DecodingRegime,
        generator: torch.Generator | None = None,
        distinct: Sequence[Hashable | None] | None = None,
        drawn: MutableMapping[Hashable, set[str]] | None = None,
    ) -> list[ActionSample]:
        random_samples = super().act(observations, environments, regime, generator, distinct, drawn)
        return [
            ActionSample(self.action, obs.candidates.index(self.action), 0.0, 0.0, 0.0)
            if self.action in obs.candidates else sample
            for obs, sample in zip(observations, random_samples)
        ]


def gold_from_tasks(tasks_dir: Path, *, seed: int = 0, limit: int | None = None) -> list[tuple[Task, Episode]]:
    """Roll out the reference-following and the random episode of each task (at most ``limit`` tasks).

    Raises:
        ConfigError: ``limit`` below 1, or no task in ``tasks_dir``.
    """
    if limit is not None and limit < 1:  # a slice would silently drop tasks from the end (or take none)
        raise ConfigError(f"--gold-limit must be >= 1, got {limit} (leave it out to use every task)")
    tasks = load_tasks(tasks_dir)[:limit]
    if not tasks:
        raise ConfigError(f"{tasks_dir} holds no tasks to build a gold set from")
    sandbox = Sandbox()
    config = ShellEnvConfig()
    pairs = []
    for i, task in enumerate(tasks):
        for policy, version in ((ReferencePolicy(reference_action(task)), "gold-reference"), (UniformPolicy(), "gold-random")):
            (episode,) = run_group(lambda: ShellBugfixEnv(config, sandbox=sandbox), task, policy, size=1,
                                   seed=seed + i, policy_version=version)
            pairs.append((task, episode))
    return pairs

"""Branching on the real shell environment (bubblewrap sandbox): a branch restored from a snapshot sees the
same files and test results as its parent did, so a deterministic policy replays the parent exactly."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from aios_rl.contracts.episode import DecodingRegime, Task
from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import ShellTaskManifest, write_task
from aios_rl.policy.base import ActionSample
from aios_rl.rollout.allocators import AllocatorConfig, RolloutBudget, make_allocator
from aios_rl.rollout.budget import Budget
from aios_rl.rollout.engine import RolloutEngine
from aios_rl.rollout.runner import run_group

CALC = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return x + x\n"
TESTS = (
    "from calc import add, double\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_double():\n    assert double(4) == 8\n"
)


@pytest.fixture()
def task(tmp_path: Path) -> Task:
    src = tmp_path / "src"
    (src / "tests").mkdir(parents=True)
    (src / "calc.py").write_text(CALC)
    (src / "tests" / "test_calc.py").write_text(TESTS)
    manifest = ShellTaskManifest(
        task_id="calc-branch",
        split="train",
        prompt="Fix the bug.",
        test_command=["python", "-m", "pytest", "-q", "tests"],
        reference_patch=unified_diff(CALC, CALC.replace("a - b", "a + b"), "calc.py"),
    )
    return manifest.to_task(write_task(tmp_path / "tasks", manifest, src))


class ScriptedPolicy:
    """Picks a non-stop candidate by a hash of the observation: the same state always gets the same action,
    and patches (which re-run the tests) are preferred so the state really changes step to step."""

    hidden_size = 1

    def __init__(self) -> None:
        self.last_act_metrics: dict[str, float] = {}

    def act(self, observations, environments, regime, generator=None):
        out = []
        for obs in observations:
            pool = [c for c in obs.candidates if c.startswith("patch")] or obs.candidates[:-1]
            j = int(hashlib.sha256(obs.text.encode()).hexdigest(), 16) % len(pool)
            out.append(ActionSample(pool[j], obs.candidates.index(pool[j]), 0.0, 1.0, 0.0, hidden=(1.0,)))
        return out


def test_branches_on_the_real_shell_env_replay_their_parent(task: Task) -> None:
    torch.set_num_threads(1)
    config, sandbox = ShellEnvConfig(max_steps=3, stop_on_pass=False), Sandbox()
    allocator = make_allocator("tree-3", AllocatorConfig(seed=4, tree_expand_nodes=2))
    engine = RolloutEngine(lambda: ShellBugfixEnv(config, sandbox=sandbox), allocator, max_steps=3, workers=2)
    ledger = Budget()
    greedy = DecodingRegime(name="greedy", temperature=1e-3)
    batch = engine.collect(
        ScriptedPolicy(), [task], RolloutBudget(3), seed=0, policy_version="v0", regime=greedy, ledger=ledger
    )
    (group,) = batch.groups
    first, *forks = group.episodes
    assert len(first.trajectory) == 3 and len(forks) == 2
    assert (ledger.rollouts, ledger.branches) == (3, 2)
    assert ledger.env_steps == 3 + sum(3 - f.branch_of.step for f in forks)
    texts = [s.observation.text for s in first.trajectory]
    assert len(set(texts)) == 3  # every step changed the state, so a wrong restore would show
    for fork in forks:
        assert fork.branch_of.episode_id == first.episode_id
        assert [s.observation for s in fork.trajectory] == [s.observation for s in first.trajectory]
        assert [s.action for s in fork.trajectory] == [s.action for s in first.trajectory]
        assert fork.verification.evidence["files_modified"] == first.verification.evidence["files_modified"]
        assert fork.outcome == first.outcome


class Writer:
    """Writes the given actions in turn, as an LM in generate mode does (no candidate index)."""

    hidden_size = 1

    def __init__(self, actions: list[str]) -> None:
        self.actions = iter(actions)
        self.last_act_metrics: dict[str, float] = {}

    def act(self, observations, environments, regime, generator=None):
        return [ActionSample(next(self.actions), None, 0.0, 0.0, 0.0, hidden=(0.0,)) for _ in observations]


def test_the_ledger_counts_what_the_shell_refused_not_what_is_not_json(task: Task) -> None:
    # `{"action": "fly"}` is JSON but the environment refuses it; the text form `stop` is not JSON but the
    # environment takes it: rollout/invalid_actions counts the first only.
    ledger = Budget()
    (episode,) = run_group(lambda: ShellBugfixEnv(ShellEnvConfig(max_steps=3), sandbox=Sandbox()), task,
                           Writer(['{"action": "fly"}', "stop"]), size=1, seed=0, policy_version="v0",
                           budget=ledger)
    assert [s.info["invalid_action"] for s in episode.trajectory] == [True, False]
    assert episode.trajectory[-1].info["stop_reason"] == "student_stop"
    assert ledger.invalid_actions == 1 and ledger.metrics()["rollout/invalid_actions"] == 1.0

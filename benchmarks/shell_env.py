"""Shell environment costs and coverage, measured side by side in one run.

Prints: the sandbox's added wall time per trivial command (sandboxed vs the same spawn code without
bubblewrap), verification time per task (the task's test command sandboxed vs unsandboxed on the same copy),
episodes per minute with and without the run memo (:mod:`aios_rl.envs.shell.run_memo`) under a
uniform-random candidate policy and under one that picks among the first 8 candidates offered, and candidate
coverage (share of tasks whose reference fix is among the patch candidates offered at reset).

Run: ``.venv/bin/python benchmarks/shell_env.py [--tasks N] [--repeats R]`` (generates its own tasks).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.generator import GeneratorConfig, generate_benchmark
from aios_rl.envs.shell.oracle import reference_action
from aios_rl.envs.shell.run_memo import shared_memo
from aios_rl.envs.shell.sandbox import Sandbox, run_unsandboxed
from aios_rl.envs.shell.task import load_tasks
from aios_rl.policy.uniform import UniformPolicy
from aios_rl.rollout.runner import run_group


class FirstCandidates(UniformPolicy):
    """Uniform over the first ``k`` candidates offered: a stand-in for a trained student, whose choices
    concentrate on a few candidates, so episodes of a group reach the same working copies."""

    def __init__(self, k: int) -> None:
        self.k = k

    def act(self, observations, environments, regime, generator=None):
        short = [o.model_copy(update={"candidates": o.candidates[: self.k],
                                      "candidate_features": o.candidate_features[: self.k]})
                 for o in observations]
        return super().act(short, environments, regime, generator)


def median_ms(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        result = fn()
        samples.append(result.duration_s * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40, help="generated tasks to measure on")
    parser.add_argument("--repeats", type=int, default=30, help="repeats per command timing")
    parser.add_argument("--episodes", type=int, default=16, help="random-policy episodes to time")
    parser.add_argument("--group", type=int, default=8, help="episodes per task (a rollout group)")
    args = parser.parse_args()
    for flag in ("tasks", "repeats", "episodes", "group"):
        if getattr(args, flag) < 1:  # no samples: an empty median or 0 episodes per minute to divide by
            parser.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    torch.set_num_threads(1)
    sandbox = Sandbox()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate_benchmark(root / "tasks", GeneratorConfig(count=args.tasks, seed=11))
        tasks = load_tasks(root / "tasks")
        work = root / "copy"
        shutil.copytree(Path(tasks[0].spec["task_dir"]) / "repo", work)

        plain_true = median_ms(lambda: run_unsandboxed(["true"], work), args.repeats)
        boxed_true = median_ms(lambda: sandbox.run(["true"], work), args.repeats)

        plain_verify, boxed_verify = [], []
        for task in tasks[: min(len(tasks), 12)]:
            copy = root / f"v-{task.task_id}"
            shutil.copytree(Path(task.spec["task_dir"]) / "repo", copy)
            argv = list(task.spec["test_command"])
            plain_verify.append(median_ms(lambda: run_unsandboxed(argv, copy), 3))
            boxed_verify.append(median_ms(lambda: sandbox.run(argv, copy), 3))

        covered = 0
        for task in tasks:
            env = ShellBugfixEnv(ShellEnvConfig(), sandbox=sandbox)
            try:
                observation = env.reset(task, seed=0)
            finally:
                env.close()
            covered += reference_action(task) in observation.candidates

        def episodes_per_minute(config: ShellEnvConfig, policy: UniformPolicy) -> float:
            start = time.perf_counter()
            done = 0
            for i, task in enumerate(tasks):
                if done >= args.episodes:
                    break
                episodes = run_group(lambda: ShellBugfixEnv(config, sandbox=sandbox), task, policy,
                                     size=args.group, seed=i, policy_version="uniform")
                done += len(episodes)
            return done / ((time.perf_counter() - start) / 60)

        memo = shared_memo(ShellEnvConfig().run_memo)
        speed = {}
        for name, policy in (("uniform-random", UniformPolicy()), ("first 8 candidates", FirstCandidates(8))):
            memo.clear()  # the coverage resets above ran every baseline: start cold
            with_memo = episodes_per_minute(ShellEnvConfig(), policy)
            hit_rate = memo.hits / max(1, memo.hits + memo.misses)
            speed[name] = (episodes_per_minute(ShellEnvConfig(run_memo=0), policy), with_memo, hit_rate)

    pv, bv = statistics.median(plain_verify), statistics.median(boxed_verify)
    print(f"shell environment benchmark ({len(tasks)} generated tasks)")
    print(f"{'measure':<44}{'unsandboxed':>13}{'sandboxed':>11}{'added':>9}{'ratio':>8}")
    print(f"{'per-command wall time, `true` (ms, median)':<44}{plain_true:>13.1f}{boxed_true:>11.1f}"
          f"{boxed_true - plain_true:>9.1f}{boxed_true / plain_true:>8.2f}")
    print(f"{'verification per task, pytest (ms, median)':<44}{pv:>13.1f}{bv:>11.1f}{bv - pv:>9.1f}{bv / pv:>8.2f}")
    print(f"episodes per minute, groups of {args.group}       no memo   run memo   ratio   runs recalled")
    for name, (without, with_memo, hit_rate) in speed.items():
        print(f"  {name + ' policy':<40}{without:>8.1f}{with_memo:>11.1f}{with_memo / without:>8.2f}{hit_rate:>16.0%}")
    print(f"candidate coverage (reference fix offered at reset): {covered}/{len(tasks)} = {covered / len(tasks):.1%}")
    print("targets: <= 15 ms added per command; verification <= 1.5x; coverage >= 90 %")


if __name__ == "__main__":
    main()

"""The main job on embedded defaults: generate a small benchmark, train the compact student, compare.

Generates bug-fix tasks from the bundled seed repositories, evaluates the untrained student and a
uniform-random candidate policy on the holdout split, trains (oracle distillation warm start, then GRPO
epochs with oracle shaping), evaluates the trained student, and returns the comparison rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aios_rl.campaign.evaluate import EvalResult, evaluate
from aios_rl.campaign.shell_eval import holdout_group
from aios_rl.campaign.train import ShellTrainConfig, ShellTraining
from aios_rl.envs.shell.generator import GeneratorConfig, generate_benchmark
from aios_rl.envs.shell.task import load_tasks
from aios_rl.policy.base import Policy
from aios_rl.policy.uniform import UniformPolicy

Report = Callable[[str], None]


@dataclass(frozen=True)
class DemoRow:
    policy: str
    result: EvalResult


def run_shell_demo(out: Path, report: Report, *, count: int = 30, epochs: int = 3, tasks_per_epoch: int = 6,
                   group_size: int = 4, seed: int = 0) -> list[DemoRow]:
    """Run the whole job in ``out`` (``out/tasks`` and ``out/run``) and return the evaluation rows."""
    tasks_dir, run_dir = out / "tasks", out / "run"
    report(f"generating {count} bug-fix tasks from the seed repositories -> {tasks_dir}")
    summary = generate_benchmark(tasks_dir, GeneratorConfig(count=count, seed=seed))
    report(f"  {summary.train} train / {summary.holdout} holdout tasks")
    config = ShellTrainConfig(epochs=epochs, tasks_per_epoch=tasks_per_epoch, group_size=group_size, seed=seed)
    training = ShellTraining(run_dir, tasks_dir, config)
    holdout = load_tasks(tasks_dir, split="holdout")
    train_repos = {t.oracle.get("metadata", {}).get("seed_repo") for t in training.tasks}

    def score(policy: Policy, name: str) -> DemoRow:
        report(f"evaluating {name} on {len(holdout)} holdout tasks")
        result = evaluate(policy, holdout, training.make_env, seed=seed, version=name,
                          group_of=holdout_group(train_repos), workers=config.workers)
        return DemoRow(name, result)

    rows = [score(UniformPolicy(), "uniform-random")]
    rows.append(score(training.load_student("initial"), "untrained student"))
    warm = training.warm_start()
    if warm is not None:
        report(f"warm start: distilled {warm.metrics['demonstrations']} oracle demonstrations -> {warm.checkpoint}")
    for epoch in range(1, epochs + 1):
        r = training.run_epoch(epoch)
        m = r.metrics
        report(f"epoch {epoch}: rollout success {m['rollout/success_rate']:.2f} reward {m['rollout/reward_mean']:+.2f} "
               f"loss {m['train/loss']:.3f} -> {r.checkpoint}")
    rows.append(score(training.policy, f"trained student ({training.plane.state.lineage.active})"))
    training.close()
    return rows


def table(rows: list[DemoRow]) -> list[str]:
    groups = sorted({g for row in rows for g in row.result.by_group})
    header = f"{'policy':<34}{'holdout success':>16}" + "".join(f"{g:>16}" for g in groups)
    lines = [header, "-" * len(header)]
    for row in rows:
        cells = "".join(f"{row.result.by_group.get(g, 0.0):>16.2f}" for g in groups)
        lines.append(f"{row.policy:<34}{row.result.success_rate:>16.2f}{cells}")
    return lines

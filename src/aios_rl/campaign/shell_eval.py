"""Evaluating a run's checkpoint (or the uniform baseline) on a shell task set."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

from aios_rl.campaign.evaluate import GREEDY, EvalResult, evaluate
from aios_rl.campaign.students import restore_student
from aios_rl.campaign.train import TRAIN_CONFIG_KEY, ShellTrainConfig
from aios_rl.campaign.train_config import stored_train_config
from aios_rl.contracts.config import MAX_GROUP_SIZE, MAX_SEED, MIN_SEED
from aios_rl.contracts.episode import DecodingRegime, Task
from aios_rl.contracts.errors import ConfigError, StorageError
from aios_rl.control.plane import ControlPlane
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import load_tasks
from aios_rl.policy.uniform import UniformPolicy

log = logging.getLogger(__name__)

TASKS_DIR_KEY = "tasks_dir"


def holdout_group(train_repos: set[str]) -> Callable[[Task], str]:
    """Report holdout tasks as unseen mutants of training repos vs repos never seen in training."""

    def group(task: Task) -> str:
        repo = task.oracle.get("metadata", {}).get("seed_repo")
        if repo is None:
            return "ungrouped"
        return "unseen_mutants" if repo in train_repos else "unseen_repos"

    return group


def run_shell_eval(
    run: Path,
    *,
    checkpoint: str = "active",
    tasks_dir: Path | None = None,
    split: str = "holdout",
    samples: int = 1,
    policy_kind: str = "checkpoint",
    seed: int = 0,
    temperature: float = 0.0,
    show_progress: bool = False,
) -> EvalResult:
    """Evaluate a checkpoint of ``run`` (or the uniform policy) on a split of a task set.

    ``temperature`` 0 decodes greedily, so ``samples`` > 1 only repeats the same episodes; a positive
    temperature samples, and ``samples`` episodes per task then estimate the sampled success rate.
    """
    if not math.isfinite(temperature) or temperature < 0:
        raise ConfigError(f"--temperature must be >= 0 (0: greedy) and finite, got {temperature}")
    if samples < 1:
        raise ConfigError(f"--samples must be >= 1, got {samples}")
    if samples > MAX_GROUP_SIZE:  # a typo such as 99999999999 would run without end
        raise ConfigError(f"--samples must be between 1 and {MAX_GROUP_SIZE}, got {samples}")
    if not MIN_SEED <= seed <= MAX_SEED:
        raise ConfigError(f"--seed must be between {MIN_SEED} and {MAX_SEED}, got {seed}")
    regime = GREEDY if temperature == 0 else DecodingRegime(name="sampled", temperature=temperature)
    if samples > 1 and temperature == 0 and policy_kind == "checkpoint":
        log.warning("--samples %d at temperature 0 (greedy) runs the same episode %d times per task; add "
                    "--temperature 1.0 to estimate the sampled policy's success", samples, samples)
    if not (run / "control.db").is_file():
        raise StorageError(f"{run} is not a run directory (no control.db); train first with `aios-rl shell train`")
    plane = ControlPlane(run, writer=False)
    try:
        stored = plane.store.get_meta(TRAIN_CONFIG_KEY)
        config = stored_train_config(stored, run, "evaluate") if stored else ShellTrainConfig()
        if tasks_dir is None:
            remembered = plane.store.get_meta(TASKS_DIR_KEY)
            if remembered is None:
                raise ConfigError("pass --tasks: this run does not record the task directory it trained on")
            tasks_dir = Path(remembered)
        if policy_kind == "uniform":
            policy, version = UniformPolicy(), "uniform"
        elif policy_kind == "checkpoint":
            version = plane.resolve_checkpoint(checkpoint)
            tensors, meta = plane.load_checkpoint(version)
            policy = restore_student(meta["policy"], tensors, source=f"checkpoint {run}:{version}")
        else:
            raise ConfigError(f"--policy must be checkpoint or uniform, got {policy_kind!r}")
    finally:
        plane.close()
    selected = load_tasks(tasks_dir, split=split)
    if not selected:
        raise ConfigError(f"{tasks_dir} has no {split}-split tasks")
    train_repos = {t.oracle.get("metadata", {}).get("seed_repo") for t in load_tasks(tasks_dir, split="train")}
    bar = None
    if show_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(selected), desc=f"eval {version}", unit="task")
    sandbox = Sandbox(config.env.sandbox)
    result = evaluate(
        policy, selected, lambda: ShellBugfixEnv(config.env, sandbox=sandbox), samples=samples, seed=seed, version=version,
        regime=regime,
        group_of=holdout_group(train_repos), workers=config.workers,
        on_task=(lambda *_: bar.update(1)) if bar is not None else None,
    )
    if bar is not None:
        bar.close()
    return result

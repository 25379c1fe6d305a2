"""Oracle demonstrations for the distillation warm start of shell training.

For each training task with a reference fix, the demonstrations are the states an agent meets on the
way to the fix, each labelled with the oracle's action:

1. the opening state → the reference fix;
2. for each of ``recovery`` wrong attempts in a row: after the wrong patch, the state → ``revert``; after
   the revert, the state (the wrong patches now marked as tried) → the reference fix.

The wrong patch is drawn, seeded, from the patch candidates the student is most likely to try: the ones
whose edited line is most suspicious (``line_suspicion_rank`` below ``wrong_rank``). Demonstrations are
the oracle's ground truth, so they are built only when the oracle is the primary teacher; the states
themselves are ordinary observations (nothing of the reference reaches the student's inputs).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from aios_rl.algos.batch import DistillBatch
from aios_rl.algos.distill import distill_batch_from, distill_update
from aios_rl.algos.trainer import Trainer, UpdateStats
from aios_rl.contracts.episode import Observation, Task
from aios_rl.contracts.protocols import Env
from aios_rl.envs.shell.candidates import REVERT_CANDIDATE
from aios_rl.envs.shell.oracle import reference_action

Demonstration = tuple[Observation, str, list[str], float]


def oracle_demonstrations(
    tasks: Sequence[Task],
    make_env: Callable[[], Env],
    *,
    seed: int,
    recovery: int = 2,
    wrong_rank: float = 0.1,
    workers: int = 1,
    progress: Callable[[], None] | None = None,
) -> list[Demonstration]:
    """(observation, environment, [reference action], confidence 1) items for ``distill_batch_from``, in task
    order, for the tasks with a reference fix (the others give none; ``progress`` is called once per task
    either way). See :func:`fix_demonstrations`."""
    fixes = [(task, reference_action(task)) for task in tasks]
    return fix_demonstrations(fixes, make_env, seed=seed, recovery=recovery, wrong_rank=wrong_rank,
                              workers=workers, progress=progress)


def fix_demonstrations(
    fixes: Sequence[tuple[Task, str | None]],
    make_env: Callable[[], Env],
    *,
    seed: int,
    recovery: int = 2,
    wrong_rank: float = 0.1,
    workers: int = 1,
    progress: Callable[[], None] | None = None,
) -> list[Demonstration]:
    """The demonstrations of the module docstring for each (task, fix action) pair, in order; a pair whose fix
    is None gives none. The fix is the oracle's reference, or a fix the verifier accepted (a verified success
    of the student's own, :func:`aios_rl.algos.self_imitation.archived_fixes`). Pairs run on ``workers``
    threads, each with its own environment and a generator seeded by the seed and the task id, so the items
    do not depend on the number of workers."""

    def one(pair: tuple[Task, str | None]) -> list[Demonstration]:
        task, fix = pair
        if fix is None:
            return []
        return _task_demonstrations(task, fix, make_env, random.Random(f"{seed}:{task.task_id}"), recovery,
                                    wrong_rank)

    items: list[Demonstration] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for demonstrations in pool.map(one, fixes):
            items.extend(demonstrations)
            if progress:
                progress()
    return items


def _task_demonstrations(
    task: Task, reference: str, make_env: Callable[[], Env], rng: random.Random, recovery: int,
    wrong_rank: float,
) -> list[Demonstration]:
    items: list[Demonstration] = []
    env = make_env()
    try:
        state = env.reset(task, seed=task.seed)
        items.append((state, task.environment, [reference], 1.0))
        for _ in range(recovery):
            more = _recovery(env, state, task, reference, rng, wrong_rank)
            items.extend(more)
            if len(more) < 2:
                break
            state = more[-1][0]
    finally:
        env.close()
    return items


def oracle_warm_start(
    trainer: Trainer,
    tasks: Sequence[Task],
    make_env: Callable[[], Env],
    *,
    seed: int,
    passes: int,
    workers: int = 1,
    progress: Callable[[], None] | None = None,
) -> tuple[int, UpdateStats]:
    """Distil ``trainer``'s student on the oracle demonstrations for ``passes`` passes.

    Returns:
        The number of demonstrations and the statistics of the last pass.
    """
    batch = distill_batch_from(oracle_demonstrations(tasks, make_env, seed=seed, workers=workers, progress=progress))
    return len(batch), distill_passes(trainer, batch, seed=seed, passes=passes)


def distill_passes(trainer: Trainer, batch: DistillBatch, *, seed: int, passes: int) -> UpdateStats:
    """``passes`` distillation passes of ``trainer``'s student over ``batch``; the last pass's statistics."""
    generator = torch.Generator().manual_seed(seed)
    stats = UpdateStats()
    for _ in range(passes):
        stats = distill_update(trainer, batch, generator=generator)
    return stats


def _recovery(
    env: Env, state: Observation, task: Task, reference: str, rng: random.Random, wrong_rank: float
) -> list[Demonstration]:
    """One wrong attempt from ``state`` (an unmodified working copy): [wrong → revert, reverted → fix]."""
    features = state.candidate_features or [{}] * len(state.candidates)
    wrong = [
        c for c, f in zip(state.candidates, features)
        if c.startswith("patch") and c != reference and not f.get("already_tried")
        and f.get("line_suspicion_rank", 1.0) <= wrong_rank
    ]  # fmt: skip
    if not wrong:
        return []
    result = env.step(rng.choice(wrong))
    if result.terminated or result.truncated or REVERT_CANDIDATE not in result.observation.candidates:
        return []  # the "wrong" patch fixed the suite too, or the episode ended: nothing to recover from
    items = [(result.observation, task.environment, [REVERT_CANDIDATE], 1.0)]
    reverted = env.step(REVERT_CANDIDATE)
    if not (reverted.terminated or reverted.truncated):
        items.append((reverted.observation, task.environment, [reference], 1.0))
    return items

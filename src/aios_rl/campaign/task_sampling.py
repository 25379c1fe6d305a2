"""Which training tasks an epoch of `shell train` runs: a uniform draw, or the frontier first.

RL learns from a task only what its own rollouts find there, so the rollouts of an RL epoch are worth most
where the student has nothing else to learn from: no verified success of its own yet (the self-imitation
archive keeps and imitates those every epoch anyway) and no teacher demonstration or label. ``frontier``
ranks tasks by a cost and runs the cheapest:

    cost = (1 + visits) × 2 ** level,   level 0: neither solved nor labelled, 1: labelled by the teacher,
                                        2: solved (a verified success is archived)

so an unvisited task no one can label comes first, then, on a par, one of those visited once and an
unvisited labelled task; a task tried many times without success slowly gives way. Ties are broken by the
epoch's generator. This is prioritised sampling in the spirit of prioritized level replay (Jiang et al.
2021, https://arxiv.org/abs/2010.03934), with the priority read from the run's own record rather than
learned. Which tasks the teacher can label is known to the training loop only (the oracle's reference
exists or not); it never reaches the student's inputs.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

from aios_rl.contracts.episode import Task


def frontier_cost(visits: int, *, labelled: bool, solved: bool) -> int:
    """The cost of running a task again (lower runs first); see the module docstring."""
    level = 2 if solved else 1 if labelled else 0
    return (1 + visits) * 2**level


def frontier_tasks(
    tasks: Sequence[Task],
    count: int,
    rng: random.Random,
    *,
    visits: Mapping[str, int],
    labelled: Collection[str],
    solved: Collection[str],
) -> list[Task]:
    """The ``count`` tasks of least :func:`frontier_cost`, ties in the order of one shuffle by ``rng``."""
    shuffled = list(tasks)
    rng.shuffle(shuffled)
    ranked = sorted(shuffled, key=lambda t: frontier_cost(
        visits.get(t.task_id, 0), labelled=t.task_id in labelled, solved=t.task_id in solved))  # stable sort
    return ranked[:count]


def visit_counts(chosen_by_epoch: Mapping[str, Iterable[str]], before: int) -> Counter[str]:
    """How often each task ran in the epochs numbered below ``before`` (``chosen_by_epoch``: epoch → ids)."""
    return Counter(task for epoch, ids in chosen_by_epoch.items() if int(epoch) < before for task in ids)

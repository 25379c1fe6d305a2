"""Self-imitation of verified successes: the student's own fixes as distillation targets.

Self-Imitation Learning (Oh et al. 2018, https://arxiv.org/abs/1806.05635) and expert iteration / RAFT
(Dong et al. 2023, https://arxiv.org/abs/2304.06767) make the actions of the policy's own successful
episodes more likely. Here success is the verifier's outcome (the task's tests pass), never a teacher's
opinion, so the term learns from tasks no teacher can label. Each task keeps its best success so far
(shortest path, the newest on ties) in an archive that outlives the epoch it was found in; a success's
detours are cut first (:func:`loop_free_steps`), so a wrong patch that was later reverted is not imitated.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import torch

from aios_rl.algos.batch import DistillBatch, state_of, trains_on
from aios_rl.contracts.episode import Episode, Step


def loop_free_steps(trajectory: Sequence[Step]) -> list[Step]:
    """The steps of a trajectory with every loop removed: when a state recurs, the steps taken since its
    earlier visit are dropped, so what remains leads from the first state to the end without revisiting one.

    Example: states A, B, A, C (patch, revert, patch) → the steps taken from A (the second) and C.
    """
    path: list[tuple[tuple, Step]] = []
    position: dict[tuple, int] = {}
    for step in trajectory:
        state = state_of(step.observation)
        if state in position:  # each step is cut at most once: linear in the trajectory's length
            cut = position[state]
            for dropped, _ in path[cut:]:
                del position[dropped]
            del path[cut:]
        position[state] = len(path)
        path.append((state, step))
    return [step for _, step in path]


def update_archive(archive: Mapping[str, Mapping[str, object]], episodes: Sequence[Episode]) -> dict[str, dict[str, object]]:
    """The archive (task id → ``{"episode_id", "steps"}``) after these episodes: a verified success replaces
    a task's entry when its loop-free path is no longer (newer wins ties, being closer to the policy)."""
    updated = {task: dict(entry) for task, entry in archive.items()}
    for episode in episodes:
        if episode.outcome != "success" or not episode.trajectory:
            continue
        steps = len(loop_free_steps(episode.trajectory))
        current = updated.get(episode.task_id)
        if current is None or steps <= int(current["steps"]):  # type: ignore[call-overload]
            updated[episode.task_id] = {"episode_id": episode.episode_id, "steps": steps}
    return updated


def pick_archived(archive: Mapping[str, Mapping[str, object]], limit: int, rng: random.Random) -> list[str]:
    """The episode ids to imitate this epoch: every archived success, or ``limit`` of them drawn by ``rng``
    (tasks in sorted order first, so the draw depends only on the archive and the generator)."""
    ids = [str(archive[task]["episode_id"]) for task in sorted(archive)]
    return ids if len(ids) <= limit else rng.sample(ids, limit)


def archived_fixes(episodes: Sequence[Episode]) -> dict[str, str]:
    """Task id → the verified fix of each successful episode whose fix was taken at the opening state: the
    action of its loop-free path when that path is one step long. The task's later episodes win.

    A longer loop-free path kept an earlier change (a patch it never reverted) that the accepted working
    copy may depend on, so its last action is not known to fix the task from the opening state, which is
    where redistillation's demonstrations (:func:`aios_rl.campaign.demos.fix_demonstrations`) put it.
    """
    fixes = {}
    for episode in episodes:
        path = loop_free_steps(episode.trajectory) if episode.outcome == "success" else []
        if len(path) == 1:
            fixes[episode.task_id] = path[0].action
    return fixes


def self_imitation_batch(episodes: Sequence[Episode], weight: float) -> DistillBatch:
    """Every loop-free step of successful episodes, its own action the target, each weighted ``weight``.

    The action is the target as recorded: a candidate for students that rank candidates, the answer text for
    an LM that wrote it (which ``Trainer.auxiliary_loss`` scores as text when the student ranks nothing).
    """
    steps = [(step, episode.environment) for episode in episodes if episode.outcome == "success"
             for step in loop_free_steps(episode.trajectory) if trains_on(step)]
    return DistillBatch(
        observations=tuple(step.observation for step, _ in steps),
        environments=tuple(environment for _, environment in steps),
        targets=tuple(step.action for step, _ in steps),
        weights=torch.full((len(steps),), float(weight)),
    )

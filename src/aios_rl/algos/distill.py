"""Distillation toward teacher reference actions (the warm start, and the positive-lane term).

Policy distillation: Rusu et al. 2016 (https://arxiv.org/abs/1511.06295). States come from the student's
own episodes or from the teacher's demonstrations; a state contributes only when the teacher's reference
action is one of its admissible candidates (a compact student can only choose among those).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from aios_rl.algos.batch import DistillBatch
from aios_rl.algos.trainer import Trainer, UpdateStats
from aios_rl.contracts.episode import Episode, Observation
from aios_rl.contracts.errors import ContractError, TrainingError


def distill_batch_from(
    items: Sequence[tuple[Observation, str, Sequence[str], float]],
) -> DistillBatch:
    """Build a batch from (observation, environment, teacher reference actions, confidence) items.

    The first reference action that is an admissible candidate of the observation is the target; items
    whose reference actions are all outside the candidates are skipped.
    """
    obs, envs, targets, weights = [], [], [], []
    for observation, environment, references, confidence in items:
        target = next((r for r in references if r in observation.candidates), None)
        if target is not None:
            obs.append(observation)
            envs.append(environment)
            targets.append(target)
            weights.append(confidence)
    return DistillBatch(tuple(obs), tuple(envs), tuple(targets), torch.tensor(weights, dtype=torch.float32))


def distill_from_episodes(episodes: Sequence[Episode]) -> DistillBatch:
    """Every visited state of episodes whose teacher signal carries reference actions.

    A state's reference actions are the signal's ``step_reference_actions`` entry for it when the teacher
    gave per-state ones (the oracle does: ``stop`` once the files hold the fix), else ``reference_actions``.

    Raises:
        ContractError: a signal's per-state reference actions do not match its episode's steps one to one.
    """
    items = []
    for episode in episodes:
        signal = episode.teacher_signal
        if signal is None or signal.status not in ("complete", "fallback_complete"):
            continue
        per_state = signal.step_reference_actions or [signal.reference_actions] * len(episode.trajectory)
        if len(per_state) != len(episode.trajectory):
            raise ContractError(
                f"episode {episode.episode_id}: its teacher signal has step_reference_actions for "
                f"{len(per_state)} states but the trajectory has {len(episode.trajectory)} steps; expected "
                "one list per step (or none)"
            )
        for step, references in zip(episode.trajectory, per_state, strict=True):
            if references:
                items.append((step.observation, episode.environment, references, signal.confidence))
    return distill_batch_from(items)


def distill_update(trainer: Trainer, distill: DistillBatch, *, generator: torch.Generator) -> UpdateStats:
    """Supervised steps toward the teacher's reference actions only.

    Raises:
        TrainingError: ``distill_coef`` is 0, which leaves this update no loss to train on.
    """
    if trainer.config.distill_coef <= 0:
        raise TrainingError("a distillation update with trainer.distill_coef 0 has nothing to train; "
                            "set distill_coef > 0 (or leave distillation out)")
    stats = UpdateStats()
    for idx in trainer.minibatches(len(distill), generator):
        loss = trainer.auxiliary_loss(distill.subset(idx), None, None, stats)
        trainer.step(loss, stats)
    return trainer.finish(stats)

"""Drills that prove the safety net on real training (``aios-rl shell campaign --drill ...``).

* ``bad-update``: the K-th update (``--drill-at K``, default the first) is deliberately harmful: instead of
  learning from its batch it takes ``drill_steps`` unlikelihood steps (``-log(1 - pi(a))``) on the teacher's
  reference actions and the actions of positively rewarded steps, making them as unlikely as it can, at
  ``drill_lr_scale`` times the learning rate. Unlikelihood rather than gradient ascent on ``log pi(a)``:
  the ascent's gradient is ``1 - pi(a)``, nothing at all when a strong warm start has made the action
  certain, which is exactly the student the drill must be able to break. Nothing else knows about the
  drill: the campaign has to notice the regression through matched comparison against ``pre_update_ref``
  and roll back.
* ``crash-after-update``: the process SIGKILLs itself right after the K-th update's pointer move
  (``update.completed`` committed), the worst moment for a resume: a new ``active`` whose monitoring has
  not started. ``--resume`` must pick the campaign up from the store.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Sequence
from typing import Literal, NoReturn

import torch

from aios_rl.algos.batch import DistillBatch, trainable
from aios_rl.algos.losses import unlikelihood_loss
from aios_rl.algos.trainer import Trainer, UpdateStats
from aios_rl.contracts.episode import Episode
from aios_rl.contracts.errors import TrainingError

log = logging.getLogger(__name__)

Drill = Literal["none", "bad-update", "crash-after-update"]


def harmful_update(
    trainer: Trainer,
    episodes: Sequence[Episode],
    distill: DistillBatch | None,
    *,
    steps: int,
    lr_scale: float,
) -> UpdateStats:
    """Unlikelihood steps on the good actions (the ``bad-update`` drill); see the module docstring.

    Raises:
        TrainingError: there is no state with a reference action or a positively rewarded action.
    """
    observations, environments, actions = [], [], []
    if distill is not None:
        observations += distill.observations
        environments += distill.environments
        actions += distill.targets
    for episode in episodes:
        if episode.reward > 0:
            for step in episode.trajectory:
                if step.observation.candidates and trainable(step.observation, step.action):
                    observations.append(step.observation)
                    environments.append(episode.environment)
                    actions.append(step.action)
    if not actions:
        raise TrainingError("bad-update drill: no reference or positively rewarded action to ascend on")
    log.warning("DRILL bad-update: %d unlikelihood steps on %d good actions", steps, len(actions))
    # Each action's index among its state's candidates (-1 where a writing student has none to rank).
    target = torch.tensor(
        [obs.candidates.index(a) if a in obs.candidates else -1 for obs, a in zip(observations, actions)]
    )  # (N,)
    groups = trainer.optimizer.param_groups
    base = [group["lr"] for group in groups]
    stats = UpdateStats(extras={"drill_bad_update": 1.0})
    try:
        for group in groups:
            group["lr"] *= lr_scale
        for _ in range(steps):
            ev = trainer.policy.evaluate(observations, environments, actions)
            if ev.candidate_mask.shape[1]:
                loss = unlikelihood_loss(ev.candidate_logits, ev.candidate_mask, target)
            else:  # a student that writes its answers: the same loss from the written action's probability
                loss = -torch.log1p(-ev.logprobs.exp().clamp(max=1 - 1e-6)).mean()
            trainer.step(loss, stats)
    finally:  # the optimiser state is checkpointed: keep the configured learning rate in it
        for group, lr in zip(groups, base, strict=True):
            group["lr"] = lr
    return trainer.finish(stats)


def crash_now(why: str) -> NoReturn:
    """SIGKILL this process (no cleanup, no flush: exactly what a crash leaves behind)."""
    log.warning("DRILL crash-after-update: killing the process (%s)", why)
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # pragma: no cover - unreachable: SIGKILL cannot be caught

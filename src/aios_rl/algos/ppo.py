"""PPO update: clipped surrogate on GAE advantages with a learned value baseline.

Schulman et al. 2017 (https://arxiv.org/abs/1707.06347); GAE: Schulman et al. 2016
(https://arxiv.org/abs/1506.02438). Episodes are the rows of a padded (E, T) layout for GAE; the
terminal reward sits on each episode's last trainable step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from aios_rl.algos import advantages, losses
from aios_rl.algos.batch import DistillBatch, StepBatch, evaluate_steps, flatten_episodes, ratio_terms
from aios_rl.algos.trainer import Trainer, UpdateStats
from aios_rl.contracts.episode import Episode
from aios_rl.policy.base import Policy


def _gae_per_step(batch: StepBatch, values: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over each episode's steps, returned flat in batch order: (advantages (N,), returns (N,))."""
    n_episodes = int(batch.episode_index.max()) + 1
    position = torch.zeros_like(batch.episode_index)  # (N,) step position within its episode
    counts = torch.zeros(n_episodes, dtype=torch.long)
    for i, e in enumerate(batch.episode_index.tolist()):
        position[i] = counts[e]
        counts[e] += 1
    width = int(counts.max())
    rewards = torch.zeros(n_episodes, width)  # (E, T)
    vals = torch.zeros(n_episodes, width)  # (E, T)
    dones = torch.ones(n_episodes, width, dtype=torch.bool)  # padding counts as done: nothing leaks back
    rewards[batch.episode_index, position] = batch.rewards
    vals[batch.episode_index, position] = values
    dones[batch.episode_index, position] = batch.dones
    adv, ret = advantages.gae(rewards, vals, dones, torch.zeros(n_episodes), gamma=gamma, lam=lam)
    return adv[batch.episode_index, position], ret[batch.episode_index, position]


def ppo_update(
    trainer: Trainer,
    episodes: Sequence[Episode],
    *,
    generator: torch.Generator,
    distill: DistillBatch | None = None,
    negative: StepBatch | None = None,
    reference: Policy | None = None,
) -> UpdateStats:
    """One PPO update on a fresh batch of episodes (online)."""
    cfg, policy = trainer.config, trainer.policy
    batch = flatten_episodes(episodes)
    with torch.no_grad():
        old_ev = evaluate_steps(policy, batch)
        (old, _), old_values = ratio_terms(old_ev), old_ev.values  # (N, T), (N,)
        ref = None
        if cfg.kl_coef > 0 and reference is not None:
            ref, _ = ratio_terms(evaluate_steps(reference, batch))  # (N, T)
    adv, returns = _gae_per_step(batch, old_values, cfg.gamma, cfg.lam)
    # Per-batch advantage normalisation, as in most PPO implementations: GRPO's over one group holding the
    # whole batch, (A - mean) / (std + eps), whose centring makes equal advantages exactly 0 (a plain
    # A - A.mean() leaves float32 rounding that the division by its tiny std blows up to about +-1).
    # A batch of one step keeps its advantage.
    adv = advantages.grpo_advantages(adv, torch.zeros_like(batch.episode_index), eps=1e-8)

    stats = UpdateStats()
    for idx, distill_part in trainer.paired_minibatches(len(batch), distill, generator):
        mb = batch.subset(idx)
        ev = evaluate_steps(policy, mb)
        ref_mb = None if ref is None else ref[idx]
        policy_loss, clip, kl = trainer.clipped_terms(ev, old[idx], adv[idx], ref_mb, stats)
        step = torch.ones((len(idx), 1), dtype=torch.bool)  # one value per step
        v_loss = losses.value_loss(
            ev.values[:, None], old_values[idx][:, None], returns[idx][:, None], step,
            clip=cfg.value_clip, agg=cfg.agg,
        )
        entropy = ev.entropy.mean()
        loss = policy_loss + cfg.value_coef * v_loss - cfg.entropy_coef * entropy + kl
        loss = loss + trainer.auxiliary_loss(distill_part, negative, reference, stats)
        stats.value_loss += v_loss.item()
        trainer.surrogate_step(loss, policy_loss, entropy, clip, stats)
    return trainer.finish(stats)


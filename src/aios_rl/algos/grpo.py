"""GRPO-family update (GRPO, Dr. GRPO, RLOO, Tree-GRPO advantages) and the offline replay update.

GRPO: Shao et al. 2024 (https://arxiv.org/abs/2402.03300); Dr. GRPO: Liu et al. 2025
(https://arxiv.org/abs/2503.20783); RLOO: Ahmadian et al. 2024 (https://arxiv.org/abs/2402.14740). Group
advantages come from each task's group of episodes (Tree-GRPO, Ji et al. 2025,
https://arxiv.org/abs/2509.21240, adds GRPO within each tree of branched episodes, :func:`tree_ids`); every
step of an episode shares its episode's advantage, plus, with ``step_advantage_coef`` > 0, GiGPO's
step-level term (Feng et al. 2025, https://arxiv.org/abs/2505.10978): steps taken from the same observation
within a group are compared by their discounted return, which credits the action at a shared state (a task's
opening state, in the shell) rather than the whole episode. Ratios are taken per action for a student that
chooses among candidates (the candidate's log-probability) and per token for one that writes its actions (an
LM in generate mode; :func:`~aios_rl.algos.batch.ratio_terms`), where ``agg`` weighs tokens and sequences. The
offline update weights whole actions by their importance ratio.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from aios_rl.algos import advantages
from aios_rl.algos.batch import (
    DistillBatch,
    StepBatch,
    evaluate_steps,
    fit_width,
    flatten_episodes,
    ratio_terms,
    state_of,
)
from aios_rl.algos.trainer import Trainer, UpdateStats
from aios_rl.contracts.episode import Episode
from aios_rl.contracts.errors import TrainingError
from aios_rl.policy.base import Policy

ESTIMATORS = {
    "grpo": advantages.grpo_advantages,
    "dr_grpo": advantages.dr_grpo_advantages,
    "rloo": advantages.rloo_advantages,
}


def grpo_update(
    trainer: Trainer,
    episodes: Sequence[Episode],
    group_ids: Sequence[int],
    *,
    generator: torch.Generator,
    distill: DistillBatch | None = None,
    negative: StepBatch | None = None,
    reference: Policy | None = None,
) -> UpdateStats:
    """One GRPO update on a fresh batch of grouped episodes (online)."""
    cfg, policy = trainer.config, trainer.policy
    if len(episodes) != len(group_ids):
        raise TrainingError(f"{len(episodes)} episodes but {len(group_ids)} group ids")
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)  # (E,)
    groups = torch.tensor(list(group_ids), dtype=torch.long)  # (E,)
    if cfg.advantage == "tree":
        episode_adv = advantages.tree_grpo_advantages(rewards, groups, tree_ids(episodes, group_ids))  # (E,)
    else:
        episode_adv = ESTIMATORS[cfg.advantage](rewards, groups)  # (E,)
    batch = flatten_episodes(episodes)
    adv = episode_adv[batch.episode_index]  # (N,) each step carries its episode's advantage
    if cfg.step_advantage_coef > 0:
        returns = advantages.discounted_returns(batch.rewards, batch.dones, cfg.step_gamma)  # (N,)
        anchors = anchor_ids(batch, groups[batch.episode_index].tolist())  # (N,)
        adv = adv + cfg.step_advantage_coef * advantages.anchor_step_advantages(returns, anchors)

    # Old logprobs are recomputed under the current weights (not the tempered sampling logprobs), so the
    # first minibatch has ratio exactly 1 and the clip acts on what the update itself changes. An LM
    # re-scores the very tokens it sampled (evaluate_steps), so in an untempered regime (temperature 1,
    # top-p 1) they equal the logprobs recorded at sampling time.
    with torch.no_grad():
        old, _ = ratio_terms(evaluate_steps(policy, batch))  # (N, T): T = 1 per action, else answer tokens
        ref = None
        if cfg.kl_coef > 0 and reference is not None:
            ref, _ = ratio_terms(evaluate_steps(reference, batch))  # (N, T)

    stats = UpdateStats(extras={"zero_adv_fraction": float((adv == 0).float().mean())})
    for idx, distill_part in trainer.paired_minibatches(len(batch), distill, generator):
        mb = batch.subset(idx)
        ev = evaluate_steps(policy, mb)
        ref_mb = None if ref is None else ref[idx]
        policy_loss, clip, kl = trainer.clipped_terms(ev, old[idx], adv[idx], ref_mb, stats)
        entropy = ev.entropy.mean()
        loss = policy_loss - cfg.entropy_coef * entropy + kl
        loss = loss + trainer.auxiliary_loss(distill_part, negative, reference, stats)
        trainer.surrogate_step(loss, policy_loss, entropy, clip, stats)
    return trainer.finish(stats)


def anchor_ids(batch: StepBatch, group_of_step: Sequence[int]) -> torch.Tensor:
    """One integer per step; equal for steps of the same group taken from the same state, GiGPO's anchor
    states. The state is the observation's ``state_key`` where the environment declares one (so a state
    revisited later in an episode, or reached by another episode, anchors with the first visit although
    the step counter in its text differs); else the identical observation (text and candidates)."""
    index: dict[tuple, int] = {}
    ids = []
    for group, environment, obs in zip(group_of_step, batch.environments, batch.observations, strict=True):
        ids.append(index.setdefault((group, environment, state_of(obs)), len(index)))
    return torch.tensor(ids, dtype=torch.long)


def tree_ids(episodes: Sequence[Episode], group_ids: Sequence[int]) -> torch.Tensor:
    """One integer per episode; equal for episodes of the same group whose ``branch_of`` chains reach the
    same root (the episode a tree started with, or the earliest ancestor not in the batch)."""
    by_id = {e.episode_id: e for e in episodes}
    index: dict[tuple[int, str], int] = {}
    ids = []
    for episode, group in zip(episodes, group_ids, strict=True):
        root, seen = episode, {episode.episode_id}
        while root.branch_of is not None and root.branch_of.episode_id in by_id:
            root = by_id[root.branch_of.episode_id]
            if root.episode_id in seen:
                raise TrainingError(f"episode {episode.episode_id}: branch_of forms a cycle")
            seen.add(root.episode_id)
        key = root.branch_of.episode_id if root.branch_of is not None else root.episode_id
        ids.append(index.setdefault((group, key), len(index)))
    return torch.tensor(ids, dtype=torch.long)


def offline_update(
    trainer: Trainer,
    episodes: Sequence[Episode],
    staleness: Sequence[int],
    *,
    generator: torch.Generator,
    distill: DistillBatch | None = None,
    negative: StepBatch | None = None,
    reference: Policy | None = None,
) -> UpdateStats:
    """A policy-gradient update from replay-lane episodes collected by older checkpoints.

    Episodes more than ``max_staleness`` updates old are dropped; the rest are reweighted by the
    importance ratio pi_theta / pi_behaviour (behaviour = the logprob recorded at sampling time), detached
    and truncated at ``c`` (IMPALA's truncated importance sampling, Espeholt et al. 2018,
    https://arxiv.org/abs/1802.01561): no floor, so the push on an action the policy has already made unlikely
    fades with its ratio instead of driving its log-probability down without bound when a batch is replayed.
    Advantages are rewards centred on the replay batch's mean reward. With ``kl_coef`` > 0 and a
    ``reference``, the KL penalty toward it is added as in the online updates.
    """
    cfg, policy = trainer.config, trainer.policy
    kept = [e for e, age in zip(episodes, staleness) if age <= cfg.max_staleness]
    stats = UpdateStats(extras={"offline_dropped_stale": float(len(episodes) - len(kept))})
    if not kept:
        return stats
    rewards = torch.tensor([e.reward for e in kept], dtype=torch.float32)  # (E,)
    batch = flatten_episodes(kept)
    adv = (rewards - rewards.mean())[batch.episode_index]  # (N,)
    c = cfg.offline_ratio_clip
    for idx, distill_part in trainer.paired_minibatches(len(batch), distill, generator):
        mb = batch.subset(idx)
        ev = evaluate_steps(policy, mb)
        weight = torch.exp(ev.logprobs.detach() - mb.behavior_logprobs).clamp(max=c)  # (B,)
        policy_loss = -(weight * adv[idx] * ev.logprobs).mean()
        loss = policy_loss - cfg.entropy_coef * ev.entropy.mean()
        if cfg.kl_coef > 0 and reference is not None:
            logprobs, mask = ratio_terms(ev)  # (B, T)
            with torch.no_grad():
                ref, _ = ratio_terms(evaluate_steps(reference, mb))
            loss = loss + trainer.kl_penalty(logprobs, fit_width(ref, logprobs.shape[1]), mask, stats)
        loss = loss + trainer.auxiliary_loss(distill_part, negative, reference, stats)
        stats.policy_loss += policy_loss.item()
        stats.entropy += ev.entropy.mean().item()
        trainer.step(loss, stats)
    return trainer.finish(stats)

"""Advantage estimators as pure tensor functions: GAE, GRPO, Dr. GRPO, RLOO, Tree-GRPO and GiGPO's step
level.

Conventions (verl ``core_algos.py`` style): tensors in, tensors out, no module state, no autograd (every
result is detached). Step-level tensors are batch-major ``(B, T)``; group estimators take one scalar
reward per rollout ``(N,)`` and an integer group id per rollout ``(N,)`` (the task/prompt the rollout
belongs to). Group ids may be any integers, in any order; groups need not be contiguous or equal-sized.
Callers broadcast a rollout's scalar advantage over its tokens or steps themselves.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aios_rl.contracts.errors import TrainingError

__all__ = [
    "gae",
    "grpo_advantages",
    "dr_grpo_advantages",
    "rloo_advantages",
    "tree_grpo_advantages",
    "group_reward_std",
    "zero_variance_groups",
    "discounted_returns",
    "anchor_step_advantages",
]


def gae(
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    last_value: Tensor,
    gamma: float = 0.99,
    lam: float = 0.95,
) -> tuple[Tensor, Tensor]:
    """Generalized Advantage Estimation over batch-major rollouts.

    ``dones[b, t]`` is true when the transition taken at step ``t`` ended the episode: the value after it
    is not bootstrapped and the advantage trace restarts. A row may hold several consecutive episodes.
    ``last_value[b]`` is V(s) of the state reached after step ``T-1`` and is used only where that last
    step is not done. Time-limit truncation is not a terminal state: mark it done and fold
    ``gamma * V(final observation)`` into its reward (the stable-baselines3 convention). Padding after the
    end of a row is harmless as long as the last real step is marked done.

    Args:
        rewards: per-step rewards, shape ``(B, T)``.
        values: V(s_t) from the rollout, shape ``(B, T)``.
        dones: episode-end flags (bool or 0/1), shape ``(B, T)``.
        last_value: bootstrap values, shape ``(B,)``.
        gamma: discount factor in [0, 1].
        lam: GAE lambda in [0, 1].

    Returns:
        ``(advantages, returns)``, both ``(B, T)`` and detached; ``returns = advantages + values``
        (the TD(lambda) targets for the value loss).

    Raises:
        TrainingError: on mismatched shapes or ``gamma``/``lam`` outside [0, 1].

    Example:
        >>> adv, ret = gae(torch.ones(1, 3), torch.zeros(1, 3), torch.zeros(1, 3), torch.zeros(1), 1.0, 1.0)
        >>> adv.tolist()
        [[3.0, 2.0, 1.0]]
    """
    # Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage Estimation",
    # https://arxiv.org/abs/1506.02438. With nd_t = 1 - done_t:
    # delta_t = r_t + gamma * nd_t * V_{t+1} - V_t;  A_t = delta_t + gamma * lam * nd_t * A_{t+1}.
    if rewards.dim() != 2:
        raise TrainingError(f"gae expects rewards of shape (B, T), got {tuple(rewards.shape)}")
    _same_shape("gae", rewards=rewards, values=values, dones=dones)
    if tuple(last_value.shape) != (rewards.shape[0],):
        raise TrainingError(
            f"gae: last_value must have shape ({rewards.shape[0]},), one per row, "
            f"got {tuple(last_value.shape)}"
        )
    if not rewards.dtype.is_floating_point:
        raise TrainingError(f"gae: rewards must be a floating-point tensor, got dtype {rewards.dtype}")
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise TrainingError(f"gae: gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    with torch.no_grad():
        values = values.detach().to(rewards.dtype)
        not_done = 1.0 - dones.to(rewards.dtype)  # (B, T)
        next_value = last_value.detach().to(rewards.dtype)  # (B,)
        trace = torch.zeros_like(next_value)  # (B,)
        advantages = torch.zeros_like(rewards)  # (B, T)
        for t in reversed(range(rewards.shape[1])):
            delta = rewards[:, t] + gamma * not_done[:, t] * next_value - values[:, t]
            trace = delta + gamma * lam * not_done[:, t] * trace
            advantages[:, t] = trace
            next_value = values[:, t]
        return advantages, advantages + values


def grpo_advantages(
    rewards: Tensor, group_ids: Tensor, eps: float = 1e-6, normalize_std: bool = True
) -> Tensor:
    """Group-relative advantages: ``(r - mean_group) / (std_group + eps)``.

    The std is the *sample* std (``torch.std``, unbiased, n-1), as in verl. A group of size 1 gets mean 0
    and std 1, so its advantage is its raw reward (verl's behaviour, which
    ``reference/rail-and-baselines.md`` section 2.1 records). A group whose rewards are all equal gets
    exactly 0.

    Args:
        rewards: one scalar reward per rollout, shape ``(N,)``.
        group_ids: integer group id per rollout, shape ``(N,)``.
        eps: added to the std to avoid division by zero.
        normalize_std: divide by the group std (GRPO); ``False`` gives Dr. GRPO.

    Returns:
        Advantages, shape ``(N,)``, detached.

    Raises:
        TrainingError: on empty input, mismatched shapes or non-integer group ids.

    Example:
        >>> grpo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), eps=0.0).tolist()
        [0.7071067690849304, -0.7071067690849304]
    """
    # DeepSeekMath (GRPO), https://arxiv.org/abs/2402.03300; verl compute_grpo_outcome_advantage.
    centered, counts, inverse, ids = _group_centered(rewards, group_ids)  # (N,), (N,), (N,), (K,)
    return _grpo_from_centered(rewards, centered, counts, inverse, ids.shape[0], eps, normalize_std)


def dr_grpo_advantages(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """Dr. GRPO advantages ``r - mean_group`` (GRPO without std normalisation).

    Pair with the ``seq-mean-token-sum-norm`` loss aggregation to also drop the length bias.
    See :func:`grpo_advantages` for arguments, singleton groups and errors.
    """
    # Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective",
    # https://arxiv.org/abs/2503.20783 (verl: norm_adv_by_std_in_grpo=False).
    return grpo_advantages(rewards, group_ids, normalize_std=False)


def rloo_advantages(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """REINFORCE leave-one-out: ``r_i - mean of the other members of i's group``.

    Equals ``G / (G - 1) * (r_i - mean_group)``. A group of size 1 has no other member and gets 0
    (unlike verl, which passes the raw reward through).

    Args:
        rewards: one scalar reward per rollout, shape ``(N,)``.
        group_ids: integer group id per rollout, shape ``(N,)``.

    Returns:
        Advantages, shape ``(N,)``, detached.

    Raises:
        TrainingError: on empty input, mismatched shapes or non-integer group ids.
    """
    # Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from
    # Human Feedback in LLMs", https://arxiv.org/abs/2402.14740
    centered, counts, _, _ = _group_centered(rewards, group_ids)  # (N,), (N,)
    scale = torch.where(counts > 1, counts / (counts - 1).clamp_min(1.0), torch.zeros_like(counts))  # (N,)
    return scale * centered


def tree_grpo_advantages(rewards: Tensor, group_ids: Tensor, tree_ids: Tensor, eps: float = 1e-6) -> Tensor:
    """Tree-GRPO advantages: GRPO over the task's whole group plus GRPO within each rollout's tree.

    ``A_i = GRPO_group(r)_i + GRPO_tree(r)_i`` (``adv_estimator=tree`` in Tree-GRPO's code): the first term
    compares a rollout with every leaf of its task, the second with the other leaves of its own tree (the
    chain it was branched from and the chains branched from it), which share a prefix and so isolate what
    happened after the fork. A tree with one leaf has nothing to compare within and gets 0 for the second
    term (GRPO alone would pass its raw reward through). Each tree must lie inside one group.

    Args:
        rewards: one scalar reward per rollout, shape ``(N,)``.
        group_ids: integer group (task) id per rollout, shape ``(N,)``.
        tree_ids: integer tree id per rollout, shape ``(N,)``, unique across groups.
        eps: added to the std to avoid division by zero.

    Returns:
        Advantages, shape ``(N,)``, detached.

    Raises:
        TrainingError: on empty input, mismatched shapes, non-integer ids, or a tree in two groups.

    Example:
        >>> r, g = torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.tensor([0, 0, 0, 0])
        >>> [round(a, 3) for a in tree_grpo_advantages(r, g, torch.tensor([0, 0, 1, 2]), eps=0.0).tolist()]
        [2.207, -1.207, -0.5, -0.5]
    """
    # Ji et al. 2025, "Tree Search for LLM Agent Reinforcement Learning", https://arxiv.org/abs/2509.21240
    # (code: AMAP-ML/Tree-GRPO, inter-tree index = prompt uid, intra-tree index = tree uid).
    _same_shape("tree_grpo_advantages", rewards=rewards, tree_ids=tree_ids)
    inter = grpo_advantages(rewards, group_ids, eps)  # (N,); also checks rewards and group ids
    if tree_ids.dtype.is_floating_point or tree_ids.dtype == torch.bool:
        raise TrainingError(f"tree_grpo_advantages: tree ids must be integers, got dtype {tree_ids.dtype}")
    pairs = torch.unique(torch.stack([tree_ids.long(), group_ids.long()]), dim=1)  # (2, K)
    if torch.unique(pairs[0]).numel() != pairs.shape[1]:
        raise TrainingError("tree_grpo_advantages: a tree id appears in more than one group")
    centered, counts, inverse, ids = _group_centered(rewards, tree_ids)  # (N,), (N,), (N,), (K,)
    tree_grpo = _grpo_from_centered(rewards, centered, counts, inverse, ids.shape[0], eps, std_norm=True)
    intra = torch.where(counts > 1, tree_grpo, torch.zeros_like(inter))
    return inter + intra


def discounted_returns(rewards: Tensor, dones: Tensor, gamma: float) -> Tensor:
    """Return-to-go of each step, ``G_t = r_t + gamma * G_{t+1}``, restarting after each ``done``.

    Args:
        rewards: step rewards of flattened episodes, shape ``(N,)``; each episode's steps contiguous and in
            order, its last step marked in ``dones``.
        dones: bool, shape ``(N,)``; the last step of the input must be a done.
        gamma: discount in [0, 1].

    Returns:
        Returns, shape ``(N,)``, detached.

    Raises:
        TrainingError: mismatched shapes, an unfinished last episode or ``gamma`` outside [0, 1].

    Example:
        >>> discounted_returns(torch.tensor([0.0, 0.0, 1.0, 2.0]), torch.tensor([False, False, True, True]),
        ...                    0.5).tolist()
        [0.25, 0.5, 1.0, 2.0]
    """
    _same_shape("discounted_returns", rewards=rewards, dones=dones)
    if rewards.dim() != 1 or rewards.shape[0] == 0 or not bool(dones[-1]):
        raise TrainingError("discounted_returns needs (N,) steps, N >= 1, whose last step is a done")
    if not 0.0 <= gamma <= 1.0:
        raise TrainingError(f"gamma must be in [0, 1], got {gamma}")
    # GAE with V = 0 and lambda = 1 is exactly the discounted return (its trace restarts at each done).
    zero = torch.zeros_like(rewards)[None]  # (1, N)
    _, returns = gae(rewards[None], zero, dones[None], torch.zeros(1, dtype=rewards.dtype), gamma, 1.0)
    return returns[0]


def anchor_step_advantages(returns: Tensor, anchor_ids: Tensor) -> Tensor:
    """GiGPO's step-level advantage: a step's return minus the mean return of its anchor-state group.

    An anchor group holds the steps, across the episodes of one task's group, taken from the *same*
    observation (the caller hashes it). A step alone in its anchor group gets 0: nothing to compare with.
    verl-agent's default ``mean_norm`` (no std division); combined as ``A = A_episode + w * A_step``.

    Args:
        returns: discounted return of each step (:func:`discounted_returns`), shape ``(N,)``.
        anchor_ids: integer anchor group per step, shape ``(N,)``.

    Returns:
        Advantages, shape ``(N,)``, detached.

    Raises:
        TrainingError: on empty input, mismatched shapes or non-integer ids.

    Example:
        >>> anchor_step_advantages(torch.tensor([1.0, 0.5, -1.0]), torch.tensor([0, 0, 1])).tolist()
        [0.25, -0.25, 0.0]
    """
    # Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training",
    # https://arxiv.org/abs/2505.10978 (verl-agent gigpo/core_gigpo.py).
    centered, _, _, _ = _group_centered(returns, anchor_ids)  # singletons centre to exactly 0
    return centered


def group_reward_std(rewards: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor]:
    """Sample std (n-1) of the rewards of each group; a group of size 1 has std 0.

    Args:
        rewards: one scalar reward per rollout, shape ``(N,)``.
        group_ids: integer group id per rollout, shape ``(N,)``.

    Returns:
        ``(ids, std)``: the distinct group ids in ascending order, shape ``(K,)``, and each group's
        reward std, shape ``(K,)``.

    Raises:
        TrainingError: on empty input, mismatched shapes or non-integer group ids.
    """
    centered, counts, inverse, ids = _group_centered(rewards, group_ids)  # ids: (K,), ascending
    std = _sample_std(centered, counts, inverse, ids.shape[0])  # (N,)
    per_group = torch.zeros(ids.shape[0], dtype=std.dtype, device=std.device)  # (K,)
    per_group[inverse] = std  # every member of a group carries the same std
    return ids, per_group


def zero_variance_groups(rewards: Tensor, group_ids: Tensor, atol: float = 1e-8) -> Tensor:
    """Ids of the groups whose rewards carry no learning signal (std <= ``atol``, including size 1).

    Within such a group there is nothing to compare: its GRPO, Dr. GRPO and RLOO advantages are 0 (except
    GRPO's raw-reward pass-through for groups of size 1). They are worth an alarm
    (``rollout/frac_reward_zero_std`` = ``len(result) / number of groups``) and are what DAPO's dynamic
    sampling drops. ``torch.isin(group_ids, result)`` gives the per-rollout mask.

    Args:
        rewards: one scalar reward per rollout, shape ``(N,)``.
        group_ids: integer group id per rollout, shape ``(N,)``.
        atol: std at or below which a group counts as zero-variance.

    Returns:
        The zero-variance group ids in ascending order, shape ``(K0,)``.

    Raises:
        TrainingError: on empty input, mismatched shapes or non-integer group ids.
    """
    # TRL GRPOTrainer's frac_reward_zero_std; DAPO dynamic sampling, https://arxiv.org/abs/2503.14476
    ids, std = group_reward_std(rewards, group_ids)
    return ids[std <= atol]


def _group_centered(rewards: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate; return ``r - mean_group`` (N,), group size per rollout (N,), group index (N,), ids (K,).

    Rewards are shifted by their group minimum before the mean is taken, so a group of equal rewards
    centres to exactly 0: in float32, seven rewards of 0.3 otherwise centre to about 3e-8, and dividing by
    ``std + eps`` would turn that rounding noise into advantages of about 0.03.
    """
    if rewards.dim() != 1 or rewards.shape[0] == 0:
        raise TrainingError(f"expected rewards of shape (N,) with N >= 1, got {tuple(rewards.shape)}")
    if tuple(group_ids.shape) != tuple(rewards.shape):
        raise TrainingError(
            f"group_ids shape {tuple(group_ids.shape)} does not match rewards shape {tuple(rewards.shape)}"
        )
    if group_ids.dtype.is_floating_point or group_ids.dtype.is_complex or group_ids.dtype == torch.bool:
        raise TrainingError(f"group_ids must be an integer tensor, got dtype {group_ids.dtype}")
    if not rewards.dtype.is_floating_point:
        raise TrainingError(f"rewards must be a floating-point tensor, got dtype {rewards.dtype}")
    r = rewards.detach()
    ids, inverse = torch.unique(group_ids, return_inverse=True)  # (K,) ascending, (N,) in [0, K)
    counts = _group_sum(torch.ones_like(r), inverse, ids.shape[0])  # (K,)
    low = torch.full_like(counts, float("inf")).scatter_reduce(0, inverse, r, reduce="amin")  # (K,)
    shifted = r - low[inverse]  # (N,)
    centered = shifted - (_group_sum(shifted, inverse, ids.shape[0]) / counts)[inverse]  # (N,)
    return centered, counts[inverse], inverse, ids


def _grpo_from_centered(
    rewards: Tensor, centered: Tensor, counts: Tensor, inverse: Tensor, k: int, eps: float, std_norm: bool
) -> Tensor:
    """:func:`grpo_advantages` from :func:`_group_centered`'s output (singletons: mean 0, std 1)."""
    single = counts == 1
    centered = torch.where(single, rewards.detach(), centered)  # singleton: mean 0
    if not std_norm:
        return centered
    std = _sample_std(centered, counts, inverse, k)  # (N,)
    std = torch.where(single, torch.ones_like(std), std)  # singleton: std 1
    return centered / (std + eps)


def _group_sum(x: Tensor, inverse: Tensor, k: int) -> Tensor:
    """Sum of ``x`` (N,) within each of the ``k`` groups, shape (K,)."""
    return torch.zeros(k, dtype=x.dtype, device=x.device).index_add_(0, inverse, x)


def _sample_std(centered: Tensor, counts: Tensor, inverse: Tensor, k: int) -> Tensor:
    """Per-rollout sample std (n-1) of its group, from centred rewards; 0 for groups of size 1."""
    sq = _group_sum(centered * centered, inverse, k)[inverse]  # (N,)
    return torch.sqrt(sq / (counts - 1).clamp_min(1.0))


def _same_shape(where: str, **tensors: Tensor) -> None:
    """Raise TrainingError naming every tensor's shape unless all shapes are equal."""
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{name}={shape}" for name, shape in shapes.items())
        raise TrainingError(f"{where}: shapes must match, got {listed}")

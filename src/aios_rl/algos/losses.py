"""Loss functions of the trainers as pure tensor functions (verl ``core_algos.py`` style).

Every loss is a quantity to MINIMISE and is differentiable in the policy's outputs (``logprobs``,
``values``, ``logits``); rollout-time inputs (old logprobs, advantages, returns, reference logits) are
detached. Masks are boolean (any nonzero value counts as valid) and have the shape of the tensor they
mask. Masked-out entries may hold anything, including ``-inf`` or NaN: they are selected away
(``torch.where`` / ``masked_fill``) before any reduction, so they never reach the result or its gradient.

Shapes: token/step tensors are ``(B, T)`` (or any shape for ``token-mean``); candidate tensors are
``(B, N)`` with a ``(B, N)`` mask marking the real candidates of each row.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from aios_rl.contracts.errors import TrainingError

__all__ = [
    "AGG_MODES",
    "SurrogateStats",
    "aggregate",
    "clipped_surrogate",
    "value_loss",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "masked_log_softmax",
    "entropy_from_logits",
    "distillation_loss",
    "negative_lane_kl",
    "negative_lane_kl_sampled",
]

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
_LOG_RATIO_CLAMP = 20.0  # exp(20) ~ 5e8: ratios stay finite in float32/bfloat16 (verl clamps the same)


@dataclass(frozen=True)
class SurrogateStats:
    """Diagnostics of one :func:`clipped_surrogate` call, averaged over valid tokens.

    Attributes:
        clip_fraction: fraction of tokens whose clipped term was the active (larger) loss.
        approx_kl: k3 estimate of KL(pi_old || pi_theta), ``mean((ratio - 1) - log ratio)``.
        ratio_mean: mean importance ratio pi_theta / pi_old.
    """

    clip_fraction: float
    approx_kl: float
    ratio_mean: float


def aggregate(values: Tensor, mask: Tensor, mode: str = "token-mean", max_len: int | None = None) -> Tensor:
    """Reduce a per-token loss to a scalar.

    Modes:
        ``token-mean``: sum over valid tokens / number of valid tokens (any shape; DAPO default).
        ``seq-mean-token-sum``: per-row token sum, averaged over rows.
        ``seq-mean-token-mean``: per-row token mean, averaged over rows (original GRPO).
        ``seq-mean-token-sum-norm``: per-row token sum divided by the constant ``max_len`` (default
        ``T``), averaged over rows (Dr. GRPO). verl's mode of that name omits the average over rows, so
        its value is ``B`` times ours.

    The ``seq-mean-*`` modes need ``(B, T)`` input and average over rows with at least one valid token.
    With no valid token at all the result is 0, still attached to the graph.

    Args:
        values: per-token values, shape ``(B, T)`` (any shape for ``token-mean``).
        mask: valid tokens, same shape as ``values``.
        mode: one of :data:`AGG_MODES`.
        max_len: the constant of ``seq-mean-token-sum-norm``; ignored by the other modes.

    Returns:
        A scalar tensor.

    Raises:
        TrainingError: on an unknown mode (listing the valid ones), mismatched shapes, a ``seq-mean-*``
            mode on input that is not 2-D, or ``max_len <= 0``.
    """
    # Dr. GRPO (constant normaliser), https://arxiv.org/abs/2503.20783; DAPO (token-mean),
    # https://arxiv.org/abs/2503.14476; verl core_algos.agg_loss.
    if mode not in AGG_MODES:
        close = difflib.get_close_matches(mode, AGG_MODES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise TrainingError(
            f"unknown loss aggregation mode {mode!r}; valid modes: {', '.join(AGG_MODES)}.{hint}"
        )
    valid = _valid(mask, values, "aggregate", "values")
    masked = torch.where(valid, values, 0.0)
    if mode == "token-mean":
        return masked.sum() / valid.sum().clamp_min(1)
    if values.dim() != 2:
        raise TrainingError(f"aggregate mode {mode!r} needs (B, T) input, got shape {tuple(values.shape)}")
    token_sum = masked.sum(-1)  # (B,)
    n_tokens = valid.sum(-1)  # (B,)
    if mode == "seq-mean-token-sum":
        per_seq = token_sum
    elif mode == "seq-mean-token-mean":
        per_seq = token_sum / n_tokens.clamp_min(1)
    else:
        norm = values.shape[-1] if max_len is None else max_len
        if norm <= 0:
            raise TrainingError(f"aggregate: max_len must be positive, got {max_len}")
        per_seq = token_sum / norm
    return per_seq.sum() / (n_tokens > 0).sum().clamp_min(1)  # rows without tokens contribute 0


def clipped_surrogate(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    agg: str = "token-mean",
    max_len: int | None = None,
) -> tuple[Tensor, SurrogateStats]:
    """PPO clipped surrogate with decoupled clip range (DAPO clip-higher), as a loss to minimise.

    Per token: ``max(-A * rho, -A * clip(rho, 1 - eps_low, 1 + eps_high))`` with
    ``rho = exp(logprobs - old_logprobs)``, then reduced by :func:`aggregate`. ``eps_low = eps_high``
    is plain PPO; DAPO uses ``eps_high = 0.28``. The log ratio is clamped to +-20 before ``exp``.

    Args:
        logprobs: log pi_theta(a_t | s_t) under the current policy, shape ``(B, T)``; carries the grad.
        old_logprobs: log pi_old(a_t | s_t) from the rollout, same shape (detached).
        advantages: per-token advantages, same shape (detached); broadcast a per-rollout scalar first.
        mask: valid tokens/steps, same shape.
        eps_low: lower clip range, in [0, 1).
        eps_high: upper clip range, >= 0.
        agg: aggregation mode, see :func:`aggregate`.
        max_len: constant of the ``seq-mean-token-sum-norm`` mode.

    Returns:
        ``(loss, stats)``: the scalar loss and detached :class:`SurrogateStats`.

    Raises:
        TrainingError: on mismatched shapes, bad clip ranges or an unknown ``agg``.
    """
    # Schulman et al. 2017, PPO, https://arxiv.org/abs/1707.06347; clip-higher from DAPO,
    # https://arxiv.org/abs/2503.14476 (a larger eps_high lets low-probability tokens grow, against
    # entropy collapse).
    _same_shape("clipped_surrogate", logprobs=logprobs, old_logprobs=old_logprobs, advantages=advantages)
    if not (0.0 <= eps_low < 1.0 and eps_high >= 0.0):
        raise TrainingError(f"clip ranges need 0 <= eps_low < 1 and eps_high >= 0, got {eps_low}, {eps_high}")
    valid = _valid(mask, logprobs, "clipped_surrogate", "logprobs")
    log_ratio = torch.where(valid, logprobs - old_logprobs.detach(), 0.0)  # (B, T)
    log_ratio = log_ratio.clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)  # (B, T)
    adv = torch.where(valid, advantages.detach(), 0.0)  # (B, T)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    is_clipped = clipped > unclipped  # (B, T); the pessimistic (larger) loss wins
    per_token = torch.where(is_clipped, clipped, unclipped)
    loss = aggregate(per_token, valid, agg, max_len)
    with torch.no_grad():  # stats in at least float32 whatever the training dtype, with one device sync
        dtype = torch.promote_types(ratio.dtype, torch.float32)
        r, log_r = ratio.to(dtype), log_ratio.to(dtype)
        sums = torch.stack([
            (is_clipped & valid).sum().to(dtype),
            torch.where(valid, r - 1.0 - log_r, 0.0).sum(),
            torch.where(valid, r, 0.0).sum(),
        ])  # (3,)
        clip_fraction, approx_kl, ratio_mean = (sums / valid.sum().clamp_min(1)).tolist()
    return loss, SurrogateStats(clip_fraction, approx_kl, ratio_mean)


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip: float | None = None,
    agg: str = "token-mean",
    max_len: int | None = None,
) -> Tensor:
    """Squared-error value loss ``0.5 * (V - R)^2``, optionally clipped around the rollout values.

    With ``clip``, the per-token loss is ``0.5 * max((V - R)^2, (V_clip - R)^2)`` where
    ``V_clip = old_values + clamp(V - old_values, -clip, clip)``, as in PPO's reference implementation.

    Args:
        values: V(s_t) under the current parameters, shape ``(B, T)``; carries the grad.
        old_values: V(s_t) at rollout time, same shape (detached).
        returns: value targets (e.g. from :func:`aios_rl.algos.advantages.gae`), same shape (detached).
        mask: valid steps, same shape.
        clip: clip range for the value change, ``None`` for no clipping.
        agg: aggregation mode, see :func:`aggregate`.
        max_len: constant of the ``seq-mean-token-sum-norm`` mode.

    Returns:
        The scalar loss.

    Raises:
        TrainingError: on mismatched shapes, ``clip <= 0`` or an unknown ``agg``.
    """
    # OpenAI baselines ppo2 / CleanRL ppo.py value clipping (Engstrom et al. 2020 find it rarely helps,
    # https://arxiv.org/abs/2005.12729, so it is off by default).
    _same_shape("value_loss", values=values, old_values=old_values, returns=returns)
    valid = _valid(mask, values, "value_loss", "values")
    if clip is not None and clip <= 0:
        raise TrainingError(f"value_loss: clip must be positive or None, got {clip}")
    v = torch.where(valid, values, 0.0)  # (B, T)
    returns = torch.where(valid, returns.detach(), 0.0)
    per_token = 0.5 * (v - returns) ** 2  # (B, T)
    if clip is not None:
        old = torch.where(valid, old_values.detach(), 0.0)
        v_clip = old + (v - old).clamp(-clip, clip)
        per_token = torch.maximum(per_token, 0.5 * (v_clip - returns) ** 2)
    return aggregate(per_token, valid, agg, max_len)


def kl_k1(logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor | None = None) -> Tensor:
    """Per-token k1 estimate of KL(pi || ref): ``log pi - log ref`` (unbiased, high variance, can be < 0).

    All three estimators assume the tokens were sampled from pi (the policy being trained).

    Args:
        logprobs: log pi(a_t | s_t), any shape.
        ref_logprobs: log ref(a_t | s_t), same shape (detached).
        mask: optional valid entries, same shape; masked entries are 0.

    Returns:
        Per-token estimates, same shape as ``logprobs``.

    Raises:
        TrainingError: on mismatched shapes.
    """
    # John Schulman, "Approximating KL Divergence" (2020), http://joschu.net/blog/kl-approx.html
    return -_log_ref_ratio("kl_k1", logprobs, ref_logprobs, mask)


def kl_k2(logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor | None = None) -> Tensor:
    """Per-token k2 estimate of KL(pi || ref): ``0.5 * (log ref - log pi)^2`` (biased, low variance, >= 0).

    Arguments, returns and errors as :func:`kl_k1`.
    """
    # Schulman 2020, http://joschu.net/blog/kl-approx.html
    return 0.5 * _log_ref_ratio("kl_k2", logprobs, ref_logprobs, mask) ** 2


def kl_k3(logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor | None = None) -> Tensor:
    """Per-token k3 estimate of KL(pi || ref): ``(r - 1) - log r`` with ``r = ref / pi`` (unbiased, >= 0).

    verl's ``low_var_kl``. The log ratio is clamped to +-20 so ``r`` stays finite. Arguments, returns and
    errors as :func:`kl_k1`.
    """
    # Schulman 2020, http://joschu.net/blog/kl-approx.html. expm1 keeps k3 >= 0 to rounding for tiny
    # log r, where exp(x) - 1 - x in float32 cancels to a negative number; the clamp removes the rest.
    log_r = _log_ref_ratio("kl_k3", logprobs, ref_logprobs, mask).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return (torch.expm1(log_r) - log_r).clamp_min(0.0)


def masked_log_softmax(logits: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Log-softmax over the last dim restricted to valid entries, with 0 (not -inf) at invalid ones.

    Invalid logits are replaced by the dtype's most negative finite value before the softmax, so neither
    the result nor its gradient contains NaN, even for a row with no valid entry.

    Args:
        logits: scores, shape ``(..., N)``.
        mask: valid entries, same shape; ``None`` treats ``-inf`` logits as invalid.

    Returns:
        ``(logp, valid)``: log-probabilities (0 where invalid) and the boolean validity mask, both
        ``(..., N)``.

    Raises:
        TrainingError: on mismatched shapes.
    """
    valid = ~torch.isneginf(logits) if mask is None else _valid(mask, logits, "masked_log_softmax", "logits")
    filled = logits.masked_fill(~valid, torch.finfo(logits.dtype).min)
    logp = torch.log_softmax(filled, dim=-1)  # (..., N)
    return logp.masked_fill(~valid, 0.0), valid


def entropy_from_logits(logits: Tensor, mask: Tensor | None = None) -> Tensor:
    """Entropy of the softmax distribution over the valid entries of the last dim.

    Args:
        logits: scores, shape ``(..., N)`` (candidates of a row, or vocabulary of a token).
        mask: valid entries, same shape; ``None`` treats ``-inf`` logits as invalid.

    Returns:
        Entropy in nats, shape ``(...)``; 0 for a row with fewer than two valid entries.

    Raises:
        TrainingError: on mismatched shapes.
    """
    logp, valid = masked_log_softmax(logits, mask)  # (..., N)
    p = torch.where(valid, logp.exp(), 0.0)
    return -(p * logp).sum(-1)


def distillation_loss(
    logits: Tensor, mask: Tensor, target_index: Tensor, weights: Tensor | None = None
) -> Tensor:
    """Cross-entropy of the masked candidate distribution toward the teacher's reference action.

    Loss = ``sum_b w_b * (-log pi(target_b)) / (number of rows with a target)``: weights scale a row's
    pull (e.g. teacher confidence) and are not renormalised, so low-confidence batches pull less.

    Args:
        logits: candidate scores, shape ``(B, N)``; carries the grad.
        mask: real candidates, shape ``(B, N)``.
        target_index: teacher's candidate index per row, shape ``(B,)``, integer; ``-1`` = no target.
        weights: optional non-negative per-row weights, shape ``(B,)`` (default 1).

    Returns:
        The scalar loss; 0 (attached to the graph) when no row has a target.

    Raises:
        TrainingError: on mismatched shapes, a target outside ``[-1, N)``, a target pointing at a
            masked-out candidate, or negative weights.
    """
    # Policy distillation toward teacher actions (Rusu et al. 2016, https://arxiv.org/abs/1511.06295);
    # here the teacher gives one reference action per state, so the target is one-hot.
    if logits.dim() != 2:
        raise TrainingError(f"distillation_loss expects logits of shape (B, N), got {tuple(logits.shape)}")
    logp, valid = masked_log_softmax(logits, mask)  # (B, N)
    has, idx = _target_rows("distillation_loss", logits, target_index, valid)
    w = torch.ones_like(logp[:, 0]) if weights is None else weights.detach().to(logp.dtype)  # (B,)
    if tuple(w.shape) != (logits.shape[0],) or bool((w < 0).any()):
        raise TrainingError(
            f"distillation_loss: weights must be non-negative with shape ({logits.shape[0]},), "
            f"got shape {tuple(w.shape)}"
        )
    nll = -logp.gather(1, idx).squeeze(1)  # (B,)
    return torch.where(has, w * nll, 0.0).sum() / has.sum().clamp_min(1)


def unlikelihood_loss(logits: Tensor, mask: Tensor, target_index: Tensor) -> Tensor:
    """Unlikelihood of a target candidate: ``-log(1 - pi(target))`` averaged over the rows that have a target
    and at least one other valid candidate (the only rows where the target can be made less likely).

    Computed as ``logsumexp(valid logits) - logsumexp(valid logits but the target)``, so it stays well
    conditioned when ``pi(target)`` is 1 to float precision: its gradient on the target's logit is
    ``pi(target)``, where ascent on ``log pi(target)`` has ``1 - pi(target)``, which vanishes there.
    Welleck et al. 2019, unlikelihood training (https://arxiv.org/abs/1908.04319).

    Args:
        logits: candidate scores, shape ``(B, N)``; carries the grad.
        mask: real candidates, shape ``(B, N)``.
        target_index: the candidate to make unlikely per row, shape ``(B,)``, integer; ``-1`` = none.

    Returns:
        The scalar loss (>= 0); 0 (attached to the graph) when no row counts.

    Raises:
        TrainingError: on mismatched shapes, a target outside ``[-1, N)`` or a masked-out target.
    """
    if logits.dim() != 2:
        raise TrainingError(f"unlikelihood_loss expects logits of shape (B, N), got {tuple(logits.shape)}")
    valid = _valid(mask, logits, "unlikelihood_loss", "logits")  # (B, N)
    has, idx = _target_rows("unlikelihood_loss", logits, target_index, valid)
    others = valid & ~torch.zeros_like(valid).scatter(1, idx, True)  # (B, N)
    floor = torch.finfo(logits.dtype).min
    everything = torch.logsumexp(logits.masked_fill(~valid, floor), dim=-1)  # (B,)
    rest = torch.logsumexp(logits.masked_fill(~others, floor), dim=-1)  # (B,)
    counts = has & others.any(-1)  # (B,)
    return torch.where(counts, everything - rest, 0.0).sum() / counts.sum().clamp_min(1)


def _target_rows(where: str, logits: Tensor, target_index: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """``(has, idx)`` for a ``(B,)`` target index over ``(B, N)`` candidates: the rows with a target, and the
    targets as a ``(B, 1)`` gather index (0 where none); raises on a bad dtype, shape or index."""
    if tuple(target_index.shape) != (logits.shape[0],) or target_index.dtype.is_floating_point:
        raise TrainingError(
            f"{where}: target_index must be an integer tensor of shape ({logits.shape[0]},), "
            f"got dtype {target_index.dtype} shape {tuple(target_index.shape)}"
        )
    bad = (target_index < -1) | (target_index >= logits.shape[1])  # (B,)
    if bool(bad.any()):
        raise TrainingError(
            f"{where}: target_index must lie in [-1, {logits.shape[1]}), "
            f"got {target_index[bad].tolist()} at rows {bad.nonzero().flatten().tolist()}"
        )
    has = target_index >= 0  # (B,)
    idx = target_index.clamp_min(0).long().unsqueeze(1)  # (B, 1)
    bad = has & ~valid.gather(1, idx).squeeze(1)  # (B,)
    if bool(bad.any()):
        raise TrainingError(
            f"{where}: target_index points at a masked-out candidate at rows "
            f"{bad.nonzero().flatten().tolist()}; map a reference action that is not a candidate to -1"
        )
    return has, idx


def negative_lane_kl(logits: Tensor, ref_logits: Tensor, mask: Tensor) -> Tensor:
    """KL(pi_ref || pi_theta) over the masked candidate distribution, averaged over rows.

    Used on negative-lane states (where the update made things worse): it pulls the policy back toward
    the pre-update reference checkpoint there. It is exactly 0 when ``logits == ref_logits`` and > 0
    when the two distributions differ. Gradients flow only into ``logits``.

    Args:
        logits: current candidate scores, shape ``(B, N)``.
        ref_logits: pre-update reference scores, same shape (detached).
        mask: real candidates, same shape.

    Returns:
        The scalar mean over rows with at least one valid candidate; 0 (attached) if there is none.

    Raises:
        TrainingError: on mismatched shapes.
    """
    # The forward KL from the reference covers every action the reference liked (mass-covering), so the
    # penalty grows wherever the update dropped probability from an action pi_ref took.
    if logits.dim() != 2:
        raise TrainingError(f"negative_lane_kl expects logits of shape (B, N), got {tuple(logits.shape)}")
    _same_shape("negative_lane_kl", logits=logits, ref_logits=ref_logits)
    logp, valid = masked_log_softmax(logits, mask)  # (B, N)
    ref_logp, _ = masked_log_softmax(ref_logits.detach(), valid)  # (B, N)
    ref_p = torch.where(valid, ref_logp.exp(), 0.0)
    per_row = (ref_p * (ref_logp - logp)).sum(-1)  # (B,)
    return per_row.sum() / valid.any(-1).sum().clamp_min(1)


def negative_lane_kl_sampled(
    logprobs: Tensor, ref_logprobs: Tensor, behavior_logprobs: Tensor, max_weight: float = 10.0
) -> Tensor:
    """KL(pi_ref || pi_theta) estimated on recorded actions, for students that rank no candidates.

    A student that writes its answers (an LM in generate mode) has no candidate distribution to compare,
    so the negative-lane KL is estimated on the answers the episodes recorded, sampled from the behaviour
    policy ``b``: ``mean(w * k3)`` with ``w = pi_ref(a) / b(a)`` (detached, clipped at ``max_weight``)
    reweighting toward the reference's own samples, and ``k3 = r - 1 - log r``, ``r = pi_theta(a) /
    pi_ref(a)``, which is >= 0 and exactly 0 where ``pi_theta(a) == pi_ref(a)``. Gradients flow only into
    ``logprobs``; they pull each answer's probability back toward the reference's.

    Args:
        logprobs: current sequence log-probabilities of the recorded answers, shape ``(B,)``.
        ref_logprobs: the reference's, same shape (detached).
        behavior_logprobs: log-probabilities recorded at sampling time, same shape.
        max_weight: upper clip of the importance weight.

    Returns:
        The scalar mean over rows (0, attached, for B = 0).

    Raises:
        TrainingError: on mismatched shapes.
    """
    _same_shape("negative_lane_kl_sampled", logprobs=logprobs, ref_logprobs=ref_logprobs,
                behavior_logprobs=behavior_logprobs)
    if logprobs.numel() == 0:
        return logprobs.sum()
    log_r = (logprobs - ref_logprobs.detach()).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)  # (B,)
    k3 = torch.exp(log_r) - 1.0 - log_r  # (B,)
    log_w = (ref_logprobs.detach() - behavior_logprobs.detach()).clamp(max=math.log(max_weight))  # (B,)
    return (torch.exp(log_w) * k3).mean()


def _log_ref_ratio(where: str, logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor | None) -> Tensor:
    """``log ref - log pi`` per token, 0 where masked."""
    _same_shape(where, logprobs=logprobs, ref_logprobs=ref_logprobs)
    diff = ref_logprobs.detach() - logprobs
    if mask is None:
        return diff
    return torch.where(_valid(mask, logprobs, where, "logprobs"), diff, 0.0)


def _valid(mask: Tensor, like: Tensor, where: str, name: str) -> Tensor:
    """The mask as bool, after checking it has the shape of ``like``."""
    if tuple(mask.shape) != tuple(like.shape):
        raise TrainingError(
            f"{where}: mask shape {tuple(mask.shape)} does not match {name} shape {tuple(like.shape)}"
        )
    return mask if mask.dtype == torch.bool else mask != 0


def _same_shape(where: str, **tensors: Tensor) -> None:
    """Raise TrainingError naming every tensor's shape unless all shapes are equal."""
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{name}={shape}" for name, shape in shapes.items())
        raise TrainingError(f"{where}: shapes must match, got {listed}")

"""What the PPO and GRPO trainers share: config, optimiser, auxiliary loss terms, checkpoint state.

The policy being trained and the algorithm that trains it are different objects (Tianshou's Policy vs
Algorithm): a trainer holds a policy plus an optimiser and turns batches into updates; rollout code only
ever holds the policy.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from pydantic import Field, field_validator

from aios_rl.algos import losses
from aios_rl.algos.batch import DistillBatch, StepBatch, evaluate_steps, fit_width, ratio_terms
from aios_rl.contracts.config import MAX_PASSES, ConfigModel
from aios_rl.contracts.errors import ConfigError, PolicyError, TrainingError
from aios_rl.policy.base import Evaluation, Policy, float16_untrainable
from aios_rl.policy.factory import policy_spec
from aios_rl.storage.checkpoints import capture_rng, flatten_state, restore_rng, unflatten_state


class TrainerConfig(ConfigModel):
    """Update hyperparameters shared by PPO and the GRPO family."""

    algo: Literal["grpo", "ppo"] = Field(default="grpo", description="grpo (group advantages) or ppo (GAE + value).")
    advantage: Literal["grpo", "dr_grpo", "rloo", "tree"] = Field(
        default="grpo",
        description="GRPO-family estimator; tree: Tree-GRPO (group plus within-tree GRPO, for tree-N allocators).",
    )
    lr: float = Field(default=1e-3, gt=0, description="Adam learning rate.")
    update_epochs: int = Field(
        default=2, ge=1, le=MAX_PASSES, description="Passes over each batch per update (at most 100000)."
    )
    minibatch_size: int = Field(default=64, ge=1, description="Steps per gradient step.")
    eps_low: float = Field(default=0.2, gt=0, lt=1, description="Lower clip range of the ratio.")
    eps_high: float = Field(default=0.28, gt=0, description="Upper clip range (DAPO clip-higher).")
    agg: str = Field(default="token-mean", description="Loss aggregation mode (see algos/losses.AGG_MODES).")
    kl_coef: float = Field(
        default=0.0, ge=0, description="Weight of KL(pi || reference), k3 estimator, per token for a student "
        "that writes its actions; the reference is the policy before the update (PPO's KL penalty). 0: off.",
    )
    entropy_coef: float = Field(default=0.01, ge=0, description="Entropy bonus weight.")
    value_coef: float = Field(default=0.5, ge=0, description="PPO value-loss weight.")
    value_clip: float | None = Field(
        default=None, gt=0, description="PPO value clipping range (None: unclipped)."
    )
    gamma: float = Field(default=1.0, gt=0, le=1, description="Discount for GAE.")
    lam: float = Field(default=0.95, ge=0, le=1, description="GAE lambda.")
    step_advantage_coef: float = Field(
        default=1.0, ge=0, description="GRPO family: weight w of GiGPO's step-level advantage (steps from the same "
        "observation within a task's group compared by discounted return); A = A_episode + w * A_step. 0: off.",
    )
    step_gamma: float = Field(default=0.95, ge=0, le=1, description="Discount of the step-level returns (GiGPO).")
    distill_coef: float = Field(default=1.0, ge=0, description="Weight of cross-entropy toward teacher actions.")
    negative_kl_coef: float = Field(default=0.5, ge=0, description="Weight of the negative-lane KL term.")
    self_imitation_coef: float = Field(
        default=1.0, ge=0, description="`shell train` RL epochs: weight of cross-entropy toward the actions of each "
        "training task's best verified success so far (algos/self_imitation), a target where no teacher has one. "
        "It joins the distillation term, so distill_coef scales it too (distill_coef 0 turns both off). 0: off.",
    )
    max_grad_norm: float = Field(default=1.0, gt=0, description="Gradient clipping norm.")
    offline_ratio_clip: float = Field(
        default=2.0, gt=1,
        description="Offline replay: importance ratios pi/behaviour truncated at c (no floor).",
    )
    max_staleness: int = Field(default=4, ge=0, description="Offline replay: drop episodes this many updates old.")

    @field_validator("agg")
    @classmethod
    def _known_agg(cls, mode: str) -> str:
        """Refused when the configuration is read, before a run stores it (a run stored with an unknown mode
        could neither build its trainer nor be resumed with the mode corrected)."""
        if mode not in losses.AGG_MODES:
            close = difflib.get_close_matches(mode, losses.AGG_MODES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"trainer.agg {mode!r} is not one of {', '.join(losses.AGG_MODES)}{hint}")
        return mode


@dataclass
class UpdateStats:
    """Averages over the gradient steps of one update (metric keys under ``train/``).

    ``distill_loss`` and ``negative_kl`` average over the steps that had that term only (a distillation
    batch smaller than the update's minibatch count joins some of its steps); 0 when no step had it.
    """

    loss: float = 0.0
    policy_loss: float = 0.0
    value_loss: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0
    distill_loss: float = 0.0
    negative_kl: float = 0.0
    clip_fraction: float = 0.0
    approx_kl: float = 0.0
    grad_norm: float = 0.0
    first_ratio_mean: float = float("nan")
    steps: int = 0
    distill_steps: int = 0
    negative_kl_steps: int = 0
    extras: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        keys = ("loss", "policy_loss", "value_loss", "kl", "entropy", "distill_loss", "negative_kl",
                "clip_fraction", "approx_kl", "grad_norm", "first_ratio_mean")
        return {f"train/{k}": float(getattr(self, k)) for k in keys} | {f"train/{k}": v for k, v in self.extras.items()}


def trainable_parameters(policy: Policy) -> list[torch.nn.Parameter]:
    """The parameters a :class:`Trainer` steps: ``policy``'s that require a gradient.

    Raises:
        TrainingError: it has none.
        ConfigError: some are float16 (a causal-lm student stored with dtype float16 and no LoRA, which
            loads for evaluation): Adam's eps (1e-8) is 0 in float16, so a zero gradient gives 0 / 0.
    """
    params = [p for p in policy.parameters() if p.requires_grad]
    if not params:
        raise TrainingError("the policy has no trainable parameters")
    if any(p.dtype == torch.float16 for p in params):
        raise float16_untrainable(stored=True)
    return params


class Trainer:
    """Holds the policy, its optimiser and (optionally) a frozen reference policy for KL terms."""

    def __init__(self, policy: Policy, config: TrainerConfig | None = None) -> None:
        self.policy = policy
        self.config = config or TrainerConfig()
        if self.config.agg not in losses.AGG_MODES:
            raise TrainingError(f"trainer.agg must be one of {losses.AGG_MODES}, got {self.config.agg!r}")
        self.optimizer = torch.optim.Adam(trainable_parameters(policy), lr=self.config.lr)

    # -- pieces every update step uses -----------------------------------------------------------

    def minibatches(self, n: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
        """Shuffled index minibatches covering ``n`` items, ``update_epochs`` times."""
        size = self.config.minibatch_size
        for _ in range(self.config.update_epochs):
            order = torch.randperm(n, generator=generator)
            for start in range(0, n, size):
                yield order[start : start + size]

    def paired_minibatches(
        self, n: int, distill: DistillBatch | None, generator: torch.Generator
    ) -> Iterator[tuple[torch.Tensor, DistillBatch | None]]:
        """:meth:`minibatches`, each with its share of ``distill``: in every pass the distillation states are
        shuffled and split into as many parts as the pass has minibatches, so each state is in one gradient
        step per pass and the distillation term costs one pass over ``distill`` per pass (not one per step).
        A part is None when ``distill`` has fewer states than the pass has minibatches."""
        size = self.config.minibatch_size
        for _ in range(self.config.update_epochs):
            steps = torch.randperm(n, generator=generator).split(size)
            parts: list[DistillBatch | None] = [None] * len(steps)
            if distill is not None and len(distill):
                shares = torch.randperm(len(distill), generator=generator).tensor_split(len(steps))
                parts = [distill.subset(share) if len(share) else None for share in shares]
            yield from zip(steps, parts, strict=True)

    def auxiliary_loss(
        self,
        distill: DistillBatch | None,
        negative: StepBatch | None,
        reference: Policy | None,
        stats: UpdateStats,
    ) -> torch.Tensor:
        """Distillation toward teacher actions + the negative-lane KL toward the pre-update reference."""
        total = torch.zeros(())
        if distill is not None and len(distill) and self.config.distill_coef > 0:
            ev = self.policy.evaluate(distill.observations, distill.environments, distill.targets)
            if ev.candidate_mask.shape[1] == 0:
                # A student that writes its answers (an LM in generate mode) ranks no candidates: the same
                # cross-entropy, -log pi(target), on the target text it would have to write.
                d_loss = (distill.weights * -ev.logprobs).sum() / len(distill)
            else:
                target = torch.tensor(
                    [obs.candidates.index(t) for obs, t in zip(distill.observations, distill.targets)],
                    dtype=torch.long,
                )  # (M,)
                d_loss = losses.distillation_loss(ev.candidate_logits, ev.candidate_mask, target, distill.weights)
            total = total + self.config.distill_coef * d_loss
            stats.distill_loss += d_loss.item()
            stats.distill_steps += 1
        if negative is not None and len(negative) and reference is not None and self.config.negative_kl_coef > 0:
            ev = evaluate_steps(self.policy, negative)
            with torch.no_grad():
                ref = evaluate_steps(reference, negative)
            if ev.candidate_mask.shape[1] == 0:  # a student that writes its answers: on the recorded ones
                n_kl = losses.negative_lane_kl_sampled(ev.logprobs, ref.logprobs, negative.behavior_logprobs)
            else:
                n_kl = losses.negative_lane_kl(ev.candidate_logits, ref.candidate_logits, ev.candidate_mask)
            total = total + self.config.negative_kl_coef * n_kl
            stats.negative_kl += n_kl.item()
            stats.negative_kl_steps += 1
        return total

    def clipped_terms(
        self,
        ev: Evaluation,
        old: torch.Tensor,
        adv: torch.Tensor,
        ref: torch.Tensor | None,
        stats: UpdateStats,
    ) -> tuple[torch.Tensor, losses.SurrogateStats, torch.Tensor]:
        """One minibatch's clipped surrogate and KL penalty, per action or per token (:func:`ratio_terms`).

        ``old`` and ``ref`` are the minibatch's rows of the whole batch's log-probabilities, scored before the
        update (any width: lined up with :func:`fit_width`; their width is the update's constant for
        ``seq-mean-token-sum-norm``); ``adv`` holds one advantage per row. Returns (surrogate loss, its
        statistics, the KL term).
        """
        cfg = self.config
        logprobs, mask = ratio_terms(ev)  # (B, T): T = 1 per action, else answer tokens
        width = logprobs.shape[1]
        policy_loss, clip = losses.clipped_surrogate(
            logprobs, fit_width(old, width), adv[:, None].expand(-1, width), mask,
            cfg.eps_low, cfg.eps_high, cfg.agg, max_len=old.shape[1],  # one constant for the whole update
        )
        kl = self.kl_penalty(logprobs, None if ref is None else fit_width(ref, width), mask, stats)
        return policy_loss, clip, kl

    def kl_penalty(
        self, logprobs: torch.Tensor, ref: torch.Tensor | None, mask: torch.Tensor, stats: UpdateStats
    ) -> torch.Tensor:
        """``kl_coef`` x the k3 estimate of KL(pi || reference) on the sampled actions or tokens ``(B, T)``,
        averaged over ``mask`` (0 without a reference)."""
        if ref is None:
            return torch.zeros(())
        kl = losses.aggregate(losses.kl_k3(logprobs, ref), mask, "token-mean")
        stats.kl += kl.item()
        return self.config.kl_coef * kl

    def surrogate_step(
        self,
        loss: torch.Tensor,
        policy_loss: torch.Tensor,
        entropy: torch.Tensor,
        clip: losses.SurrogateStats,
        stats: UpdateStats,
    ) -> None:
        """Record a clipped-surrogate minibatch's statistics, then take the gradient step."""
        if stats.steps == 0:
            stats.first_ratio_mean = clip.ratio_mean
        stats.policy_loss += policy_loss.item()
        stats.entropy += entropy.item()
        stats.clip_fraction += clip.clip_fraction
        stats.approx_kl += clip.approx_kl
        self.step(loss, stats)

    def step(self, loss: torch.Tensor, stats: UpdateStats) -> None:
        if not torch.isfinite(loss):
            raise TrainingError(f"non-finite loss {loss.item()}; the update is abandoned")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        norm = torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        if not torch.isfinite(norm):  # a finite loss can still back-propagate NaN (e.g. sqrt at 0)
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingError(f"non-finite gradient norm {norm.item()}; the update is abandoned")
        self.optimizer.step()
        stats.loss += loss.item()
        stats.grad_norm += norm.item()
        stats.steps += 1

    @staticmethod
    def finish(stats: UpdateStats) -> UpdateStats:
        """Turn the per-step sums into means (the auxiliary terms' over the steps that had them)."""
        n = max(stats.steps, 1)
        for name in ("loss", "policy_loss", "value_loss", "kl", "entropy", "clip_fraction", "approx_kl",
                     "grad_norm"):
            setattr(stats, name, getattr(stats, name) / n)
        stats.distill_loss /= max(stats.distill_steps, 1)
        stats.negative_kl /= max(stats.negative_kl_steps, 1)
        return stats

    # -- checkpoint state ----------------------------------------------------------------------------

    def state_tensors(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Weights, optimiser state and RNG as flat tensors + a JSON structure for ``meta.json``."""
        tensors = {f"policy/{k}": v for k, v in self.policy.state_dict().items()}
        optim_tensors, optim_structure = flatten_state("optim", self.optimizer.state_dict())
        rng_tensors, rng_structure = flatten_state("rng", capture_rng())
        meta = {
            "optimizer": optim_structure,
            "rng": rng_structure,
            "trainer_config": self.config.model_dump(mode="json"),
            "policy": policy_spec(self.policy),
        }
        return tensors | optim_tensors | rng_tensors, meta

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any], *, rng: bool = True) -> None:
        load_policy_weights(self.policy, tensors)
        if "optimizer" in meta:
            self.optimizer.load_state_dict(unflatten_state("optim", tensors, meta["optimizer"]))
        if rng and "rng" in meta:
            restore_rng(unflatten_state("rng", tensors, meta["rng"]))


def load_policy_weights(policy: Policy, tensors: dict[str, torch.Tensor]) -> None:
    """Load only the policy part of a checkpoint (evaluation, reference copies).

    Raises:
        PolicyError: the tensors do not fit the policy (e.g. a checkpoint written by an older student layout).
    """
    try:
        policy.load_state_dict({k.removeprefix("policy/"): v for k, v in tensors.items() if k.startswith("policy/")})
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[:3]
        raise PolicyError(
            f"checkpoint weights do not fit this {type(policy).__name__} (written by a different student layout or "
            f"version?); start a new run directory. {' '.join(first)}"
        ) from exc


def mean_or_nan(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan

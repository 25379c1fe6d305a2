"""RAIL's pure parts: the context z, the intervention arms, the realized gain and the regression math.

RAIL ("Optimizing What Policies Learn From: Recoverability-aware Rollout Intervention Learning",
https://arxiv.org/abs/2608.05080) chooses rollout interventions as an online contextual bandit. The paper
says z has 26 dimensions made of rollout statistics, progress and a projected hidden state, but no stored
source lists them (reference/rail-and-baselines.md §1.5, §4), so the layout below is ours:

====== ===================== ================================================================================
idx    name                  definition
====== ===================== ================================================================================
0      anchor_entropy        entropy of the candidate step (last of ``step_entropies``) / max_entropy
1      entropy_delta         anchor_entropy − entropy of the trajectory's first step (ARPO's ΔH)
2      traj_entropy_mean     mean normalized entropy of the trajectory's steps so far (anchor included)
3      traj_entropy_max      max normalized entropy of the trajectory's steps so far
4      anchor_prob           probability of the action sampled at the anchor, in (0, 1]; per token (exp of the
                             mean token log-prob) for a policy that writes its actions
5      group_reward_mean     mean reward of the group's rollouts finished so far (0 when none)
6      group_reward_var      population variance of those rewards (0 when fewer than two)
7      group_frac_positive   fraction of those rewards > 0
8      group_finished_frac   finished rollouts / base group size
9      progress              steps taken so far (len(step_entropies)) / max_steps
10     budget_left_frac      rollouts this prompt may still spend / its total budget
11–25  hidden_proj[0..14]    fixed seeded Gaussian projection of the policy hidden state, L2-normalized
====== ===================== ================================================================================

Normalized entropies are clipped to [0, 1]; ``max_entropy`` is log of the action-space size (log|V| for
token policies, log(#candidates) for candidate scorers). The raw hidden state is kept on the trace, so the
projection can change later without re-running rollouts.

The controller's features are ``φ(z, b) = [z, 1] ⊕ (onehot(b) ⊗ [z, 1])`` over the non-null arms: a shared
linear model plus one per-arm deviation, both L2-shrunk, so a rarely tried arm predicts like the shared
model instead of like zero. The null arm is not modelled: no intervention leaves the group unchanged, so
its gain is 0 by definition.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from aios_rl.contracts.episode import DecodingRegime
from aios_rl.contracts.errors import ContractError

__all__ = [
    "CONTEXT_DIM", "CONTEXT_NAMES", "PROJECTION_DIMS", "NULL_ARM", "Arm", "ContextInputs", "HiddenProjection",
    "build_arms", "context_features", "reward_variance", "realized_gain", "recency_weights", "huber",
    "design_matrix", "ridge_fit", "huber_fit", "sign_agreement",
]

PROJECTION_DIMS = 15
_SCALARS = (
    "anchor_entropy", "entropy_delta", "traj_entropy_mean", "traj_entropy_max", "anchor_prob",
    "group_reward_mean", "group_reward_var", "group_frac_positive", "group_finished_frac", "progress",
    "budget_left_frac",
)
CONTEXT_NAMES: tuple[str, ...] = _SCALARS + tuple(f"hidden_proj_{i}" for i in range(PROJECTION_DIMS))
CONTEXT_DIM = len(CONTEXT_NAMES)  # 26


# ---------------------------------------------------------------------------------------------- context


@dataclass(frozen=True)
class ContextInputs:
    """What the rollout engine knows about one candidate branch step of one trajectory.

    Attributes:
        step_entropies: entropy (nats) of each step taken so far, oldest first; the last one is the
            candidate branch step. At least one. The rollout engine passes each already divided by the log of
            its own step's action-space size (steps may offer different numbers of candidates), with
            ``max_entropy`` 1.
        anchor_logprob: log-probability of the action sampled at the candidate step (<= 0): the whole action's
            for a policy that chooses among candidates, per token for one that writes its actions.
        group_rewards: rewards of the group's rollouts that have finished so far.
        base_group_size: rollouts the group starts with (G0).
        max_steps: the environment's step limit.
        budget_left: rollouts this prompt may still spend.
        budget_total: the prompt's total rollout budget.
        hidden: the policy's raw hidden state at the candidate step (``ActionSample.hidden``); may be empty.
        max_entropy: entropy normalizer, log of the action-space size.
    """

    step_entropies: tuple[float, ...]
    anchor_logprob: float
    group_rewards: tuple[float, ...]
    base_group_size: int
    max_steps: int
    budget_left: int
    budget_total: int
    hidden: tuple[float, ...] = ()
    max_entropy: float = 1.0

    def __post_init__(self) -> None:
        problems = []
        if not self.step_entropies:
            problems.append("step_entropies: empty; the candidate step's entropy must be the last entry")
        numbers = (*self.step_entropies, self.anchor_logprob, *self.group_rewards, *self.hidden)
        if not all(math.isfinite(v) for v in (*numbers, self.max_entropy)):
            problems.append("non-finite entropy, anchor_logprob, reward, hidden value or max_entropy")
        if self.max_entropy <= 0:
            problems.append(f"max_entropy: {self.max_entropy}, expected > 0")
        for name in ("base_group_size", "max_steps", "budget_total"):
            if getattr(self, name) <= 0:
                problems.append(f"{name}: {getattr(self, name)}, expected >= 1")
        if self.budget_left < 0:
            problems.append(f"budget_left: {self.budget_left}, expected >= 0")
        if problems:
            raise ContractError("invalid RAIL context inputs", problems)

    def normalized_entropies(self) -> np.ndarray:
        """Step entropies divided by ``max_entropy`` and clipped to [0, 1], shape ``(T,)``."""
        return np.clip(np.asarray(self.step_entropies, dtype=np.float64) / self.max_entropy, 0.0, 1.0)


class HiddenProjection:
    """A fixed Gaussian random projection R^H → R^15, L2-normalized (Johnson–Lindenstrauss style).

    The matrix is drawn from ``numpy.random.RandomState(seed)``, whose stream NumPy keeps stable across
    versions, so a checkpoint stores only (seed, H) plus a checksum and rebuilds the identical matrix. H is
    fixed by the first non-empty hidden state seen.
    """

    def __init__(self, seed: int, in_dim: int | None = None) -> None:
        self.seed = seed
        self.in_dim: int | None = None
        self._matrix: np.ndarray | None = None  # (15, H)
        if in_dim is not None:
            self._build(in_dim)

    def _build(self, in_dim: int) -> None:
        rs = np.random.RandomState(self.seed)
        self._matrix = rs.standard_normal((PROJECTION_DIMS, in_dim)) / math.sqrt(PROJECTION_DIMS)
        self.in_dim = in_dim

    def checksum(self) -> str:
        """sha256 of the matrix bytes ('' before the first hidden state)."""
        return "" if self._matrix is None else hashlib.sha256(self._matrix.tobytes()).hexdigest()

    def __call__(self, hidden: Sequence[float]) -> np.ndarray:
        """The projected, L2-normalized hidden state, shape ``(15,)``; zeros for an empty hidden state."""
        h = np.asarray(hidden, dtype=np.float64)
        if h.size == 0:
            return np.zeros(PROJECTION_DIMS)
        if self._matrix is None:
            self._build(h.size)
        if h.shape != (self.in_dim,):
            raise ContractError(f"hidden state has shape {h.shape}, the projection expects ({self.in_dim},)")
        p = self._matrix @ h  # (15,)
        norm = float(np.linalg.norm(p))
        return p / norm if norm > 0 else np.zeros(PROJECTION_DIMS)

    def state_dict(self) -> dict[str, object]:
        return {"seed": self.seed, "in_dim": self.in_dim, "checksum": self.checksum()}

    @classmethod
    def from_state_dict(cls, state: dict[str, object]) -> HiddenProjection:
        in_dim = state["in_dim"]
        proj = cls(int(state["seed"]), None if in_dim is None else int(in_dim))  # type: ignore[call-overload]
        if proj.checksum() != state["checksum"]:
            raise ContractError("hidden projection checksum mismatch: this NumPy draws a different matrix")
        return proj


def context_features(inputs: ContextInputs, projected_hidden: np.ndarray) -> np.ndarray:
    """The 26-feature context z of a candidate branch step (layout in the module docstring).

    Args:
        inputs: the engine's view of the step.
        projected_hidden: ``HiddenProjection(hidden)``, shape ``(15,)``.

    Returns:
        z, shape ``(26,)``, float64.
    """
    if projected_hidden.shape != (PROJECTION_DIMS,):
        raise ContractError(f"projected_hidden has shape {projected_hidden.shape}, not ({PROJECTION_DIMS},)")
    ent = inputs.normalized_entropies()  # (T,)
    rewards = np.asarray(inputs.group_rewards, dtype=np.float64)
    scalars = [
        ent[-1],
        ent[-1] - ent[0],
        ent.mean(),
        ent.max(),
        math.exp(min(inputs.anchor_logprob, 0.0)),
        rewards.mean() if rewards.size else 0.0,
        reward_variance(rewards),
        float((rewards > 0).mean()) if rewards.size else 0.0,
        rewards.size / inputs.base_group_size,
        ent.size / inputs.max_steps,
        inputs.budget_left / inputs.budget_total,
    ]
    return np.concatenate([np.asarray(scalars, dtype=np.float64), projected_hidden])


# ---------------------------------------------------------------------------------------------- arms


@dataclass(frozen=True)
class Arm:
    """One intervention b: ``m`` extra branches under a decoding regime; ``m == 0`` is "no intervention"."""

    name: str
    m: int
    regime: DecodingRegime | None

    @property
    def is_null(self) -> bool:
        return self.m == 0


NULL_ARM = Arm("none", 0, None)


def build_arms(budgets: Sequence[int], regimes: Sequence[DecodingRegime]) -> tuple[Arm, ...]:
    """The arm set B = {∅} ∪ (M × T), null arm first, then budgets in order, regimes within each budget."""
    return (NULL_ARM, *(Arm(f"m{m}-{r.name}", m, r) for m in budgets for r in regimes))


# ---------------------------------------------------------------------------------------------- gain


def reward_variance(rewards: Sequence[float] | np.ndarray) -> float:
    """I(Y): the *population* variance (1/n) Σ (y − ȳ)² of a group's rewards; 0 for an empty group.

    RAIL calls this the group's reward contrast; for 0/1 rewards it is p̂(1 − p̂), largest at p̂ = 1/2.
    """
    y = np.asarray(rewards, dtype=np.float64)
    return float(np.mean((y - y.mean()) ** 2)) if y.size else 0.0


def realized_gain(base_rewards: Sequence[float], branch_rewards: Sequence[float]) -> float:
    """Δ = I(base ∪ branches) − I(base): how much the intervention's rollouts changed the group's contrast."""
    return reward_variance([*base_rewards, *branch_rewards]) - reward_variance(base_rewards)


# ---------------------------------------------------------------------------------------------- regression


def recency_weights(n: int, lam: float) -> np.ndarray:
    """w_i = λ^(age_i) for n samples ordered oldest → newest, age_i = n − 1 − i; shape ``(n,)``."""
    return lam ** np.arange(n - 1, -1, -1, dtype=np.float64)


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    """Huber_δ(r) = ½r² for |r| ≤ δ, δ(|r| − ½δ) otherwise (elementwise)."""
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def design_matrix(z: np.ndarray, arm_index: np.ndarray, n_arms: int) -> np.ndarray:
    """φ(z, b) rows for contexts ``z`` (N, D) and non-null arm indices (N,) in [0, n_arms).

    Returns:
        (N, (D + 1)(1 + n_arms)): the shared block [z, 1] then the arm's block [z, 1]; other blocks zero.
    """
    n, d = z.shape
    zb = np.hstack([z, np.ones((n, 1))])  # (N, D+1)
    x = np.zeros((n, (d + 1) * (1 + n_arms)))
    x[:, : d + 1] = zb
    cols = (d + 1) * (1 + arm_index[:, None]) + np.arange(d + 1)[None, :]  # (N, D+1)
    x[np.arange(n)[:, None], cols] = zb
    return x


def _weighted_ridge(x: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: float) -> np.ndarray:
    # Solved in torch float64 so the work obeys the process's torch thread setting; NumPy's BLAS starts
    # its own thread pool, which thrashed (14x slower) on a loaded 2-core box.
    xt, yt, wt = (torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)) for a in (x, y, w))
    xtw = xt.T * wt  # (P, N)
    gram = xtw @ xt + alpha * torch.eye(xt.shape[1], dtype=torch.float64)  # (P, P)
    if alpha > 0:
        return torch.linalg.solve(gram, xtw @ yt).numpy()
    return torch.linalg.lstsq(gram, (xtw @ yt).unsqueeze(1)).solution.squeeze(1).numpy()


def ridge_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: float) -> np.ndarray:
    """argmin_θ Σ w_i ½(x_i·θ − y_i)² + (α/2)‖θ‖² in closed form; shape ``(P,)``."""
    return _weighted_ridge(x, y, w, alpha)


def huber_fit(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, delta: float, alpha: float,
    iters: int = 50, tol: float = 1e-9, init: np.ndarray | None = None,
) -> np.ndarray:
    """argmin_θ Σ w_i Huber_δ(x_i·θ − y_i) + (α/2)‖θ‖² by iteratively reweighted least squares.

    Each step solves the weighted ridge problem with extra weights min(1, δ/|r_i|), the half-quadratic
    majorizer of Huber, so the objective never increases (Huber 1964; Holland & Welsch 1977). Starts from
    ``init`` or the ridge solution.
    """
    theta = ridge_fit(x, y, w, alpha) if init is None else np.asarray(init, dtype=np.float64)
    for _ in range(iters):
        r = np.abs(x @ theta - y)
        omega = np.where(r <= delta, 1.0, delta / np.maximum(r, 1e-300))
        new = _weighted_ridge(x, y, w * omega, alpha)
        done = float(np.max(np.abs(new - theta))) <= tol * (1.0 + float(np.max(np.abs(new))))
        theta = new
        if done:
            break
    return theta


def sign_agreement(pred: Sequence[float], y: Sequence[float], eps: float) -> float | None:
    """Fraction of samples with |y| > eps where sign(pred) == sign(y); None when there are none.

    A prediction of exactly 0 agrees with nothing: it has no opinion about the sign.
    """
    p, t = np.asarray(pred, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.abs(t) > eps
    return float(np.mean(np.sign(p[keep]) == np.sign(t[keep]))) if keep.any() else None

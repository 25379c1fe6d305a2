"""RAIL's recoverability controller Δ̂(z, b): shadow heuristic, promotion, live argmax behind a gate.

RAIL (https://arxiv.org/abs/2608.05080; reference/rail-and-baselines.md §1) treats "where and how to
branch a rollout" as an online contextual bandit. The reward of arm b in context z is the realized gain
y = I(group ∪ branches) − I(group), I = reward variance (:mod:`aios_rl.rollout.rail_features`).

Lifecycle of :class:`RailController`:

* **shadow**: a heuristic acts, as the paper's warm-up does. Branch only when the step's entropy is above
  the running ``heuristic_quantile`` of the entropies seen so far, or ties with the highest of them (so
  steps of equal entropy still branch) and is not 0. The branch size m climbs the M ladder
  as traces accumulate (one rung per ``heuristic_grow_every`` traces), regimes rotate so every arm gets
  data, and a group stops branching once one of its branches realized no gain (accept-or-stop).
  Traces (z, b, y) accumulate and Δ̂ is refit every ``refit_every`` traces.
* **promotion**: before each trace is learned from, the current Δ̂ predicts it (prequential). Promotion
  fires on the first trace after which (a) the last ``promotion_window`` predictions with |y| > sign_eps
  agree in sign with y at a rate >= ``promotion_threshold``, (b) at least ``promotion_min_traces`` traces
  were seen, and (c) unless ``promotion_margin`` is None, that agreement reaches the base rate (the
  agreement of always predicting the window's majority sign) plus the margin, or 1 when that sum is above 1
  (a window of one sign: a perfect Δ̂ cannot beat the constant and need not). The margin (0.05 by default)
  is not in the paper; it was added because runs of the shell rollout benchmark promoted Δ̂ on an
  agreement that always predicting a loss reached or beat. A frozen copy of Δ̂ is kept from then on. It
  is never refit, and its MAE and sign agreement against the online model's on the same traces show whether
  co-evolution pays (the paper reports >40% lower MAE online).
* **live**: with probability ε a uniformly random feasible branching arm is taken (ε floor). Otherwise
  take b* = argmax_b Δ̂(z, b) − cost_per_rollout·m_b and branch only if that utility > gate_eta (η).
  Δ̂ keeps refitting (co-evolution). There is no demotion: the paper mentions none.

The paper does not give Huber δ, λ, W, η, the promotion rule's numbers or the model class (reference §4).
The defaults below are our guesses, sized for gains of 0/1-reward groups (|y| <= 0.25).

The L2 penalty α is large (10) because Δ̂ has (1 + K)(D + 1) = 270 weights for the default 9 arms and is
fit on the few dozen to few hundred traces a run collects, whose recency weights sum to at most
1/(1 − λ) = 100. Replayed prequentially (``benchmarks/rail_replay.py``) on the 131 shadow traces of one
seed of the shell rollout benchmark, α = 0.1 overfit: its sign agreement with the realized gain was 0.47
and its MAE 0.058, worse than predicting 0 (0.032); α = 10 gave 0.72 and 0.030. On those traces 76 % of
the gains were negative and 1 % exactly 0, so among the signed ones no α beat always predicting a loss
(0.77 agreement): z said little about the sign of the next gain.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
from pydantic import Field, model_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import DecodingRegime
from aios_rl.contracts.errors import ConfigError, ContractError
from aios_rl.rollout.rail_features import (
    CONTEXT_DIM, NULL_ARM, Arm, ContextInputs, HiddenProjection, build_arms, context_features, design_matrix,
    huber_fit, recency_weights, ridge_fit,
)
from aios_rl.storage.rail_traces import Mode, RailTrace

__all__ = ["RailConfig", "StepInfo", "Decision", "GainModel", "RailController", "RailTrace"]

log = logging.getLogger(__name__)

_REGIMES = (
    DecodingRegime(),
    DecodingRegime(name="hot", temperature=1.3, top_p=0.95),
    DecodingRegime(name="cool", temperature=0.7, top_p=0.9),
)


class RailConfig(ConfigModel):
    """Every RAIL hyperparameter. Values the paper does not publish are marked as guesses."""

    arm_budgets: tuple[int, ...] = Field(default=(1, 2, 4), description="M: extra-branch counts (guess).")
    regimes: tuple[DecodingRegime, ...] = Field(default=_REGIMES, description="T: decoding regimes (guess).")
    model: Literal["huber", "ridge"] = Field(default="huber", description="Δ̂ loss: huber (RAIL) or ridge.")
    huber_delta: float = Field(default=0.05, gt=0, description="Huber δ, sized for variance gains (guess).")
    l2: float = Field(default=10.0, ge=0, description="L2 penalty α on Δ̂'s weights (see the module notes).")
    recency: float = Field(default=0.99, gt=0, le=1, description="λ in w_i = λ^age_i (~1/(1-λ) traces).")
    window: int = Field(default=1024, ge=1, description="W: Δ̂ is fit on the last W traces.")
    fit_iters: int = Field(default=50, ge=1, description="Most IRLS iterations per Huber fit.")
    refit_every: int = Field(default=16, ge=1, description="Refit Δ̂ every k traces (shadow and live).")
    min_fit_traces: int = Field(default=16, ge=1, description="Traces needed before the first fit.")
    promotion_window: int = Field(default=32, ge=1, description="Signed traces in the sign test.")
    promotion_threshold: float = Field(default=0.7, gt=0, le=1, description="Sign agreement to go live.")
    promotion_min_traces: int = Field(default=64, ge=0, description="Traces needed before promotion.")
    promotion_margin: float | None = Field(
        default=0.05,
        ge=0,
        le=1,
        description="Sign agreement must reach the majority sign's plus this (capped at 1); None: no test.",
    )
    sign_eps: float = Field(default=1e-6, ge=0, description="Gains with |y| <= this carry no sign.")
    cost_per_rollout: float = Field(default=0.002, ge=0, description="λ_cost in Δ̂ − λ_cost·m (guess).")
    gate_eta: float = Field(default=0.0, description="η: branch only if the best utility exceeds this.")
    epsilon: float = Field(default=0.05, ge=0, le=1, description="Live ε: chance of a random arm.")
    heuristic_quantile: float = Field(default=0.8, gt=0, lt=1, description="Shadow: quantile to beat.")
    entropy_window: int = Field(default=256, ge=1, description="Entropies the quantile uses.")
    entropy_warmup: int = Field(default=16, ge=1, description="Entropies before shadow branches.")
    heuristic_grow_every: int = Field(default=64, ge=1, description="Shadow: traces per M rung.")
    heuristic_cycle_regimes: bool = Field(default=True, description="Shadow rotates regimes.")
    stop_tol: float = Field(default=0.0, description="Shadow y <= this stops a group.")
    diag_window: int = Field(default=256, ge=1, description="Recent traces behind the MAE diagnostics.")
    max_tracked_groups: int = Field(default=4096, ge=1, description="Stopped groups remembered at most.")
    projection_seed: int = Field(default=0, description="Seed of the fixed hidden-state projection.")
    seed: int = Field(default=0, description="Seed of the ε-exploration generator.")

    @model_validator(mode="after")
    def _check(self) -> RailConfig:
        budgets = self.arm_budgets
        if not budgets or min(budgets) < 1 or len(set(budgets)) != len(budgets):
            raise ConfigError(f"rail.arm_budgets={budgets}: need distinct integers >= 1, e.g. (1, 2, 4)")
        names = [r.name for r in self.regimes]
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"rail.regimes names {names}: need at least one, all distinct")
        if self.min_fit_traces > self.window:
            raise ConfigError(
                f"rail.min_fit_traces={self.min_fit_traces} exceeds rail.window={self.window}: "
                "Δ̂ would never be fit"
            )
        if self.entropy_warmup > self.entropy_window:
            raise ConfigError(
                f"rail.entropy_warmup={self.entropy_warmup} exceeds "
                f"rail.entropy_window={self.entropy_window}: "
                "the shadow heuristic would never branch, so no trace would be collected"
            )
        return self

    def refit_due(self, n_traces: int) -> bool:
        """Whether Δ̂ is refit after the ``n_traces``-th trace (fit on the last ``window`` of them)."""
        return n_traces % self.refit_every == 0 and n_traces >= self.min_fit_traces


@dataclass(frozen=True)
class StepInfo:
    """The decision's bookkeeping beside z: which group/step, the heuristic's entropy, the budget left.

    Attributes:
        entropy: the candidate step's normalized entropy (z[0]); the shadow heuristic thresholds it.
        budget_left: rollouts the prompt may still spend; arms with m > budget_left are never chosen.
    """

    group_id: str
    task_id: str
    step: int
    entropy: float
    budget_left: int


@dataclass(frozen=True)
class Decision:
    """What to do at a candidate step; ``predicted_gain`` is Δ̂(z, arm) (0 for the null arm)."""

    arm: Arm
    mode: Mode
    predicted_gain: float
    explored: bool


class GainSample(Protocol):
    """Anything with a context, an arm name and a realized gain (a :class:`RailTrace`)."""

    z: Sequence[float]
    arm: str
    y: float


class _Sample(NamedTuple):
    z: tuple[float, ...]
    arm: str
    y: float


class GainModel:
    """Δ̂(z, b) = θ·φ(z, b), fit by recency-weighted Huber (RAIL) or squared loss (ridge baseline).

    Args:
        arms: the arm set; the null arm is skipped (its gain is 0 by definition).
        loss: ``"huber"`` (IRLS) or ``"ridge"`` (closed form).
    """

    def __init__(self, arms: Sequence[Arm], *, loss: str = "huber", delta: float = 0.05, l2: float = 10.0,
                 recency: float = 0.99, window: int = 1024, iters: int = 50) -> None:
        self.arms = [a for a in arms if not a.is_null]
        self._index = {a.name: i for i, a in enumerate(self.arms)}
        self.loss, self.delta, self.l2 = loss, delta, l2
        self.recency, self.window, self.iters = recency, window, iters
        self.theta: np.ndarray | None = None  # ((1 + K)(D + 1),)

    @classmethod
    def from_config(cls, config: RailConfig, arms: Sequence[Arm]) -> GainModel:
        return cls(arms, loss=config.model, delta=config.huber_delta, l2=config.l2, recency=config.recency,
                   window=config.window, iters=config.fit_iters)

    @property
    def fitted(self) -> bool:
        return self.theta is not None

    def arm_index(self, name: str) -> int:
        if name not in self._index:
            raise ContractError(f"unknown or null arm {name!r}; modelled arms: {sorted(self._index)}")
        return self._index[name]

    def fit(self, traces: Sequence[GainSample]) -> None:
        """Refit on the last ``window`` traces, ordered oldest → newest (the newest weighs 1)."""
        recent = list(traces)[-self.window :]
        if not recent:
            raise ContractError("GainModel.fit needs at least one trace")
        z = np.asarray([t.z for t in recent], dtype=np.float64)  # (N, 26)
        if z.shape[1:] != (CONTEXT_DIM,):
            raise ContractError(f"trace contexts have shape {z.shape[1:]}, expected ({CONTEXT_DIM},)")
        idx = np.asarray([self.arm_index(t.arm) for t in recent])
        y = np.asarray([t.y for t in recent], dtype=np.float64)
        x = design_matrix(z, idx, len(self.arms))
        w = recency_weights(len(recent), self.recency)
        if self.loss == "huber":  # warm start: consecutive refits see mostly the same traces
            self.theta = huber_fit(x, y, w, self.delta, self.l2, iters=self.iters, init=self.theta)
        else:
            self.theta = ridge_fit(x, y, w, self.l2)

    def predict_all(self, z: np.ndarray) -> np.ndarray:
        """Δ̂(z, b) for every non-null arm, in arm order, shape ``(K,)``; zeros before the first fit."""
        if self.theta is None:
            return np.zeros(len(self.arms))
        blocks = self.theta.reshape(1 + len(self.arms), CONTEXT_DIM + 1)
        zb = np.append(np.asarray(z, dtype=np.float64), 1.0)  # (D+1,)
        return blocks[1:] @ zb + blocks[0] @ zb

    def predict(self, z: np.ndarray, arm: Arm | str) -> float:
        """Δ̂(z, arm); exactly 0 for the null arm."""
        name = arm if isinstance(arm, str) else arm.name
        if name == NULL_ARM.name:
            return 0.0
        return float(self.predict_all(z)[self.arm_index(name)])

    def state_dict(self) -> dict[str, Any]:
        return {"theta": None if self.theta is None else [float(v) for v in self.theta]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        size = (1 + len(self.arms)) * (CONTEXT_DIM + 1)
        theta = state["theta"]
        if theta is not None and len(theta) != size:
            raise ContractError(f"GainModel state has {len(theta)} weights, this arm set needs {size}")
        self.theta = None if theta is None else np.asarray(theta, dtype=np.float64)


class RailController:
    """The RAIL decision maker: ``decide`` at candidate steps, ``observe`` realized gains, checkpoint as JSON.

    Example:
        >>> ctl = RailController(RailConfig(epsilon=0.0))
        >>> ctl.decide(np.zeros(26), StepInfo("g", "t", 0, 0.1, 8)).arm.name
        'none'
    """

    def __init__(self, config: RailConfig | None = None) -> None:
        c = self.config = config or RailConfig()
        self.arms = build_arms(c.arm_budgets, c.regimes)
        self._by_name = {a.name: a for a in self.arms}
        self.projection = HiddenProjection(c.projection_seed)
        self.model = GainModel.from_config(c, self.arms)
        self.frozen: GainModel | None = None
        self.mode: Mode = "shadow"
        self.promoted_at: int | None = None  # n_traces when promotion fired
        self.n_traces = 0
        self._rng = np.random.default_rng(c.seed)
        self._buffer: deque[_Sample] = deque(maxlen=c.window)
        self._entropies: deque[float] = deque(maxlen=c.entropy_window)
        self._sign: deque[bool] = deque(maxlen=c.promotion_window)
        # (online right, frozen right) in sign on the same signed traces since promotion
        self._sign_paired: deque[tuple[bool, bool]] = deque(maxlen=c.promotion_window)
        self._positive: deque[bool] = deque(maxlen=c.promotion_window)  # y > 0 for the traces in _sign
        self._errors: deque[tuple[float, float | None]] = deque(maxlen=c.diag_window)
        self._stopped: dict[str, None] = {}  # insertion-ordered set of groups done branching
        self._counts = {"decisions": 0, "explored": 0, "gate_rejects": 0, "cycle": 0}
        self._arm_counts = {a.name: 0 for a in self.arms}
        self._live_arm_counts = {a.name: 0 for a in self.arms}  # decisions taken in live mode only

    # -- deciding -------------------------------------------------------------------------------------

    def context(self, inputs: ContextInputs) -> np.ndarray:
        """z for a candidate step, using this controller's fixed hidden-state projection; shape ``(26,)``."""
        return context_features(inputs, self.projection(inputs.hidden))

    def decide(self, z: np.ndarray, step_info: StepInfo) -> Decision:
        """Choose the arm for one candidate branch step (the null arm means "do not branch")."""
        z = _check_z(z)
        feasible = [a for a in self.arms if not a.is_null and a.m <= step_info.budget_left]
        if self.mode == "shadow":
            arm, explored = self._heuristic(step_info, feasible), False
        else:
            arm, explored = self._live(z, feasible)
        self._entropies.append(float(step_info.entropy))  # after the test: the quantile is of *past* steps
        self._counts["decisions"] += 1
        self._counts["explored"] += int(explored)
        self._arm_counts[arm.name] += 1
        if self.mode == "live":
            self._live_arm_counts[arm.name] += 1
        return Decision(arm, self.mode, self.model.predict(z, arm), explored)

    def _heuristic(self, info: StepInfo, feasible: list[Arm]) -> Arm:
        c = self.config
        if info.group_id in self._stopped or len(self._entropies) < c.entropy_warmup:
            return NULL_ARM
        past = np.asarray(self._entropies)
        # High entropy: above the quantile, or tied with the window's maximum (when many past steps share
        # the top value, e.g. all equal, the quantile is that maximum and no step could be above it). A
        # step with zero entropy offered no choice and is never high.
        threshold = float(np.quantile(past, c.heuristic_quantile))
        high = info.entropy > threshold or info.entropy >= float(past.max())
        if not high or info.entropy <= 0.0:
            return NULL_ARM
        ladder = sorted(c.arm_budgets)
        target = ladder[min(len(ladder) - 1, self.n_traces // c.heuristic_grow_every)]
        allowed = [a for a in feasible if a.m <= target]
        if not allowed:
            return NULL_ARM
        top = [a for a in allowed if a.m == max(a.m for a in allowed)]
        if not c.heuristic_cycle_regimes:
            return top[0]
        self._counts["cycle"] += 1
        return top[(self._counts["cycle"] - 1) % len(top)]

    def _live(self, z: np.ndarray, feasible: list[Arm]) -> tuple[Arm, bool]:
        c = self.config
        explore = bool(self._rng.random() < c.epsilon)  # drawn every time: the stream stays aligned
        if not feasible:
            return NULL_ARM, False
        if explore:
            return feasible[int(self._rng.integers(len(feasible)))], True
        preds = self.model.predict_all(z)  # (K,)
        utility = [preds[self.model.arm_index(a.name)] - c.cost_per_rollout * a.m for a in feasible]
        best = int(np.argmax(utility))  # ties: the first, i.e. the smallest m
        if utility[best] > c.gate_eta:
            return feasible[best], False
        self._counts["gate_rejects"] += 1
        return NULL_ARM, False

    # -- learning -------------------------------------------------------------------------------------

    def observe(self, trace: RailTrace) -> None:
        """Learn from one realized intervention: score it prequentially, store it, refit, maybe promote."""
        arm = self._by_name.get(trace.arm)
        if arm is None or arm.is_null:
            raise ContractError(f"trace arm {trace.arm!r} is not a branching arm of this controller")
        z, y, c = _check_z(np.asarray(trace.z)), float(trace.y), self.config
        if self.model.fitted:
            pred = self.model.predict(z, arm)
            frozen = None if self.frozen is None else self.frozen.predict(z, arm)
            self._errors.append((abs(pred - y), None if frozen is None else abs(frozen - y)))
            if abs(y) > c.sign_eps:
                self._sign.append(bool(np.sign(pred) == np.sign(y)))
                self._positive.append(y > 0)
                if frozen is not None:
                    self._sign_paired.append((self._sign[-1], bool(np.sign(frozen) == np.sign(y))))
        self._buffer.append(_Sample(tuple(float(v) for v in z), arm.name, y))
        self.n_traces += 1
        if trace.mode == "shadow" and y <= c.stop_tol:
            self._stop(trace.group_id)
        if c.refit_due(self.n_traces):
            self.model.fit(self._buffer)
        if self.mode == "shadow" and self._promotable():
            self._promote()

    def _promotable(self) -> bool:
        c = self.config
        if len(self._sign) < c.promotion_window or self.n_traces < c.promotion_min_traces:
            return False
        agreement = sum(self._sign) / len(self._sign)
        if c.promotion_margin is not None:
            base = self._base_rate()
            if base is None or agreement < min(1.0, base + c.promotion_margin):
                return False
        return agreement >= c.promotion_threshold

    def _base_rate(self) -> float | None:
        """Sign agreement of always predicting the majority sign of the window's signed gains; None until
        the signs cover the same traces as the agreement window (after loading a state saved before the
        signs were kept, the window has to refill)."""
        if not self._positive or len(self._positive) != len(self._sign):
            return None
        share = sum(self._positive) / len(self._positive)
        return max(share, 1.0 - share)

    def _promote(self) -> None:
        self.mode, self.promoted_at = "live", self.n_traces
        self.frozen = copy.deepcopy(self.model)
        log.info("RAIL controller promoted to live after %d traces (sign agreement %.3f)",
                 self.n_traces, sum(self._sign) / len(self._sign))

    def _stop(self, group_id: str) -> None:
        self._stopped[group_id] = None
        while len(self._stopped) > self.config.max_tracked_groups:
            del self._stopped[next(iter(self._stopped))]

    def end_group(self, group_id: str) -> None:
        """Forget a finished group's accept-or-stop state."""
        self._stopped.pop(group_id, None)

    # -- reporting and checkpoints --------------------------------------------------------------------

    def diagnostics(self) -> dict[str, float]:
        """``rail/...`` metrics. Keys whose quantity is not defined yet (no data) are left out, never NaN."""
        n = self._counts["decisions"]
        out = {
            "rail/live": float(self.mode == "live"),
            "rail/traces": float(self.n_traces),
            "rail/decisions": float(n),
            "rail/gate_rejects": float(self._counts["gate_rejects"]),
        }
        if n:
            out["rail/explore_share"] = self._counts["explored"] / n
            out.update({f"rail/arm_share/{name}": k / n for name, k in self._arm_counts.items()})
        live = sum(self._live_arm_counts.values())
        if live:
            out["rail/live_decisions"] = float(live)
            out.update({f"rail/live_arm_share/{name}": k / live for name, k in self._live_arm_counts.items()})
        if self.promoted_at is not None:
            out["rail/promoted_at"] = float(self.promoted_at)
        if self._sign:
            out["rail/sign_agreement"] = sum(self._sign) / len(self._sign)
        if (base := self._base_rate()) is not None:
            out["rail/sign_base_rate"] = base
        if self._sign_paired:  # both models on the same traces, as the MAE pair below
            pairs = len(self._sign_paired)
            out["rail/sign_agreement_online_paired"] = sum(o for o, _ in self._sign_paired) / pairs
            out["rail/sign_agreement_frozen"] = sum(f for _, f in self._sign_paired) / pairs
        if self._errors:
            out["rail/mae_online"] = float(np.mean([e for e, _ in self._errors]))
        paired = [(e, f) for e, f in self._errors if f is not None]
        if paired:
            out["rail/mae_online_paired"] = float(np.mean([e for e, _ in paired]))
            out["rail/mae_frozen"] = float(np.mean([f for _, f in paired]))
        return out

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly, as plain JSON types."""
        return {
            "config": self.config.model_dump(mode="json"),
            "mode": self.mode,
            "promoted_at": self.promoted_at,
            "n_traces": self.n_traces,
            "rng": self._rng.bit_generator.state,
            "buffer": [[list(s.z), s.arm, s.y] for s in self._buffer],
            "entropies": list(self._entropies),
            "sign": list(self._sign),
            "sign_paired": [list(p) for p in self._sign_paired],
            "positive": list(self._positive),
            "errors": [list(e) for e in self._errors],
            "stopped": list(self._stopped),
            "counts": dict(self._counts),
            "arm_counts": dict(self._arm_counts),
            "live_arm_counts": dict(self._live_arm_counts),
            "projection": self.projection.state_dict(),
            "model": self.model.state_dict(),
            "frozen": None if self.frozen is None else self.frozen.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; the stored config must equal this controller's."""
        # Fields added since the state was saved take their defaults, except the margin: a state saved before
        # it existed promoted without one (None), whatever the default is now.
        saved_config = {"promotion_margin": None, **state["config"]}
        saved = RailConfig.model_validate(saved_config).model_dump(mode="json")
        mine = self.config.model_dump(mode="json")
        if saved != mine:
            diff = sorted(k for k in saved.keys() | mine.keys() if saved.get(k) != mine.get(k))
            raise ConfigError(f"RAIL state was saved under a different config (differs in: {diff})")
        self.mode, self.promoted_at = state["mode"], state["promoted_at"]
        self.n_traces = int(state["n_traces"])
        self._rng.bit_generator.state = state["rng"]
        self._buffer.clear()
        self._buffer.extend(_Sample(tuple(z), arm, float(y)) for z, arm, y in state["buffer"])
        for name in ("entropies", "sign"):
            target = getattr(self, f"_{name}")
            target.clear()
            target.extend(state[name])
        # A state saved before the pairs were kept holds the frozen copy's signs alone: the window refills.
        self._sign_paired.clear()
        self._sign_paired.extend((bool(o), bool(f)) for o, f in state.get("sign_paired", []))
        self._positive.clear()
        self._positive.extend(state.get("positive", []))  # absent from states saved before it existed
        self._errors.clear()
        self._errors.extend((float(e), f) for e, f in state["errors"])
        self._stopped = dict.fromkeys(state["stopped"])
        self._counts, self._arm_counts = dict(state["counts"]), dict(state["arm_counts"])
        self._live_arm_counts = dict(state.get("live_arm_counts", dict.fromkeys(self._arm_counts, 0)))
        self.projection = HiddenProjection.from_state_dict(state["projection"])
        self.model.load_state_dict(state["model"])
        self.frozen = None
        if state["frozen"] is not None:
            self.frozen = GainModel.from_config(self.config, self.arms)
            self.frozen.load_state_dict(state["frozen"])


def _check_z(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    if z.shape != (CONTEXT_DIM,) or not np.all(np.isfinite(z)):
        raise ContractError(f"context z must be {CONTEXT_DIM} finite numbers, got shape {z.shape}")
    return z

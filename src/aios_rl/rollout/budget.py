"""The budget ledger: every rollout, branch, environment step and policy forward, so methods compare at
equal cost; and what the policy reported about its ``act`` calls over the same rollouts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class Budget:
    """Running totals of what rollouts consumed (metric keys under ``rollout/``).

    Attributes:
        rollouts: completed trajectories of every kind (fresh, branched, resampled), one each.
        branches: of those, rollouts branched from another rollout's snapshot (they share its prefix).
        discarded: of those, rollouts whose group was replaced or dropped (DAPO), so never trained on.
        env_steps: environment steps actually taken (a branch's copied prefix is not counted again).
        invalid_actions: of those, steps whose action the environment refused (``info["invalid_action"]``:
            unparseable, unknown or not allowed there), whatever form the policy wrote it in.
        policy_forwards: batched ``policy.act`` calls.
        candidates_scored / tokens_generated: the work inside those calls: candidates offered to a policy
            that chose among them, tokens of actions a policy wrote (an LM in generate mode).
        wall_s: wall-clock seconds spent running rollouts: environments, policy forwards, verification and
            the teacher's critiques, and under the rollout engine the allocator's decisions too (RAIL's
            controller refits), so a method's own overhead counts in its cost.
    """

    rollouts: int = 0
    branches: int = 0
    discarded: int = 0
    env_steps: int = 0
    invalid_actions: int = 0
    policy_forwards: int = 0
    candidates_scored: int = 0
    tokens_generated: int = 0
    wall_s: float = 0.0

    def add(self, other: Budget) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def metrics(self) -> dict[str, float]:
        return {f"rollout/{f.name}": float(getattr(self, f.name)) for f in fields(self)}

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Budget:
        """Rebuild a ledger; counters missing from an older state start at 0."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in state.items() if k in known})


@dataclass
class ActMetrics:
    """A policy's ``last_act_metrics`` over many ``act`` calls (metric keys as the policy names them).

    Each key's mean weighs a call by the observations it covered, so a fraction stays a share of all the
    observations acted on (``policy/non_json_frac``: of every answer written), not a mean of per-call shares
    that a last call with one straggling rollout would move as much as a full batch. A key is averaged over
    the calls that reported it; a policy that reports nothing gives no key.

    Example:
        >>> act = ActMetrics()
        >>> act.add({"policy/non_json_frac": 1 / 3}, observations=3)
        >>> act.add({"policy/non_json_frac": 1.0}, observations=1)
        >>> act.means()
        {'policy/non_json_frac': 0.5}
    """

    sums: dict[str, float] = field(default_factory=dict)  # key -> sum of value x observations
    observations: dict[str, int] = field(default_factory=dict)  # key -> observations of its calls

    def add(self, metrics: Mapping[str, float], observations: int) -> None:
        """One ``act`` call's metrics, which covered ``observations`` observations."""
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value * observations
            self.observations[key] = self.observations.get(key, 0) + observations

    def means(self) -> dict[str, float]:
        return {key: self.sums[key] / n for key, n in sorted(self.observations.items()) if n}

"""The budget ledger: every rollout, branch, environment step and policy forward, so methods compare at
equal cost."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Budget:
    """Running totals of what rollouts consumed (metric keys under ``rollout/``)."""

    rollouts: int = 0
    branches: int = 0
    env_steps: int = 0
    policy_forwards: int = 0
    candidates_scored: int = 0
    tokens_generated: int = 0
    wall_s: float = 0.0

    def add(self, other: Budget) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def metrics(self) -> dict[str, float]:
        return {f"rollout/{f.name}": float(getattr(self, f.name)) for f in fields(self)}

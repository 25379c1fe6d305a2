"""The shell task generator's config: how many tasks to keep, how to validate them and how to split them."""

from __future__ import annotations

from pydantic import Field, field_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.envs.shell.mutate import OPERATORS


class GeneratorConfig(ConfigModel):
    """How many tasks to generate and how to validate and split them."""

    count: int = Field(default=20, ge=1, description="Number of tasks to keep.")
    seed: int = Field(default=0, description="Seed for candidate order and splits; same seed, same tasks.")
    holdout_repos: int = Field(default=2, ge=0, description="Seed repos whose tasks are all holdout.")
    holdout_fraction: float = Field(
        default=0.2, ge=0.0, lt=1.0, description="Share of the training repos' tasks held out (unseen lines)."
    )
    timeout_s: float = Field(
        default=60.0, gt=0, le=3600, description="Each task's timeout_s, and the original suite's limit."
    )
    mutant_timeout_s: float = Field(
        default=30.0, gt=0, description="Least wall limit of a mutant's run (4x the original's time if more)."
    )
    mutant_cpu_s: int = Field(
        default=5, ge=1, description="Least CPU-time limit of a mutant's run; endless loops stop here."
    )
    workers: int = Field(default=2, ge=1, description="Sandboxed test runs at a time.")
    operators: list[str] = Field(
        default_factory=lambda: list(OPERATORS), min_length=1, description="Mutation operators to use."
    )

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, operators: list[str]) -> list[str]:
        unknown = sorted(set(operators) - set(OPERATORS))
        if unknown:
            raise ValueError(f"unknown operator(s) {unknown}; known: {', '.join(OPERATORS)}")
        return list(dict.fromkeys(operators))

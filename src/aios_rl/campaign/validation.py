"""The validation gate of `aios-rl shell train`: each update is scored on held-out training tasks and rolled
back when it scores worse than its parent.

A fixed share of the training tasks (``fraction``, drawn once from the run's seed) or a separate task
directory (``tasks_dir``) is kept out of training. After every epoch's checkpoint, the new checkpoint and
its parent run each validation task with the same seeds (a matched comparison), and the difference of their
success rates decides, as the control plane's verdicts do (ARCHITECTURE §5):

* ``worse`` (below the parent by more than ``tolerance``): rollback, ``active ← parent``; the next epoch
  trains from the parent again, and ``RUN/rollbacks/epoch-<N>.json`` says which tasks changed;
* ``better`` (above it by more than ``tolerance``): promotion, ``last_stable ← active``;
* ``same``: the update stays ``active``.

More than ``max_consecutive_rollbacks`` rollbacks without a promotion in between freeze the lineage, as
everywhere in the control plane. Validation tasks are never trained on, and the holdout is never used:
this is model selection on data the run set aside, not tuning on the holdout.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Task
from aios_rl.contracts.errors import ConfigError

Decision = Literal["better", "same", "worse"]


class ValidationConfig(ConfigModel):
    """Where validation tasks come from and how an update is judged on them (off unless a source is set)."""

    fraction: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="Share of the training tasks held out for validation (drawn "
        "once from the run's seed; never trained on). 0 with no tasks_dir: no validation gate.",
    )
    tasks_dir: str | None = Field(
        default=None, description="A task directory whose tasks (every split) are the validation set, instead of "
        "a share of the training tasks. Must not share task ids with the training tasks.",
    )
    samples: int = Field(default=1, ge=1, description="Episodes per validation task and checkpoint.")
    temperature: float = Field(
        default=0.0, ge=0.0, description="0: greedy episodes (as `shell eval` scores); > 0: sampled at this "
        "temperature (use with samples > 1).",
    )
    tolerance: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Success-rate difference to the parent within which an update "
        "is 'same' (kept, not promoted).",
    )
    seed: int = Field(default=0, description="Seed of the validation episodes (the same for every checkpoint).")

    @model_validator(mode="after")
    def _one_source(self) -> ValidationConfig:
        if self.fraction > 0 and self.tasks_dir is not None:
            raise ConfigError("validation: set fraction or tasks_dir, not both")
        return self

    @property
    def enabled(self) -> bool:
        return self.fraction > 0 or self.tasks_dir is not None


def split_validation(tasks: Sequence[Task], fraction: float, seed: int) -> tuple[list[Task], list[Task]]:
    """``(training, validation)``: ``round(fraction * len(tasks))`` tasks (at least one when ``fraction`` > 0)
    drawn by ``seed`` from the tasks in id order, so the split depends only on the task set and the seed.

    Raises:
        ConfigError: the split would leave no training task.
    """
    ordered = sorted(tasks, key=lambda t: t.task_id)
    count = max(1, round(fraction * len(ordered))) if fraction > 0 else 0
    if count >= len(ordered):
        raise ConfigError(f"validation fraction {fraction} of {len(ordered)} training tasks leaves none to train on")
    held = {t.task_id for t in random.Random(f"validation:{seed}").sample(ordered, count)}
    return [t for t in ordered if t.task_id not in held], [t for t in ordered if t.task_id in held]


def decide(candidate: float, reference: float, tolerance: float) -> Decision:
    """``better`` / ``same`` / ``worse`` for a candidate's validation success against its parent's."""
    if candidate < reference - tolerance:
        return "worse"
    if candidate > reference + tolerance:
        return "better"
    return "same"


def changed_tasks(candidate: dict[str, float], reference: dict[str, float]) -> dict[str, dict[str, float]]:
    """The validation tasks whose success differs between the two checkpoints (for the diagnosis)."""
    return {task: {"candidate": candidate[task], "reference": reference.get(task, 0.0)}
            for task in sorted(candidate) if candidate[task] != reference.get(task, 0.0)}

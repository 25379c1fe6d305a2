"""The validation gate of `aios-rl shell train`: each update is scored on held-out training tasks against its
parent, rolled back when worse and promoted when better.

A fixed share of the training tasks (``fraction``, drawn once from the run's seed) or a separate task
directory (``tasks_dir``) is kept out of training. After every epoch's checkpoint, the new checkpoint and
its parent run each validation task with the same seeds (a matched comparison per task), and ``rule``
decides:

* ``sign_test`` (the default; ARCHITECTURE §5): each task is better, same or worse by its success, and the
  exact two-sided sign test over the decisive tasks (:func:`aios_rl.control.compare.verdict`) gives the
  verdict; inconclusive is ``same``. With about 17 tasks it takes at least 6 tasks moving one way and none
  the other, so it guards against clear regressions only.
* ``mean``: the success rates compared directly, ``same`` within ``tolerance``: model selection on the
  validation set, which acts on every difference and is correspondingly noisy.

``worse`` rolls back (``active ← parent``; the next epoch trains from the parent's weights and optimizer,
and ``RUN/rollbacks/epoch-<N>.json`` lists the tasks that changed); ``better`` promotes
(``last_stable ← active``); ``same`` keeps the update ``active``. More than ``max_consecutive_rollbacks``
rollbacks without a promotion between them freeze the lineage, as everywhere in the control plane.
Validation tasks are never trained on, and holdout tasks are refused: this is model selection on data the
run set aside, never on the holdout.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from aios_rl.algos.trainer import Trainer
from aios_rl.campaign.diagnosis import write_diagnosis
from aios_rl.campaign.evaluate import GREEDY, evaluate
from aios_rl.campaign.students import restore_student
from aios_rl.contracts.config import MAX_GROUP_SIZE, ConfigModel
from aios_rl.contracts.episode import DecodingRegime, Episode, RelativeOutcome, Task, utc_now
from aios_rl.contracts.errors import ConfigError
from aios_rl.contracts.protocols import Env
from aios_rl.control import lineage as lineage_rules
from aios_rl.control.compare import verdict
from aios_rl.control.plane import ControlPlane
from aios_rl.envs.shell.task import load_tasks
from aios_rl.policy.base import Policy

Decision = Literal["better", "same", "worse"]
VALIDATION_KEY = "validation_scores"
SPLIT_KEY = "validation_task_ids"  # the run's validation set, fixed when the run is created


class ValidationConfig(ConfigModel):
    """Where validation tasks come from and how an update is judged on them (off unless a source is set)."""

    fraction: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="Share of the training tasks held out for validation (drawn "
        "once from the run's seed; never trained on). 0 with no tasks_dir: no validation gate.",
    )
    tasks_dir: str | None = Field(
        default=None, description="A task directory whose tasks (train split only; holdout tasks are refused) are "
        "the validation set, instead of a share of the training tasks. No task id may also be a training task.",
    )
    samples: int = Field(
        default=1, ge=1, le=MAX_GROUP_SIZE,
        description="Episodes per validation task and checkpoint (at most 1024).",
    )
    temperature: float = Field(
        default=0.0, ge=0.0, description="0: greedy episodes (as `shell eval` scores); > 0: sampled at this "
        "temperature (use with samples > 1).",
    )
    rule: Literal["sign_test", "mean"] = Field(
        default="sign_test", description="sign_test: per-task better/worse, exact sign test at alpha, "
        "inconclusive is same (ARCHITECTURE §5); mean: success rates compared within tolerance.",
    )
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="sign_test: significance level.")
    tolerance: float = Field(
        default=0.0, ge=0.0, le=1.0, description="mean: success-rate difference to the parent within which an "
        "update is 'same' (kept, not promoted).",
    )
    seed: int = Field(default=0, description="Seed of the validation episodes (the same for every checkpoint).")

    @field_validator("tasks_dir")
    @classmethod
    def _absolute(cls, path: str | None) -> str | None:
        return None if path is None else str(Path(path).resolve())  # stored with the run: resumes from anywhere

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


def validation_split(config: ValidationConfig, tasks: list[Task], seed: int) -> tuple[list[Task], list[Task]]:
    """The training tasks without the validation set, and the validation set (empty: no gate).

    Raises:
        ConfigError: an empty or holdout-split validation directory, or one sharing task ids with training.
    """
    if config.tasks_dir is not None:
        held = load_tasks(Path(config.tasks_dir))
        if not held:
            raise ConfigError(f"validation.tasks_dir {config.tasks_dir} holds no tasks")
        holdout = sorted(t.task_id for t in held if t.split == "holdout")
        if holdout:
            raise ConfigError(f"validation.tasks_dir holds {len(holdout)} holdout task(s) (e.g. {holdout[0]}); "
                              "the holdout is never used to choose checkpoints")
        shared = sorted({t.task_id for t in held} & {t.task_id for t in tasks})
        if shared:
            raise ConfigError(f"validation.tasks_dir shares {len(shared)} task(s) with the training tasks "
                              f"(e.g. {shared[0]}); validation tasks must be held out of training")
        return tasks, held
    if config.fraction > 0:
        return split_validation(tasks, config.fraction, seed)
    return tasks, []


def stored_split(
    config: ValidationConfig, tasks: list[Task], seed: int, stored: list[str] | None
) -> tuple[list[Task], list[Task]]:
    """:func:`validation_split` for a run that already exists: with ``stored`` (the validation task ids the
    run recorded when it was created) the same validation set, whatever was added to the task directories
    since, so no task trained on becomes a validation task nor a validation task a training one. A run that
    recorded none (older code) gets its split drawn again.

    Raises:
        ConfigError: a recorded validation task is gone, or one is now among the training tasks.
    """
    if stored is None:
        return validation_split(config, tasks, seed)
    held = set(stored)
    pool = load_tasks(Path(config.tasks_dir)) if config.tasks_dir is not None else tasks
    validation = sorted((t for t in pool if t.task_id in held), key=lambda t: t.task_id)
    missing = sorted(held - {t.task_id for t in validation})
    where = config.tasks_dir or "the task directory's train split"
    if missing:
        raise ConfigError(f"{len(missing)} of the run's validation task(s) (e.g. {missing[0]}) are gone from "
                          f"{where}; the validation set of a run cannot change: restore them or use a new "
                          "--run")
    if config.tasks_dir is not None:
        shared = sorted(held & {t.task_id for t in tasks})
        if shared:
            raise ConfigError(f"validation task {shared[0]} is now also a training task; validation tasks "
                              "must be held out of training")
    return sorted((t for t in tasks if t.task_id not in held), key=lambda t: t.task_id), validation


def task_outcomes(candidate: Mapping[str, float], reference: Mapping[str, float]) -> list[RelativeOutcome]:
    """Each validation task's outcome for the candidate against the reference, by success rate."""
    return ["better" if candidate[t] > reference.get(t, 0.0) else "worse" if candidate[t] < reference.get(t, 0.0)
            else "same" for t in sorted(candidate)]


def decide(candidate: Mapping[str, float], reference: Mapping[str, float], config: ValidationConfig) -> Decision:
    """``better`` / ``same`` / ``worse`` for the candidate's per-task validation success against its parent's."""
    if config.rule == "sign_test":
        return verdict(task_outcomes(candidate, reference), config.alpha).relative_outcome  # type: ignore[return-value]
    rate = sum(candidate.values()) / max(1, len(candidate))
    reference_rate = sum(reference.values()) / max(1, len(reference))
    difference = rate - reference_rate
    # Inclusive, with slack for rounding: 0.7 - 0.8 is -0.10000000000000009, yet within a tolerance of 0.1.
    if abs(difference) <= config.tolerance + 1e-9:
        return "same"
    return "better" if difference > 0 else "worse"


def changed_tasks(candidate: Mapping[str, float], reference: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """The validation tasks whose success differs between the two checkpoints (for the diagnosis)."""
    return {task: {"candidate": candidate[task], "reference": reference.get(task, 0.0)}
            for task in sorted(candidate) if candidate[task] != reference.get(task, 0.0)}


class ValidationGate:
    """Scores checkpoints on the validation tasks (once each; the scores live in the run store) and judges
    each epoch's update against its parent."""

    def __init__(self, plane: ControlPlane, config: ValidationConfig, tasks: list[Task],
                 make_env: Callable[[], Env], *, workers: int) -> None:
        self.plane, self.config, self.tasks, self.make_env, self.workers = plane, config, tasks, make_env, workers

    def score(self, checkpoint: str, policy: Policy | None = None) -> dict[str, Any]:
        """``{"success": rate, "tasks": {task id: rate}}`` of a checkpoint (``policy``: its loaded student,
        else it is loaded); the same seeds for every checkpoint."""
        scores: dict[str, Any] = self.plane.store.get_meta(VALIDATION_KEY, {})
        if checkpoint in scores:
            return scores[checkpoint]
        if policy is None:
            tensors, meta = self.plane.load_checkpoint(checkpoint)
            source = f"checkpoint {self.plane.run_dir}:{checkpoint}"
            policy = restore_student(meta["policy"], tensors, source=source)
        cfg = self.config
        regime = GREEDY if cfg.temperature == 0 else DecodingRegime(name="validation", temperature=cfg.temperature)
        per_task: dict[str, float] = {}

        def record(task: Task, episodes: list[Episode]) -> None:
            per_task[task.task_id] = sum(e.outcome == "success" for e in episodes) / len(episodes)

        result = evaluate(policy, self.tasks, self.make_env, samples=cfg.samples, seed=cfg.seed, regime=regime,
                          version=checkpoint, workers=self.workers, on_task=record)
        scores[checkpoint] = {"success": result.success_rate, "tasks": per_task}
        self.plane.store.set_meta(VALIDATION_KEY, scores)
        return scores[checkpoint]

    def judge(
        self, epoch: int, checkpoint: str, trainer: Trainer, *, name: str | None = None
    ) -> dict[str, Any]:
        """Decide on ``checkpoint`` (epoch ``epoch``'s update, or the update ``name`` after it; its
        diagnosis is ``RUN/rollbacks/<name>.json``, ``epoch-<epoch>`` by default) and act: roll back
        (``trainer`` gets the parent's weights and optimizer) or promote. Safe to call again after a kill:
        scores are kept, and an action the lineage already shows is not taken twice. A rollback or promotion
        by hand between a kill and the resume is the operator's decision: the gate records its own and moves
        no pointer."""
        lineage = self.plane.state.lineage
        parent = lineage.checkpoints[checkpoint].parent
        assert parent is not None  # every epoch's checkpoint has the one it was trained from as parent
        live = lineage.active == checkpoint  # False after a rollback: the gate's (then a kill) or by hand
        # pre_update_ref, where a rollback goes, is the parent until a promotion releases it: one by hand
        # (`ControlPlane.promote`) between a kill and the resume keeps the update, whatever the gate says.
        revocable = live and lineage.pre_update_ref == parent
        candidate = self.score(checkpoint, trainer.policy if live else None)
        reference = self.score(parent)
        decision = decide(candidate["tasks"], reference["tasks"], self.config)
        name = name or f"epoch-{epoch}"
        reason = (f"validation success {candidate['success']:.3f} vs {reference['success']:.3f} of {parent} "
                  f"({self.config.rule}; {name.replace('-', ' ')})")
        if decision == "worse" and revocable:
            after = lineage_rules.rollback(lineage, reason, max_consecutive=self.plane.config.max_consecutive_rollbacks)
            write_diagnosis(self.plane.run_dir, name, {
                "epoch": epoch, "decision": "rollback", "reason": reason, "checkpoint": checkpoint, "parent": parent,
                "rule": self.config.rule, "candidate_success": candidate["success"],
                "reference_success": reference["success"],
                "changed_tasks": changed_tasks(candidate["tasks"], reference["tasks"]),
                "pointers_before": lineage.pointers(), "pointers_after": after.pointers(), "frozen_after": after.frozen,
                "written_at": utc_now(),
            })
            self.plane.rollback(reason)
            tensors, meta = self.plane.load_checkpoint(parent)
            trainer.load_state_tensors(tensors, meta)  # as a resume from the parent would
        elif decision == "better" and live and lineage.last_stable != checkpoint:
            self.plane.promote(reason)
        return {"val/success": candidate["success"], "val/reference_success": reference["success"],
                "val/decision": decision, "val/active": self.plane.state.lineage.active}

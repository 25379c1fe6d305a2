"""The bad-update drill really harms: the good actions it ascends on become much less likely."""

from __future__ import annotations

import math

import torch

from aios_rl.algos.batch import DistillBatch
from aios_rl.algos.distill import distill_update
from aios_rl.algos.trainer import Trainer, TrainerConfig
from aios_rl.campaign.drills import harmful_update
from aios_rl.contracts.episode import Observation
from aios_rl.policy.compact import CompactStudent, CompactStudentConfig


def good_actions() -> DistillBatch:
    # The student scores candidates from their numeric features: give each kind its own.
    features = [{"suspicion": 1.0, "is_patch": 1.0}, {"is_stop": 1.0}, {"is_read": 1.0}]
    observations = tuple(
        Observation(
            text=f"FAILED test_{i} in mod.py",
            candidates=[f"patch fix {i}", "stop", f"read mod{i}.py"],
            candidate_features=features,
        )
        for i in range(4)
    )
    targets = tuple(f"patch fix {i}" for i in range(4))
    return DistillBatch(observations, ("shell",) * 4, targets, torch.ones(4))


def test_harmful_update_makes_reference_actions_unlikely_and_keeps_the_learning_rate() -> None:
    torch.set_num_threads(1)
    student = CompactStudent(CompactStudentConfig(buckets=1024, seed=0))
    trainer = Trainer(student)
    distill = good_actions()
    observations, targets = distill.observations, distill.targets
    before = student.evaluate(list(observations), ["shell"] * 4, list(targets)).logprobs.detach()
    stats = harmful_update(trainer, [], distill, steps=20, lr_scale=10.0)
    after = student.evaluate(list(observations), ["shell"] * 4, list(targets)).logprobs.detach()
    assert bool((after < before - 1.0).all()), (before, after)
    assert stats.steps == 20 and stats.extras["drill_bad_update"] == 1.0
    assert trainer.optimizer.param_groups[0]["lr"] == trainer.config.lr


def test_harmful_update_breaks_a_student_that_is_certain_of_the_good_actions() -> None:
    """A strong warm start makes the good actions certain to float precision, where ascent on their
    log-likelihood has no gradient left; the drill must still turn them into the unlikely choice."""
    torch.set_num_threads(1)
    student = CompactStudent(CompactStudentConfig(buckets=1024, seed=0))
    trainer = Trainer(student, TrainerConfig(lr=0.05))
    distill = good_actions()
    observations, environments, targets = list(distill.observations), ["shell"] * 4, list(distill.targets)
    for _ in range(200):
        distill_update(trainer, distill, generator=torch.Generator().manual_seed(0))
    before = student.evaluate(observations, environments, targets).logprobs.detach()
    assert bool((before > -1e-6).all()), before
    harmful_update(trainer, [], distill, steps=20, lr_scale=10.0)
    after = student.evaluate(observations, environments, targets).logprobs.detach()
    assert bool((after < math.log(0.5)).all()), after

"""Trainers re-score the tokens an LM student recorded in generate mode (tiny random Qwen2, built offline).

The answers are cut at a few tokens, so they end without EOS: re-encoding their text (what ``evaluate``
does without ``token_ids``) would append one and score another sequence than the one sampled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from aios_rl.algos import advantages
from aios_rl.algos.batch import DistillBatch, flatten_episodes, negative_states
from aios_rl.algos.grpo import grpo_update
from aios_rl.algos.ppo import ppo_update
from aios_rl.algos.trainer import Trainer, TrainerConfig, UpdateStats
from aios_rl.contracts.episode import DecodingRegime, Episode, Observation, Step
from aios_rl.policy.base import Evaluation
from aios_rl.policy.causal_lm import CausalLMStudent, CausalLMStudentConfig

ENV = "shell"
UNTEMPERED = DecodingRegime(name="train", temperature=1.0, top_p=1.0)


def generating(model_dir: Path) -> CausalLMStudent:
    config = CausalLMStudentConfig(model_path=str(model_dir), mode="generate", max_new_tokens=6)
    return CausalLMStudent(config)


class Spy:
    """Wraps a student's ``evaluate`` and keeps every call's keywords and result."""

    def __init__(self, student: CausalLMStudent) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any], Evaluation]] = []
        self._evaluate = student.evaluate
        student.evaluate = self  # type: ignore[method-assign]

    def __call__(self, *args: Any, **kwargs: Any) -> Evaluation:
        result = self._evaluate(*args, **kwargs)
        self.calls.append((args, kwargs, result))
        return result


def recorded_episodes(student: CausalLMStudent) -> tuple[list[Episode], list[int]]:
    """Two tasks x two one-step episodes sampled in generate mode; one success per group."""
    observations = [
        Observation(text=f"task {t} try {k}: 1 failed, 4 passed", candidates=["run pytest -q", "stop"])
        for t in range(2) for k in range(2)
    ]
    samples = student.act(observations, [ENV] * 4, UNTEMPERED, torch.Generator().manual_seed(0))
    episodes = []
    for k, (obs, sample) in enumerate(zip(observations, samples)):
        step = Step(observation=obs, action=sample.action, logprob=sample.logprob, entropy=sample.entropy,
                    token_ids=list(sample.token_ids), token_logprobs=list(sample.token_logprobs),
                    loss_mask=list(sample.loss_mask), terminated=True)
        reward = 1.0 if k % 2 == 0 else -1.0
        episodes.append(Episode(environment=ENV, task_id=f"t{k // 2}", trajectory=[step], reward=reward,
                                env_reward=reward, outcome="success" if reward > 0 else "failure",
                                policy_version="c0"))
    return episodes, [0, 0, 1, 1]


def update(
    algo: str, trainer: Trainer, episodes: list[Episode], groups: list[int], reference: CausalLMStudent
) -> UpdateStats:
    generator = torch.Generator().manual_seed(0)
    if algo == "ppo":
        return ppo_update(trainer, episodes, generator=generator, reference=reference)
    return grpo_update(trainer, episodes, groups, generator=generator, reference=reference)


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_update_rescores_recorded_tokens_with_ratio_one(model_dir: Path, algo: str) -> None:
    policy, reference = generating(model_dir), generating(model_dir)
    episodes, groups = recorded_episodes(policy)
    steps = [e.trajectory[0] for e in episodes]
    # The test means something only if re-encoding the text would give other tokens than were sampled.
    assert any(policy._answer_ids(s.action) != s.token_ids for s in steps)
    assert any(s.action not in s.observation.candidates for s in steps)  # free text still trains
    assert len(flatten_episodes(episodes)) == 4

    spy, ref_spy = Spy(policy), Spy(reference)
    trainer = Trainer(policy, TrainerConfig(algo=algo, kl_coef=0.5, minibatch_size=1000, update_epochs=1))
    stats = update(algo, trainer, episodes, groups, reference)

    assert stats.first_ratio_mean == pytest.approx(1.0, abs=1e-5)
    assert stats.approx_kl == pytest.approx(0.0, abs=1e-6)
    assert stats.kl == pytest.approx(0.0, abs=1e-6)
    by_obs = {id(s.observation): s for s in steps}
    assert len(spy.calls) == 2 and len(ref_spy.calls) == 1  # old logprobs + one minibatch; the reference once
    for args, kwargs, _ in spy.calls + ref_spy.calls:
        rows = [by_obs[id(o)] for o in args[0]]
        assert [list(ids) for ids in kwargs["token_ids"]] == [s.token_ids for s in rows]
        assert [list(mask) for mask in kwargs["loss_mask"]] == [s.loss_mask for s in rows]
    # Untempered sampling: the re-scored old logprobs are the recorded ones, token by token.
    old = spy.calls[0][2]
    for i, step in enumerate(steps):
        n = len(step.token_ids)
        assert old.token_logprobs[i, :n].tolist() == pytest.approx(step.token_logprobs, abs=1e-4)
        assert float(old.logprobs[i]) == pytest.approx(step.logprob, abs=1e-4)


def test_evaluate_honours_the_recorded_loss_mask(model_dir: Path) -> None:
    student = generating(model_dir)
    episodes, _ = recorded_episodes(student)
    step = episodes[0].trajectory[0]
    mask = [1] * (len(step.token_ids) - 1) + [0]
    with torch.no_grad():
        ev = student.evaluate(
            [step.observation], [ENV], [step.action], token_ids=[step.token_ids], loss_mask=[mask]
        )
    assert ev.token_mask[0].tolist()[: len(mask)] == [bool(m) for m in mask]
    assert float(ev.logprobs[0]) == pytest.approx(sum(step.token_logprobs[:-1]), abs=1e-4)


def test_distillation_of_a_generating_lm_is_the_target_text_cross_entropy(model_dir: Path) -> None:
    student = generating(model_dir)
    trainer = Trainer(student, TrainerConfig())
    obs = [Observation(text=f"case {k}: 1 failed", candidates=["run pytest -q", "stop"]) for k in range(2)]
    distill = DistillBatch(tuple(obs), (ENV, ENV), ("run pytest -q", "stop"), torch.tensor([1.0, 0.5]))
    loss = trainer.auxiliary_loss(distill, None, None, UpdateStats())
    with torch.no_grad():
        logprobs = student.evaluate(list(obs), [ENV, ENV], ["run pytest -q", "stop"]).logprobs
    assert loss.item() == pytest.approx(float(-(torch.tensor([1.0, 0.5]) * logprobs).sum() / 2), rel=1e-5)
    loss.backward()  # reaches the model: the warm start trains a generating student
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in student.model.parameters())


def test_negative_lane_kl_of_a_generating_student_is_zero_at_the_reference_and_grows_after_a_step(
    model_dir: Path,
) -> None:
    torch.manual_seed(0)
    student, reference = generating(model_dir), generating(model_dir)
    reference.load_state_dict(student.state_dict())
    episodes, _ = recorded_episodes(student)
    negative = negative_states(episodes)
    assert negative is not None and len(negative) == 4
    trainer = Trainer(student, TrainerConfig(lr=1e-2, negative_kl_coef=1.0))
    at_reference = UpdateStats()
    trainer.auxiliary_loss(None, negative, reference, at_reference)
    assert at_reference.negative_kl == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():  # move the student away from the reference
        for p in student.parameters():
            p.add_(0.05 * torch.randn_like(p))
    moved = UpdateStats()
    loss = trainer.auxiliary_loss(None, negative, reference, moved)
    assert moved.negative_kl > 1e-4 and loss.requires_grad


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_a_generating_student_is_clipped_per_token_and_agg_weighs_the_tokens(
    model_dir: Path, algo: str
) -> None:
    episodes, _ = recorded_episodes(generating(model_dir))
    first = episodes[0].trajectory[0]
    short = [1, 1] + [0] * (len(first.token_ids) - 2)  # only 2 of its tokens train: answers of unequal weight
    masked = first.model_copy(update={"loss_mask": short})
    episodes[0] = episodes[0].model_copy(update={"trajectory": [masked]})
    groups = [0, 0, 0, 1]  # group 0 rewards (1, -1, 1): advantages that do not cancel
    tokens = torch.tensor([float(sum(e.trajectory[0].loss_mask)) for e in episodes])  # (4,) answer lengths
    got = {}
    for agg in ("token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        policy = generating(model_dir)
        config = TrainerConfig(algo=algo, agg=agg, minibatch_size=1000, update_epochs=1,
                               step_advantage_coef=0.0)
        trainer = Trainer(policy, config)
        got[agg] = update(algo, trainer, episodes, groups, policy).policy_loss
    if algo == "grpo":
        adv = advantages.grpo_advantages(torch.tensor([e.reward for e in episodes]), torch.tensor(groups))
    else:  # GAE on one-step episodes with zero initial values, normalised over the batch
        rewards = torch.tensor([e.reward for e in episodes])
        adv = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    # ratio 1 in the only minibatch: the loss is -A summed over each answer's tokens, then aggregated
    weighted = float((adv * tokens).sum())
    assert got["token-mean"] == pytest.approx(-weighted / float(tokens.sum()), abs=1e-5)
    assert got["seq-mean-token-sum"] == pytest.approx(-weighted / len(episodes), abs=1e-5)
    # Dr. GRPO's constant is the update's longest answer, whatever the minibatch holds
    longest = max(len(e.trajectory[0].token_ids) for e in episodes)
    assert got["seq-mean-token-sum-norm"] == pytest.approx(-weighted / len(episodes) / longest, abs=1e-5)
    assert len(set(tokens.tolist())) > 1 and tokens.min() > 1  # per action, both modes would give one loss

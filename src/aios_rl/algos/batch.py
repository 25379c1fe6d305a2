"""Typed training batches built from episodes (SB3 ``RolloutBufferSamples`` style, no dicts of tensors)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from aios_rl.contracts.episode import Episode, Observation, Step
from aios_rl.contracts.errors import TrainingError
from aios_rl.policy.base import Evaluation, Policy


@dataclass(frozen=True)
class StepBatch:
    """The trainable steps of several episodes, flattened (N steps in total)."""

    observations: tuple[Observation, ...]  # (N,)
    environments: tuple[str, ...]  # (N,)
    actions: tuple[str, ...]  # (N,)
    episode_index: torch.Tensor  # (N,) long: which episode of the input each step came from
    rewards: torch.Tensor  # (N,) step reward; the episode's fused reward is added on its last step
    dones: torch.Tensor  # (N,) bool: last step of its episode
    behavior_logprobs: torch.Tensor  # (N,) logprob recorded when the step was sampled
    token_ids: tuple[tuple[int, ...] | None, ...]  # (N,) LM students: the answer tokens sampled, else None
    loss_masks: tuple[tuple[int, ...] | None, ...]  # (N,) LM students: 1 on the tokens that train, else None

    def __len__(self) -> int:
        return len(self.actions)

    def subset(self, index: torch.Tensor) -> StepBatch:
        idx = index.tolist()
        return StepBatch(
            observations=tuple(self.observations[i] for i in idx),
            environments=tuple(self.environments[i] for i in idx),
            actions=tuple(self.actions[i] for i in idx),
            episode_index=self.episode_index[index],
            rewards=self.rewards[index],
            dones=self.dones[index],
            behavior_logprobs=self.behavior_logprobs[index],
            token_ids=tuple(self.token_ids[i] for i in idx),
            loss_masks=tuple(self.loss_masks[i] for i in idx),
        )


def trainable(step_observation: Observation, action: str) -> bool:
    """A step trains a candidate-scoring policy only when its action was one of the offered candidates."""
    return not step_observation.candidates or action in step_observation.candidates


def state_of(observation: Observation) -> tuple:
    """The state an observation shows: its ``state_key`` where the environment declares one, else its text
    and candidates (a text that carries a step counter then never repeats). GiGPO's anchor states and
    self-imitation's loop cutting both compare states by it."""
    if observation.state_key is not None:
        return ("key", observation.state_key)
    return ("text", observation.text, tuple(observation.candidates))


def trains_on(step: Step) -> bool:
    """Whether a recorded step can be trained on: its action was a candidate, or an LM wrote its tokens."""
    # An LM that wrote its answer token by token trains on those tokens whatever they say: an invalid
    # answer is exactly what the update should make less likely. A candidate scorer cannot re-score one.
    return step.token_ids is not None or trainable(step.observation, step.action)


def flatten_episodes(episodes: Sequence[Episode]) -> StepBatch:
    """Flatten episodes into steps; steps whose action was not admissible (invalid actions) are dropped,
    unless the step recorded the tokens an LM generated (those are trained, invalid or not).

    Raises:
        TrainingError: when no episode has a trainable step.
    """
    obs, envs, actions, ep_idx, rewards, dones, behavior = [], [], [], [], [], [], []
    token_ids: list[tuple[int, ...] | None] = []
    loss_masks: list[tuple[int, ...] | None] = []
    for e, episode in enumerate(episodes):
        steps = [s for s in episode.trajectory if trains_on(s)]
        for k, step in enumerate(steps):
            last = k == len(steps) - 1
            obs.append(step.observation)
            envs.append(episode.environment)
            actions.append(step.action)
            ep_idx.append(e)
            rewards.append(step.reward + (episode.reward if last else 0.0))
            dones.append(last)
            behavior.append(step.logprob)
            token_ids.append(None if step.token_ids is None else tuple(step.token_ids))
            loss_masks.append(None if step.loss_mask is None else tuple(step.loss_mask))
    if not actions:
        raise TrainingError(f"none of the {len(episodes)} episodes has a trainable step")
    return StepBatch(
        observations=tuple(obs),
        environments=tuple(envs),
        actions=tuple(actions),
        episode_index=torch.tensor(ep_idx, dtype=torch.long),
        rewards=torch.tensor(rewards, dtype=torch.float32),
        dones=torch.tensor(dones, dtype=torch.bool),
        behavior_logprobs=torch.tensor(behavior, dtype=torch.float32),
        token_ids=tuple(token_ids),
        loss_masks=tuple(loss_masks),
    )


def evaluate_steps(policy: Policy, steps: StepBatch) -> Evaluation:
    """``policy.evaluate`` on recorded steps, handing back the recorded tokens when the steps have any.

    An LM student must re-score the tokens it sampled, not a re-encoding of the decoded text (which can
    differ: other BPE splits, no EOS after an answer cut at ``max_new_tokens``), or the ratio and the
    offline importance weight compare different sequences. Steps of a policy that records no tokens (the
    compact student) call ``evaluate`` with the three generic arguments only.
    """
    if all(ids is None for ids in steps.token_ids):
        return policy.evaluate(steps.observations, steps.environments, steps.actions)
    return policy.evaluate(  # type: ignore[call-arg]  # the token keywords of Policy.evaluate (its docstring)
        steps.observations, steps.environments, steps.actions,
        token_ids=steps.token_ids, loss_mask=steps.loss_masks,
    )


def ratio_terms(ev: Evaluation) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-probabilities the clipped surrogate and the KL penalty compare, with their mask.

    A student that writes its actions (an LM in generate mode: no candidates, recorded tokens) is compared
    per token, ``(B, T)`` answer tokens with the loss mask, as PPO and GRPO do for language models; then
    ``trainer.agg`` decides how tokens and sequences weigh. A student that chooses among candidates (the
    compact student, an LM in score mode, whose action probability is normalised over the candidates and so
    is no product of token probabilities) is compared per action: one column, ``(B, 1)``.
    """
    if ev.candidate_mask.shape[1] == 0 and ev.token_logprobs is not None and ev.token_mask is not None:
        return ev.token_logprobs, ev.token_mask
    single = torch.ones((len(ev.logprobs), 1), dtype=torch.bool, device=ev.logprobs.device)
    return ev.logprobs[:, None], single


def fit_width(values: torch.Tensor, width: int) -> torch.Tensor:
    """``values`` (B, T) cut or zero-padded to ``width`` columns: token rows scored in a larger batch (padded
    to its longest answer) lined up with a minibatch's (padded to its own); the columns cut are padding."""
    if values.shape[1] >= width:
        return values[:, :width]
    return torch.nn.functional.pad(values, (0, width - values.shape[1]))


@dataclass(frozen=True)
class DistillBatch:
    """States with the teacher's reference action (an admissible candidate of that state)."""

    observations: tuple[Observation, ...]  # (M,)
    environments: tuple[str, ...]  # (M,)
    targets: tuple[str, ...]  # (M,) candidate text the teacher would choose
    weights: torch.Tensor  # (M,) teacher confidence

    def __len__(self) -> int:
        return len(self.targets)

    def subset(self, index: torch.Tensor) -> DistillBatch:
        rows = index.tolist()
        return DistillBatch(
            observations=tuple(self.observations[i] for i in rows),
            environments=tuple(self.environments[i] for i in rows),
            targets=tuple(self.targets[i] for i in rows),
            weights=self.weights[index],
        )

    def __add__(self, other: DistillBatch) -> DistillBatch:
        """Both batches' states, this one's first."""
        return DistillBatch(
            self.observations + other.observations,
            self.environments + other.environments,
            self.targets + other.targets,
            torch.cat([self.weights, other.weights]),
        )


def negative_states(episodes: Sequence[Episode]) -> StepBatch | None:
    """The trainable steps of negative-lane episodes, or None when none has one.

    The update is penalised for moving away from the pre-update reference at these states: on the
    candidate distribution for students that rank candidates, on the recorded answers (their tokens and
    behaviour log-probabilities) for students that write them.
    """
    try:
        return flatten_episodes(episodes)
    except TrainingError:
        return None

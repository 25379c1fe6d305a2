"""Run groups of episodes: environments step in parallel workers, the policy acts on the whole batch.

A group is G episodes of one task. All live environments of the group are stepped in lockstep: one
batched ``policy.act`` call per step for every environment still running (batched inference in the
driver), then the environment steps run in a thread pool (each one is a sandboxed subprocess, so threads
give real parallelism). Each finished episode is verified, optionally critiqued by a teacher, and its
reward fused by the control plane's reward rules.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from aios_rl.contracts.episode import DecodingRegime, Episode, Observation, Step, Task, TeacherSignal, Verification, utc_now
from aios_rl.contracts.errors import AiosRlError
from aios_rl.contracts.protocols import Env, Teacher
from aios_rl.control.reward import RewardConfig, fuse_reward
from aios_rl.policy.base import ActionSample, Policy
from aios_rl.rollout.budget import Budget

log = logging.getLogger(__name__)

EnvFactory = Callable[[], Env]


@dataclass
class _Live:
    """One running episode."""

    env: Env
    observation: Observation
    steps: list[Step]
    started: float
    seed: int
    done: bool = False


def run_group(
    make_env: EnvFactory,
    task: Task,
    policy: Policy,
    *,
    size: int,
    seed: int,
    policy_version: str,
    regime: DecodingRegime | None = None,
    teacher: Teacher | None = None,
    reward_config: RewardConfig | None = None,
    workers: int = 2,
    budget: Budget | None = None,
    same_seed: bool = False,
) -> list[Episode]:
    """Run ``size`` episodes of ``task`` and return them verified and rewarded.

    Args:
        seed: seeds the environments (``seed + i`` per member, or ``seed`` for all when ``same_seed``) and
            the sampling generator, so a group is reproducible.
        same_seed: every member resets with the same seed (matched comparison runs).
    """
    regime = regime or DecodingRegime()
    budget = budget if budget is not None else Budget()
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        seeds = [seed if same_seed else seed + i for i in range(size)]
        envs = [make_env() for _ in range(size)]
        try:
            first = list(pool.map(lambda pair: pair[0].reset(task, seed=pair[1]), zip(envs, seeds)))
            live = [_Live(env, obs, [], time.perf_counter(), s) for env, obs, s in zip(envs, first, seeds)]
            budget.rollouts += size
            while not all(item.done for item in live):
                running = [item for item in live if not item.done]
                samples = policy.act([r.observation for r in running], [task.environment] * len(running), regime, generator)
                budget.policy_forwards += 1
                budget.candidates_scored += sum(len(r.observation.candidates) for r in running)
                budget.tokens_generated += sum(len(s.token_ids or ()) for s in samples)
                list(pool.map(lambda pair: _advance(*pair), zip(running, samples)))
                budget.env_steps += len(running)
            verifications = list(pool.map(lambda item: _verify(item.env), live))
        finally:
            for env in envs:
                env.close()
    budget.wall_s += time.perf_counter() - start
    episodes = []
    for item, verification in zip(live, verifications):
        episode = _episode(task, item, verification, policy_version, regime)
        episodes.append(finalize(episode, task, teacher, reward_config))
    return episodes


def _advance(item: _Live, sample: ActionSample) -> None:
    t0 = time.perf_counter()
    result = item.env.step(sample.action)
    item.steps.append(
        Step(
            observation=item.observation,
            action=sample.action,
            logprob=sample.logprob,
            entropy=max(0.0, sample.entropy),
            token_ids=list(sample.token_ids) if sample.token_ids is not None else None,
            token_logprobs=list(sample.token_logprobs) if sample.token_logprobs is not None else None,
            loss_mask=list(sample.loss_mask) if sample.loss_mask is not None else None,
            reward=result.reward,
            terminated=result.terminated,
            truncated=result.truncated,
            info=result.info,
            duration_s=time.perf_counter() - t0,
        )
    )
    item.observation = result.observation
    item.done = result.terminated or result.truncated


def _verify(env: Env) -> Verification:
    try:
        return env.verify()
    except AiosRlError as exc:  # process boundary: a verifier that cannot run blocks the episode
        log.warning("verification failed: %s", exc)
        return Verification(completed=False, outcome="blocked", evidence={"error": str(exc)})


def _episode(task: Task, item: _Live, verification: Verification, version: str, regime: DecodingRegime) -> Episode:
    env_reward = sum(s.reward for s in item.steps)
    return Episode(
        environment=task.environment,
        task_id=task.task_id,
        split=task.split,
        trajectory=item.steps,
        outcome=verification.outcome,
        reward=env_reward,
        env_reward=env_reward,
        policy_version=version,
        decoding_regime=regime,
        verification=verification,
        seed=item.seed,
        finished_at=utc_now(),
        duration_s=time.perf_counter() - item.started,
    )


def finalize(episode: Episode, task: Task, teacher: Teacher | None, reward_config: RewardConfig | None) -> Episode:
    """Attach the teacher's signal (a failing teacher never stops training) and the fused reward."""
    signal: TeacherSignal | None = None
    if teacher is not None:
        try:
            signal = teacher.signal(task, episode)
        except AiosRlError as exc:
            signal = TeacherSignal(status="failed_all_backends", backend="?", error=str(exc))
    parts = fuse_reward(episode.outcome, signal, len(episode.trajectory), reward_config)
    return episode.model_copy(
        update={
            "teacher_signal": signal,
            "reward": parts.total,
            "env_reward": episode.env_reward + parts.terminal,
            "reward_components": parts,
        }
    )


def group_stats(episodes: Sequence[Episode]) -> dict[str, float]:
    """Success rate, mean reward and whether the group's rewards had zero variance."""
    rewards = [e.reward for e in episodes]
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / len(rewards)
    return {
        "success": sum(e.outcome == "success" for e in episodes) / len(episodes),
        "reward": mean,
        "zero_variance": float(var < 1e-12),
    }

"""Run rollouts: environments step in parallel workers, the policy acts on the whole batch.

:func:`run_rollouts` runs a list of jobs to completion. A job is a fresh rollout of a task (reset with a
seed) or a branch: a copy of a finished rollout's first ``k`` steps whose environment is restored from the
snapshot taken before that rollout's action ``k`` and continues under its own decoding regime. All live
environments are stepped in lockstep: one batched ``policy.act`` call per step and decoding regime for
every environment still running (batched inference in the driver), then the environment steps run in a
thread pool (each one is a sandboxed subprocess, so threads give real parallelism). Each finished episode
is verified, optionally critiqued by a teacher, and its reward fused by the control plane's reward rules.
Every rollout, branch, environment step and policy forward is counted in the :class:`Budget` ledger.

:func:`run_group` is the plain case: G fresh episodes of one task (matched comparisons, evaluation).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import torch

from aios_rl.algos.batch import state_of
from aios_rl.contracts.episode import (
    BranchRef,
    DecodingRegime,
    Episode,
    Observation,
    Step,
    Task,
    TeacherSignal,
    Verification,
    utc_now,
)
from aios_rl.contracts.errors import AiosRlError, ConfigError
from aios_rl.contracts.protocols import Env, Teacher
from aios_rl.control.reward import RewardConfig, fuse_reward
from aios_rl.policy.base import ActionSample, Policy
from aios_rl.rollout.budget import ActMetrics, Budget

log = logging.getLogger(__name__)

EnvFactory = Callable[[], Env]
DistinctMode = Literal["off", "first", "states"]
DISTINCT_MODES: tuple[str, ...] = get_args(DistinctMode)


@dataclass(frozen=True)
class Fork:
    """Where a branch starts: ``parent``'s state before its action ``step`` (it shares steps 0..step-1)."""

    parent: Rollout
    step: int


@dataclass(frozen=True)
class RolloutJob:
    """One rollout to run: fresh from ``reset(task, seed)``, or a branch when ``fork`` is set."""

    task: Task
    seed: int
    regime: DecodingRegime
    fork: Fork | None = None


@dataclass
class Rollout:
    """A finished rollout: its episode, and per step (copied prefix included) what branching needs.

    Attributes:
        hidden: the policy's hidden state at each step (RAIL's context), ``len(trajectory)`` entries.
        snapshots: the environment state before each step's action; empty when snapshots were not kept.
    """

    episode: Episode
    job: RolloutJob
    hidden: list[tuple[float, ...]]
    snapshots: list[Any]


@dataclass
class _Live:
    """One running rollout."""

    job: RolloutJob
    env: Env
    observation: Observation
    steps: list[Step]
    hidden: list[tuple[float, ...]]
    snapshots: list[Any]
    started: float = field(default_factory=time.perf_counter)
    done: bool = False


def run_rollouts(
    jobs: Sequence[RolloutJob],
    make_env: EnvFactory,
    policy: Policy,
    *,
    policy_version: str,
    generator: torch.Generator,
    teacher: Teacher | None = None,
    reward_config: RewardConfig | None = None,
    workers: int = 2,
    budget: Budget | None = None,
    snapshots: bool = False,
    distinct: DistinctMode = "off",
    act_metrics: ActMetrics | None = None,
) -> list[Rollout]:
    """Run every job to the end and return its verified, rewarded rollout, in job order.

    Args:
        generator: the sampling generator; with the jobs' seeds it makes the run reproducible.
        budget: the ledger to add this run's rollouts, branches, steps, forwards and wall time to.
        snapshots: keep an environment snapshot before every action, so the rollouts can be branched.
        distinct: how a task's jobs draw actions (the policy's ``act`` with ``distinct``): ``off``,
            independently; ``first``, the fresh jobs of a task draw distinct first actions, so a group of G
            tries G different first moves while the policy offers them; ``states``, every action drawn from
            a state the task's jobs share (the same ``state_key``: the opening state, and the states a
            ``revert`` returns to) differs from all those drawn from it before in this call, so a group
            tries up to G x (attempts) different patches from the opening state instead of repeating the
            ones the policy likes best.
        act_metrics: where to add the policy's ``last_act_metrics`` after each of its ``act`` calls.
    """
    if distinct not in DISTINCT_MODES:
        raise ConfigError(f"distinct={distinct!r}: choose one of {', '.join(DISTINCT_MODES)}")
    budget = budget if budget is not None else Budget()
    act_metrics = act_metrics if act_metrics is not None else ActMetrics()
    start = time.perf_counter()
    drawn: dict[Any, set[str]] = {}  # distinct="states": the actions drawn from each (task, state) so far
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        envs: list[Env] = []
        try:
            envs.extend(make_env() for _ in jobs)  # built inside: those made before a failing one are closed
            live = list(pool.map(_start, jobs, envs))
            budget.rollouts += len(jobs)
            budget.branches += sum(job.fork is not None for job in jobs)
            while not all(item.done for item in live):
                running = [item for item in live if not item.done]
                if snapshots:  # a restored branch already holds the snapshot of its current state
                    need = [item for item in running if len(item.snapshots) == len(item.steps)]
                    for item, snap in zip(need, pool.map(lambda item: item.env.snapshot(), need)):
                        item.snapshots.append(snap)
                samples = _act(running, policy, generator, budget, act_metrics, distinct, drawn)
                list(pool.map(lambda pair: _advance(*pair), zip(running, samples)))
                budget.env_steps += len(running)
                budget.invalid_actions += sum(bool(i.steps[-1].info.get("invalid_action")) for i in running)
            verifications = list(pool.map(lambda item: _verify(item.env), live))
        finally:
            for env in envs:
                env.close()
    out = []
    for item, verification in zip(live, verifications):
        episode = finalize(
            _episode(item, verification, policy_version), item.job.task, teacher, reward_config
        )
        out.append(Rollout(episode, item.job, item.hidden, item.snapshots if snapshots else []))
    budget.wall_s += time.perf_counter() - start  # the teacher's critiques included
    return out


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
    act_metrics: ActMetrics | None = None,
) -> list[Episode]:
    """Run ``size`` episodes of ``task`` and return them verified and rewarded.

    Args:
        seed: seeds the environments (``seed + i`` per member, or ``seed`` for all when ``same_seed``) and
            the sampling generator, so a group is reproducible.
        same_seed: every member resets with the same seed (matched comparison runs).
        act_metrics: where to add what the policy reports about its ``act`` calls (``run_rollouts``).
    """
    regime = regime or DecodingRegime()
    jobs = [RolloutJob(task, seed if same_seed else seed + i, regime) for i in range(size)]
    rollouts = run_rollouts(
        jobs,
        make_env,
        policy,
        policy_version=policy_version,
        generator=torch.Generator().manual_seed(seed),
        teacher=teacher,
        reward_config=reward_config,
        workers=workers,
        budget=budget,
        act_metrics=act_metrics,
    )
    return [r.episode for r in rollouts]


def _start(job: RolloutJob, env: Env) -> _Live:
    if job.fork is None:
        return _Live(job, env, env.reset(job.task, seed=job.seed), [], [], [])
    parent, k = job.fork.parent, job.fork.step
    if not parent.snapshots or not 0 <= k < len(parent.episode.trajectory):
        raise AiosRlError(
            f"cannot branch episode {parent.episode.episode_id} at step {k}: "
            f"{len(parent.snapshots)} snapshots, {len(parent.episode.trajectory)} steps"
        )
    env.restore(parent.snapshots[k])
    steps = parent.episode.trajectory
    # The restored state is the parent's before action k, so its observation is the parent's step k one.
    return _Live(
        job,
        env,
        steps[k].observation,
        list(steps[:k]),
        list(parent.hidden[:k]),
        list(parent.snapshots[: k + 1]),
    )


def _act(
    running: list[_Live],
    policy: Policy,
    generator: torch.Generator,
    budget: Budget,
    act_metrics: ActMetrics,
    distinct: DistinctMode,
    drawn: dict[Any, set[str]],
) -> list[ActionSample]:
    """One batched ``act`` per decoding regime (in order of first appearance, so runs are reproducible).

    With ``distinct="first"``, fresh rollouts still at their reset state are grouped by task: the
    environment resets a task to the same state whatever the seed, so their observations are the same.
    With ``"states"``, every rollout is grouped by its task and state (``algos.batch.state_of``), and
    ``drawn`` keeps what each such group drew at earlier steps.
    """
    by_regime: dict[DecodingRegime, list[int]] = {}
    for i, item in enumerate(running):
        by_regime.setdefault(item.job.regime, []).append(i)
    samples: list[ActionSample | None] = [None] * len(running)
    for regime, index in by_regime.items():
        members = [running[i] for i in index]
        observations = [m.observation for m in members]
        environments = [m.job.task.environment for m in members]
        if distinct == "first":
            groups = [m.job.task.task_id if not m.steps and m.job.fork is None else None for m in members]
            out = policy.act(observations, environments, regime, generator, distinct=groups)
        elif distinct == "states":
            groups = [(m.job.task.task_id, state_of(m.observation)) for m in members]
            out = policy.act(observations, environments, regime, generator, distinct=groups, drawn=drawn)
        else:
            out = policy.act(observations, environments, regime, generator)
        budget.policy_forwards += 1
        act_metrics.add(policy.last_act_metrics, len(observations))
        # A sample with an index was chosen by scoring its observation's candidates (the compact student, an
        # LM in score mode, whose tokens are the chosen answer's, scored, not generated); one without was
        # written token by token (an LM in generate mode, which never looks at the candidates).
        budget.candidates_scored += sum(
            len(m.observation.candidates) for m, s in zip(members, out, strict=True) if s.index is not None
        )
        budget.tokens_generated += sum(len(s.token_ids or ()) for s in out if s.index is None)
        for i, sample in zip(index, out):
            samples[i] = sample
    return samples  # type: ignore[return-value]


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
    item.hidden.append(tuple(sample.hidden))
    item.observation = result.observation
    item.done = result.terminated or result.truncated


def _verify(env: Env) -> Verification:
    try:
        return env.verify()
    except AiosRlError as exc:  # process boundary: a verifier that cannot run blocks the episode
        log.warning("verification failed: %s", exc)
        return Verification(completed=False, outcome="blocked", evidence={"error": str(exc)})


def _episode(item: _Live, verification: Verification, version: str) -> Episode:
    task, fork = item.job.task, item.job.fork
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
        decoding_regime=item.job.regime,
        branch_of=None
        if fork is None
        else BranchRef(episode_id=fork.parent.episode.episode_id, step=fork.step),
        verification=verification,
        seed=item.job.seed,
        finished_at=utc_now(),
        duration_s=time.perf_counter() - item.started,
    )


def finalize(
    episode: Episode, task: Task, teacher: Teacher | None, reward_config: RewardConfig | None
) -> Episode:
    """Attach the teacher's signal (a failing teacher never stops training) and the fused reward."""
    signal: TeacherSignal | None = None
    if teacher is not None:
        try:
            signal = teacher.signal(task, episode)
        except AiosRlError as exc:
            signal = TeacherSignal(status="failed_all_backends", backend="?", error=str(exc))
    invalid = sum(bool(step.info.get("invalid_action")) for step in episode.trajectory)
    parts = fuse_reward(episode.outcome, signal, len(episode.trajectory), reward_config, n_invalid=invalid)
    return episode.model_copy(
        update={
            "teacher_signal": signal,
            "reward": parts.total,
            "env_reward": episode.env_reward + parts.terminal,
            "reward_components": parts,
        }
    )

"""Mining rounds of the shell task generator: validate candidate mutants in the sandbox until enough are kept.

:func:`mine` deals each repository a quota, runs its original suite, then judges its candidates in rounds
whose results are applied in submission order; a mutant that :func:`~.validation.judge` accepts becomes a
:class:`KeptMutant`.
"""

from __future__ import annotations

import logging
import math
import random
import sys
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tqdm import tqdm

from aios_rl.envs.shell.generator_config import GeneratorConfig
from aios_rl.envs.shell.mutant_candidates import SourceRepo, candidate_queue, task_id_for
from aios_rl.envs.shell.mutate import Mutation, apply_mutation, apply_unified_diff, unified_diff
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.validation import SuiteRun, judge, run_suite

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeptMutant:
    """A mutant that passed validation, with everything its task needs."""

    repo: SourceRepo
    mutation: Mutation
    original_text: str
    mutant_text: str
    run: SuiteRun
    task_id: str


@dataclass
class _RepoState:
    repo: SourceRepo
    rng: random.Random
    queue: deque[Mutation] = field(default_factory=deque)  # filled once the original passes
    original: SuiteRun | None = None
    sandbox: Sandbox | None = None  # for mutants, with a CPU limit fitted to the original's run
    closed: bool = False  # the original fails, or no candidates are left
    tried: int = 0
    kept: list[KeptMutant] = field(default_factory=list)


_Job = tuple[_RepoState, Mutation | None]  # None: run the original suite


def _quotas(states: list[_RepoState], count: int) -> dict[str, int]:
    """Deal ``count`` round-robin over open repos in order; a closed repo keeps exactly what it has."""
    quotas = {s.repo.name: len(s.kept) for s in states if s.closed}
    open_states = [s for s in states if not s.closed]
    left = count - sum(quotas.values())
    for i, s in enumerate(open_states):
        share = left // len(open_states) + (1 if i < left % len(open_states) else 0)
        quotas[s.repo.name] = max(share, len(s.kept))
    return quotas


def _plan_round(states: list[_RepoState], quotas: dict[str, int], workers: int) -> list[_Job]:
    """This round's jobs: the original run of repos not validated yet (their mutants wait a round, as
    their limits derive from it), else about need / keep-rate candidates, topped up to keep workers busy."""
    jobs: list[_Job] = []
    for s in states:
        need = quotas[s.repo.name] - len(s.kept)
        if s.closed or need <= 0:
            continue
        if s.original is None:
            jobs.append((s, None))
            continue
        # need / keep-rate candidates (smoothed rate, prior 0.9), rounded down so spares stay rare
        rate = (len(s.kept) + 9) / (s.tried + 10)
        for _ in range(min(len(s.queue), need + math.floor(need * (1 - rate) / rate))):
            jobs.append((s, s.queue.popleft()))
    needy = [s for s in states if s.queue and not s.closed and quotas[s.repo.name] > len(s.kept)]
    while needy and len(jobs) < 2 * workers:  # last rounds: spare candidates rather than idle workers
        for s in list(needy):
            if s.queue and len(jobs) < 2 * workers:
                jobs.append((s, s.queue.popleft()))
            else:
                needy.remove(s)
    return jobs


def _limits(state: _RepoState, config: GeneratorConfig) -> tuple[float, int]:
    """Wall and CPU limits for a mutant: the configured ones, or 4x what the original suite took.

    Mostly the CPU limit ends endless loops: it does not stretch with load, so the same mutants are kept
    on a busy machine. The wall limit only catches mutants that hang without spinning.
    """
    assert state.original is not None
    took = state.original.duration_s  # wall time, an upper bound on the single-process suite's CPU time
    return max(config.mutant_timeout_s, 4 * took), max(config.mutant_cpu_s, math.ceil(4 * took))


def _run_job(job: _Job, config: GeneratorConfig, sandbox: Sandbox) -> SuiteRun:
    state, mutation = job
    repo = state.repo
    if mutation is None:
        return run_suite(repo.root, repo.test_command, config.timeout_s, sandbox)
    assert state.sandbox is not None
    mutant = apply_mutation((repo.root / mutation.file).read_text(encoding="utf-8"), mutation)
    wall, _ = _limits(state, config)
    return run_suite(repo.root, repo.test_command, wall, state.sandbox, files={mutation.file: mutant})


def _original_ok(run: SuiteRun) -> bool:
    return run.returncode == 0 and not run.timed_out and run.passed >= 1


def _keep(state: _RepoState, mutation: Mutation, run: SuiteRun, config: GeneratorConfig) -> KeptMutant | None:
    """The mutant as a task, if :func:`judge` accepts it and some tests (named) fail while some pass."""
    assert state.original is not None
    verdict, _ = judge(run, state.original, state.repo.test_command, _limits(state, config)[0])
    if verdict != "valid" or not run.failed or run.passed < 1 or run.output_truncated:
        return None
    original = (state.repo.root / mutation.file).read_text(encoding="utf-8")
    mutant = apply_mutation(original, mutation)
    patch = unified_diff(mutant, original, mutation.file)
    if apply_unified_diff({mutation.file: mutant}, patch).get(mutation.file) != original:
        logger.warning("%s: reference patch does not restore %s; mutant skipped", state.repo.name,
                       mutation.file)
        return None
    return KeptMutant(state.repo, mutation, original, mutant, run, task_id_for(state.repo.name, mutation))


@dataclass(frozen=True)
class MiningResult:
    """What :func:`mine` found: kept mutants (by repo, in trial order), effort, and broken repos."""

    kept: list[KeptMutant]
    tried: int  # candidates judged (spares run only to keep workers busy are not counted)
    runs: int  # sandboxed suite runs, originals and spares included
    broken: dict[str, SuiteRun]  # repo name -> its failing original run


def mine(
    repos: Sequence[SourceRepo], config: GeneratorConfig, sandbox: Sandbox, *, show_progress: bool = False
) -> MiningResult:
    """Validates candidates in rounds until ``config.count`` mutants are kept or candidates run out.

    ``repos`` order matters: earlier repos get the remainder of the round-robin deal, so callers put the
    repos that must not end up empty (holdout) first. Results are applied in submission order, so the
    outcome does not depend on which sandboxed run finishes first. ``sandbox`` runs the original suites;
    mutants run in copies of it (same binds and limits) with a CPU limit fitted to each original. A repo
    whose original suite does not pass gives no tasks and is reported in ``broken``.
    """
    # One rng per repo, so a repo's candidate order does not depend on which other repos were needed.
    states = [_RepoState(r, random.Random(f"{config.seed}/{i}/{r.name}")) for i, r in enumerate(repos)]
    sandboxes: dict[int, Sandbox] = {}
    total = runs = 0
    bar = tqdm(total=config.count, desc="generating tasks", unit="task", file=sys.stderr,
               disable=not show_progress or not sys.stderr.isatty())
    with ThreadPoolExecutor(max_workers=config.workers) as pool, bar:
        while total < config.count and not all(s.closed for s in states):
            quotas = _quotas(states, config.count)
            jobs = _plan_round(states, quotas, config.workers)
            runs += len(jobs)
            for job, run in zip(jobs, pool.map(lambda j: _run_job(j, config, sandbox), jobs), strict=True):
                state, mutation = job
                if mutation is None:
                    state.original = run
                    if not _original_ok(run):
                        state.closed = True
                        problem = "report no passed test" if run.returncode == 0 else "do not pass as given"
                        logger.warning("%s: tests %s (exit %s), so it gives no tasks: %s",
                                       state.repo.name, problem, run.returncode, run.tail[-300:])
                        continue
                    cpu = _limits(state, config)[1]
                    if cpu not in sandboxes:  # the caller's sandbox (binds, limits), with that CPU limit
                        sandboxes[cpu] = Sandbox(sandbox.config.model_copy(update={"cpu_seconds": cpu}))
                    state.sandbox = sandboxes[cpu]
                    # Enumerated only now: a repo that is never dealt a task costs nothing.
                    state.queue = candidate_queue(state.repo, config.operators, state.rng)
                    continue
                if len(state.kept) >= quotas[state.repo.name] or total >= config.count:
                    continue  # a spare candidate; the quota is met already
                state.tried += 1
                kept = _keep(state, mutation, run, config)
                if kept is not None:
                    state.kept.append(kept)
                    total += 1
                    bar.update(1)
            for s in states:
                s.closed = s.closed or (s.original is not None and not s.queue)
    broken = {s.repo.name: s.original for s in states if s.original and not _original_ok(s.original)}
    if total < config.count and len(broken) < len(states):
        logger.warning("only %d of %d tasks generated: no candidate mutants are left", total, config.count)
    return MiningResult([k for s in states for k in s.kept], sum(s.tried for s in states), runs, broken)

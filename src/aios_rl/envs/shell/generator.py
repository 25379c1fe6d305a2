"""Shell bug-fix tasks from mutants: the seed benchmark and tasks mined from any local repository.

A task is one mutant of one function the tests cover (a function the tests name, or one such a function
calls). It is kept only if, in the sandbox, the original suite passes, the mutant fails at least one test
and still passes at least one, within the time limit; :func:`aios_rl.envs.shell.validation.judge` decides,
with the original's run standing in for "reference patch applied". The reference patch is
``mutate.unified_diff(mutant, original, path)``, byte for byte what the environment's patch candidates
produce.

Balance and determinism: each repository gets a quota (the count dealt round-robin over the repositories),
each repository's candidates alternate between operators, and work proceeds in rounds whose results are
read in submission order, so the kept set depends only on the seed, never on which sandbox finished first.
Each round submits about ``need / keep-rate`` candidates per repository, which keeps both workers busy
and stops as soon as the count is reached.

Example:
    >>> summary = generate_benchmark(Path("tasks/shell"), GeneratorConfig(count=20, seed=0))
    >>> summary.train, summary.holdout, summary.holdout_repos
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import Field, field_validator
from tqdm import tqdm

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Record, Split
from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.mutate import (
    NON_INVERTIBLE_OPERATORS,
    OPERATORS,
    Mutation,
    apply_mutation,
    apply_unified_diff,
    difficulty_estimate,
    enumerate_mutations,
    fix_candidates,
    function_qualnames,
    unified_diff,
)
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.seed_repos import SEEDS_DIR, list_seed_repos
from aios_rl.envs.shell.task import IGNORED_IN_COPIES, MANIFEST, REPO, ShellTaskManifest, write_task
from aios_rl.envs.shell.validation import PYTEST_COMMAND, SuiteRun, judge, run_suite, validation_sandbox

logger = logging.getLogger(__name__)

SUMMARY_FILE = "benchmark.json"
_TEST_DIRS = frozenset({"tests", "test", "testing"})
_SKIP_DIRS = frozenset({"venv", "env", "site-packages", "node_modules", "build", "dist", "__pycache__"})


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


@dataclass(frozen=True)
class SourceRepo:
    """A repository to mutate: ``root`` is only ever copied, never run in place."""

    name: str
    root: Path
    test_command: tuple[str, ...]
    modules: tuple[str, ...]  # source files to mutate, relative POSIX paths
    test_files: tuple[str, ...]


@dataclass(frozen=True)
class KeptMutant:
    """A mutant that passed validation, with everything its task needs."""

    repo: SourceRepo
    mutation: Mutation
    original_text: str
    mutant_text: str
    run: SuiteRun
    task_id: str


class GenerationSummary(Record):
    """What a generation wrote (also stored, minus timing, as ``benchmark.json``)."""

    out: str
    seed: int
    requested: int
    generated: int
    train: int
    holdout: int
    holdout_repos: list[str]
    per_repo: dict[str, int]
    per_operator: dict[str, int]
    candidates_tried: int
    sandbox_runs: int
    duration_s: float = 0.0


# ---------------------------------------------------------------- what the tests cover


def _is_test_path(rel: PurePosixPath) -> bool:
    name = rel.name
    in_test_dir = bool(_TEST_DIRS & set(rel.parts[:-1]))
    return in_test_dir or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def discover(root: Path, name: str, test_command: Sequence[str]) -> SourceRepo:
    """Source modules (``*.py`` outside test directories) and test files of a repository.

    Raises:
        EnvError: there are no test files or no source modules.
    """
    modules, tests = [], []
    for path in sorted(root.rglob("*.py")):
        rel = PurePosixPath(path.relative_to(root).as_posix())
        if any(p.startswith(".") or p in _SKIP_DIRS for p in rel.parts[:-1]):
            continue
        if _is_test_path(rel):
            tests.append(str(rel))
        elif rel.name != "setup.py":
            modules.append(str(rel))
    if not tests:
        raise EnvError(f"{root}: no test files (tests/, test_*.py or *_test.py); tasks need tests that fail")
    if not modules:
        raise EnvError(f"{root}: no Python source files outside the test directories to mutate")
    return SourceRepo(name, root, tuple(test_command), tuple(modules), tuple(tests))


def referenced_names(test_sources: Sequence[str]) -> set[str]:
    """Identifiers the tests mention: names, attributes, imported names and identifier-like strings."""
    names: set[str] = set()
    for text in test_sources:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.update((node.asname or node.name).split("."))
                names.update(node.name.split("."))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)  # getattr(obj, "name"), parametrized method names
    return names


def covered_functions(source: str, test_names: set[str]) -> list[str]:
    """Qualnames of functions the tests reach: named by the tests, dunders of named classes, and every
    module function those call by name (transitively), so private helpers count too."""
    tree = ast.parse(source)
    qualnames = function_qualnames(source)
    bodies: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            used |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            bodies.setdefault(node.name, set()).update(used)

    def named(qualname: str) -> bool:
        parts = qualname.split(".<locals>.")[0].split(".")
        last = parts[-1]
        dunder = last.startswith("__") and last.endswith("__")
        return last in test_names or (dunder and len(parts) > 1 and parts[-2] in test_names)

    reached = {q.split(".<locals>.")[0].split(".")[-1] for q in qualnames if named(q)}
    frontier = list(reached)
    while frontier:  # names called from reached functions are reached too
        for used in sorted(bodies.get(frontier.pop(), ())):
            if used in bodies and used not in reached:
                reached.add(used)
                frontier.append(used)
    return [q for q in qualnames if named(q) or q.split(".<locals>.")[0].split(".")[-1] in reached]


NON_INVERTIBLE_EVERY = 3


def candidate_queue(repo: SourceRepo, operators: Sequence[str], rng: random.Random) -> deque[Mutation]:
    """The repo's mutations in trial order: shuffled per operator, then dealt round-robin over operators
    (starting at a seeded operator) so a short prefix already covers many operator kinds."""
    test_names = referenced_names([(repo.root / t).read_text(encoding="utf-8", errors="replace")
                                   for t in repo.test_files])
    by_operator: dict[str, list[Mutation]] = {op: [] for op in operators}
    for rel in repo.modules:
        try:
            source = (repo.root / rel).read_text(encoding="utf-8")
            qualnames = covered_functions(source, test_names)
            mutations = enumerate_mutations(source, rel, qualnames, operators=operators) if qualnames else []
        except (UnicodeDecodeError, SyntaxError, ValueError, EnvError) as exc:
            logger.debug("skipping %s/%s: %s", repo.name, rel, exc)
            continue
        seen: set[str] = set()
        for m in mutations:  # equivalent mutants: a resulting source already queued is dropped
            digest = hashlib.sha256(apply_mutation(source, m).encode()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                by_operator[m.operator].append(m)
    lanes = []
    for op in operators:
        rng.shuffle(by_operator[op])
        lanes.append((op, deque(by_operator[op])))
    start = rng.randrange(len(lanes)) if lanes else 0
    lanes = lanes[start:] + lanes[:start]
    queue: deque[Mutation] = deque()
    round_ = 0
    while any(lane for _, lane in lanes):
        for op, lane in lanes:
            # Non-invertible operators (a dropped statement) are dealt only in the second round of every
            # NON_INVERTIBLE_EVERY (never the first): they stay in the benchmark (a few percent of a
            # 200-task set) but cannot crowd out the tasks the candidate list can fix.
            rare = op in NON_INVERTIBLE_OPERATORS and round_ % NON_INVERTIBLE_EVERY != 1
            if lane and not (rare and any(other for o, other in lanes if o not in NON_INVERTIBLE_OPERATORS)):
                queue.append(lane.popleft())
        round_ += 1
    return queue


def task_id_for(repo_name: str, mutation: Mutation) -> str:
    """Deterministic id from the mutation itself (never its operator, which the id must not reveal)."""
    key = "\0".join(map(str, (repo_name, mutation.file, mutation.lineno, mutation.col,
                              mutation.original_segment, mutation.mutated_segment)))
    return f"{repo_name}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


# ---------------------------------------------------------------- mining rounds


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
    mutants run in sandboxes with a CPU limit fitted to each original. A repo whose original suite does
    not pass gives no tasks and is reported in ``broken``.
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
                        logger.warning("%s: tests do not pass as given (exit %s), so it gives no tasks: %s",
                                       state.repo.name, run.returncode, run.tail[-300:])
                        continue
                    cpu = _limits(state, config)[1]
                    if cpu not in sandboxes:
                        sandboxes[cpu] = validation_sandbox(config.timeout_s, cpu_seconds=cpu)
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


# ---------------------------------------------------------------- tasks on disk


def task_prompt(test_command: Sequence[str], failing: Sequence[str]) -> str:
    """What the student is told: the suite fails, how to run it, which tests fail (all of which running
    the tests shows anyway); never the operator, the location or the fix."""
    lines = [
        "The test suite of this repository fails. Find the bug in the source code and fix it by editing the",
        "source files; do not change the tests.",
        "",
        f"Run the tests with: {shlex.join(test_command)}",
        "",
        "Failing tests:",
        *(f"  {node}" for node in failing),
    ]
    return "\n".join(lines)


def build_manifest(kept: KeptMutant, split: Split, config: GeneratorConfig) -> ShellTaskManifest:
    """The manifest of one kept mutant; ground truth goes to ``reference_patch`` and ``metadata`` only."""
    m = kept.mutation
    failing = list(kept.run.failed)
    n_candidates = len(fix_candidates(kept.mutant_text, m.file, [m.qualname]))
    return ShellTaskManifest(
        task_id=kept.task_id,
        split=split,
        prompt=task_prompt(kept.repo.test_command, failing),
        test_command=list(kept.repo.test_command),
        timeout_s=config.timeout_s,
        target_tests=failing,
        reference_patch=unified_diff(kept.mutant_text, kept.original_text, m.file),
        metadata={
            "seed_repo": kept.repo.name,
            "operator": m.operator,
            "description": m.description,
            "file": m.file,
            "qualname": m.qualname,
            "line": m.lineno,
            "col": m.col,
            "difficulty": round(difficulty_estimate(m, n_candidates, len(failing)), 4),
            "failing_count": len(failing),
            "passing_count": kept.run.passed,
            "fix_candidates": n_candidates,
            "generator_seed": config.seed,
        },
    )


def holdout_splits(kept: Sequence[KeptMutant], holdout_repos: Sequence[str], fraction: float,
                   rng: random.Random) -> dict[str, Split]:
    """Every task of ``holdout_repos`` is holdout, plus about ``fraction`` of the others.

    The others are held out by source line (all mutants of one line together), so no holdout task shares
    its buggy line with a training task, and never a repo's last training task.
    """
    splits: dict[str, Split] = {}
    for k in kept:
        splits[k.task_id] = "holdout" if k.repo.name in holdout_repos else "train"
    groups: dict[tuple[str, str, int], list[str]] = {}
    for k in kept:
        if k.repo.name not in holdout_repos:
            groups.setdefault((k.repo.name, k.mutation.file, k.mutation.lineno), []).append(k.task_id)
    keys = sorted(groups)
    rng.shuffle(keys)
    target = round(fraction * sum(len(ids) for ids in groups.values()))
    train_left = Counter(key[0] for key in keys for _ in groups[key])
    held = 0
    for key in keys:
        if held >= target:
            break
        if train_left[key[0]] - len(groups[key]) >= 1:
            for task_id in groups[key]:
                splits[task_id] = "holdout"
            train_left[key[0]] -= len(groups[key])
            held += len(groups[key])
    return splits


def prepare_out_dir(out: Path, force: bool) -> None:
    """Creates ``out``; a non-empty one is refused unless ``force``, which clears a previous task set.

    Raises:
        EnvError: ``out`` is not empty (without ``force``), or holds something other than tasks.
    """
    if out.exists() and not out.is_dir():
        raise EnvError(f"{out} exists and is not a directory; choose a new --out")
    entries = sorted(out.iterdir()) if out.is_dir() else []
    if entries and not force:
        raise EnvError(f"{out} is not empty; choose a new --out, or pass --force to replace its task set")
    for entry in entries:
        is_task = entry.is_dir() and (entry / MANIFEST).is_file()
        if not (is_task or entry.name == SUMMARY_FILE or entry.name.startswith(".tmp-")):
            raise EnvError(f"refusing to clear {out}: {entry.name} is not a task; choose a new --out")
    for entry in entries:
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    out.mkdir(parents=True, exist_ok=True)


def write_tasks(
    out: Path, kept: Sequence[KeptMutant], splits: dict[str, Split], config: GeneratorConfig
) -> None:
    """Writes each task atomically: a copy of its repo with the mutant in place, plus the manifest."""
    for k in sorted(kept, key=lambda k: k.task_id):
        manifest = build_manifest(k, splits[k.task_id], config)
        with tempfile.TemporaryDirectory(prefix="aios-rl-task-") as scratch:
            repo = Path(scratch) / REPO
            shutil.copytree(k.repo.root, repo, ignore=IGNORED_IN_COPIES, symlinks=True)
            (repo / k.mutation.file).write_text(k.mutant_text, encoding="utf-8")
            write_task(out, manifest, repo)


def _summarize(out: Path, config: GeneratorConfig, mined: MiningResult, splits: dict[str, Split],
               holdout_repos: Sequence[str], started: float) -> GenerationSummary:
    kept = mined.kept
    summary = GenerationSummary(
        out=str(out),
        seed=config.seed,
        requested=config.count,
        generated=len(kept),
        train=sum(1 for s in splits.values() if s == "train"),
        holdout=sum(1 for s in splits.values() if s == "holdout"),
        holdout_repos=sorted(holdout_repos),
        per_repo=dict(sorted(Counter(k.repo.name for k in kept).items())),
        per_operator=dict(sorted(Counter(k.mutation.operator for k in kept).items())),
        candidates_tried=mined.tried,
        sandbox_runs=mined.runs,
    )
    # No timing in the file: the same seed must give a byte-identical task set.
    effort = {"out", "duration_s", "candidates_tried", "sandbox_runs"}
    record = {**summary.model_dump(exclude=effort), "config": config.model_dump(mode="json"),
              "tasks": sorted(splits)}
    tmp = out / f".tmp-{SUMMARY_FILE}"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, out / SUMMARY_FILE)
    return summary.model_copy(update={"duration_s": round(time.monotonic() - started, 3)})


# ---------------------------------------------------------------- the two entry points


def generate_benchmark(
    out: Path, config: GeneratorConfig, sandbox: Sandbox | None = None, *, force: bool = False,
    show_progress: bool = False,
) -> GenerationSummary:
    """Generates ``config.count`` tasks from the bundled seed repositories into ``out``.

    ``config.holdout_repos`` seed repos (drawn from the seed) give holdout tasks only and are dealt first,
    so even a small count reaches them; about ``config.holdout_fraction`` of the rest is holdout too.

    Raises:
        EnvError: ``out`` is not empty (without ``force``), or there are too few seed repos.
        SandboxError: bubblewrap is unusable.
    """
    started = time.monotonic()
    names = list_seed_repos()
    if len(names) <= config.holdout_repos:
        raise EnvError(f"{len(names)} seed repos cannot hold out {config.holdout_repos} and still train on "
                       "one; lower --holdout-repos")
    prepare_out_dir(out, force)
    sandbox = sandbox or validation_sandbox()
    rng = random.Random(config.seed)
    holdout = rng.sample(names, config.holdout_repos)
    train = [n for n in names if n not in holdout]
    rng.shuffle(train)
    repos = [discover(SEEDS_DIR / n, n, PYTEST_COMMAND) for n in [*holdout, *train]]
    mined = mine(repos, config, sandbox, show_progress=show_progress)
    splits = holdout_splits(mined.kept, holdout, config.holdout_fraction, rng)
    write_tasks(out, mined.kept, splits, config)
    return _summarize(out, config, mined, splits, holdout, started)


def _working_tree_files(path: Path) -> list[str] | None:
    """Files git would check in (tracked plus untracked-not-ignored), or None when git cannot tell.

    Read-only ``git ls-files``, so a virtualenv or build output in the working tree stays out of tasks.
    """
    if not (path / ".git").exists() or shutil.which("git") is None:
        return None
    argv = ["git", "-C", str(path), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    proc = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    if proc.returncode != 0:
        return None
    return sorted({f for f in proc.stdout.decode(errors="surrogateescape").split("\0") if f})


def snapshot_repo(path: Path, dest: Path) -> None:
    """Copies the working tree of ``path`` (uncommitted edits included) to ``dest`` without ``.git``."""
    files = _working_tree_files(path)
    if files is None:
        shutil.copytree(path, dest, ignore=IGNORED_IN_COPIES, symlinks=True)
        return
    dest.mkdir(parents=True)
    for rel in files:
        if ".git" in PurePosixPath(rel).parts:
            continue
        src = path / rel
        if not src.is_file() and not src.is_symlink():
            continue  # deleted in the working tree but still in the index, or a submodule
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)


def safe_repo_name(path: Path) -> str:
    """A task-id-safe name for a repository directory."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", path.resolve().name).strip("-._")
    return name[:40] or "repo"


def generate_from_repo(
    path: Path, test_command: Sequence[str], out: Path, config: GeneratorConfig, *, split: Split = "train",
    name: str | None = None, sandbox: Sandbox | None = None, force: bool = False, show_progress: bool = False,
) -> GenerationSummary:
    """Mines ``config.count`` tasks from a local repository's working tree into ``out``, all in ``split``.

    The tree is copied without ``.git`` first; every task is an isolated copy with one mutant in it.

    Raises:
        EnvError: ``path`` is not a directory, has no tests or sources, its tests do not pass as given,
            or ``out`` is not empty (without ``force``).
    """
    started = time.monotonic()
    if not path.is_dir():
        raise EnvError(f"{path} is not a directory; pass the root of a local repository")
    if not test_command:
        raise EnvError('the test command is empty; pass e.g. --test-cmd "python -m pytest -q tests"')
    repo_name = name or safe_repo_name(path)
    prepare_out_dir(out, force)
    sandbox = sandbox or validation_sandbox()
    with tempfile.TemporaryDirectory(prefix="aios-rl-mine-") as scratch:
        root = Path(scratch) / repo_name
        snapshot_repo(path, root)
        repo = discover(root, repo_name, test_command)
        mined = mine([repo], config, sandbox, show_progress=show_progress)
        if repo_name in mined.broken:
            run = mined.broken[repo_name]
            how = "timed out" if run.timed_out else f"{run.passed} passed"
            raise EnvError(f"the tests of {path} do not pass as given (exit {run.returncode}, {how}); tasks "
                           f"need a passing suite to mutate; check --test-cmd. Output ends:\n{run.tail}")
        splits: dict[str, Split] = {k.task_id: split for k in mined.kept}
        write_tasks(out, mined.kept, splits, config)
    return _summarize(out, config, mined, splits, [], started)

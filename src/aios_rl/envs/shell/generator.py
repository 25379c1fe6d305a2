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

The stages live in their own modules: the config in :mod:`.generator_config`, what the tests cover and
the candidates' order in :mod:`.mutant_candidates`, the validation rounds in :mod:`.mining`, and splits,
manifests and the output directory in :mod:`.task_set`; this module holds the two entry points.

Example:
    >>> summary = generate_benchmark(Path("tasks/shell"), GeneratorConfig(count=20, seed=0))
    >>> summary.train, summary.holdout, summary.holdout_repos
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from aios_rl.contracts.episode import Split
from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.generator_config import GeneratorConfig
from aios_rl.envs.shell.mining import KeptMutant as KeptMutant
from aios_rl.envs.shell.mining import MiningResult as MiningResult
from aios_rl.envs.shell.mining import mine
from aios_rl.envs.shell.mutant_candidates import NON_INVERTIBLE_EVERY as NON_INVERTIBLE_EVERY
from aios_rl.envs.shell.mutant_candidates import SourceRepo as SourceRepo
from aios_rl.envs.shell.mutant_candidates import candidate_queue as candidate_queue
from aios_rl.envs.shell.mutant_candidates import covered_functions as covered_functions
from aios_rl.envs.shell.mutant_candidates import discover
from aios_rl.envs.shell.mutant_candidates import referenced_names as referenced_names
from aios_rl.envs.shell.mutant_candidates import task_id_for as task_id_for
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.seed_repos import SEEDS_DIR, list_seed_repos
from aios_rl.envs.shell.task import IGNORED_IN_COPIES
from aios_rl.envs.shell.task_set import SUMMARY_FILE as SUMMARY_FILE
from aios_rl.envs.shell.task_set import (
    GenerationSummary,
    check_out_dir,
    holdout_splits,
    publish_task_set,
    staging_dir,
    summarize,
    write_tasks,
)
from aios_rl.envs.shell.task_set import build_manifest as build_manifest
from aios_rl.envs.shell.task_set import prepare_out_dir as prepare_out_dir
from aios_rl.envs.shell.task_set import task_prompt as task_prompt
from aios_rl.envs.shell.validation import PYTEST_COMMAND, validation_sandbox

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
    check_out_dir(out, force)  # cleared only once there are tasks to replace its task set with
    sandbox = sandbox or validation_sandbox()
    rng = random.Random(config.seed)
    holdout = rng.sample(names, config.holdout_repos)
    train = [n for n in names if n not in holdout]
    rng.shuffle(train)
    repos = [discover(SEEDS_DIR / n, n, PYTEST_COMMAND) for n in [*holdout, *train]]
    mined = mine(repos, config, sandbox, show_progress=show_progress)
    splits = holdout_splits(mined.kept, holdout, config.holdout_fraction, rng)
    with staging_dir(out) as staging:
        write_tasks(staging, mined.kept, splits, config)
        summary = summarize(staging, config, mined, splits, holdout, started)
        publish_task_set(staging, out, force)
    return summary.model_copy(update={"out": str(out)})


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


def _ignored_or_special(directory: str, names: list[str], leave_out: str | None = None) -> set[str]:
    """``copytree``'s ignore: the caches of :data:`IGNORED_IN_COPIES`, the directory ``leave_out`` (a real
    path), and named pipes, sockets and device files, which cannot be copied (``copytree`` would raise
    ``shutil.Error``) and hold no source."""
    special = {n for n in names if not os.path.islink(p := os.path.join(directory, n))
               and (not os.path.isdir(p) and not os.path.isfile(p) or os.path.realpath(p) == leave_out)}
    return set(IGNORED_IN_COPIES(directory, names)) | special


def snapshot_repo(path: Path, dest: Path, leave_out: Path | None = None) -> None:
    """Copies the working tree of ``path`` (uncommitted edits included) to ``dest`` without ``.git``;
    special files (named pipes, sockets, devices) and the directory ``leave_out`` (e.g. a task set being
    written inside the repository) are left out."""
    skipped = os.path.realpath(leave_out) if leave_out is not None else None
    files = _working_tree_files(path)
    if files is None:
        shutil.copytree(path, dest, ignore=lambda d, names: _ignored_or_special(d, names, skipped),
                        symlinks=True)
        return
    dest.mkdir(parents=True)
    for rel in files:
        if ".git" in PurePosixPath(rel).parts:
            continue
        src = path / rel
        if not src.is_file() and not src.is_symlink():
            continue  # deleted in the working tree but still in the index, or a submodule
        if skipped is not None and Path(os.path.realpath(src.parent)).is_relative_to(skipped):
            continue
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
        EnvError: ``path`` is not a directory, has no tests or sources, its tests do not pass as given
            (or pass without a pytest summary line), or ``out`` is not empty (without ``force``).
    """
    started = time.monotonic()
    if not path.is_dir():
        raise EnvError(f"{path} is not a directory; pass the root of a local repository")
    if not test_command:
        raise EnvError('the test command is empty; pass e.g. --test-cmd "python -m pytest -q tests"')
    repo_name = name or safe_repo_name(path)
    check_out_dir(out, force)  # cleared only once there are tasks to replace its task set with
    sandbox = sandbox or validation_sandbox()
    # staging_dir before the snapshot: a killed run's leftovers may lie in the repository
    with staging_dir(out) as staging, tempfile.TemporaryDirectory(prefix="aios-rl-mine-") as scratch:
        root = Path(scratch) / repo_name
        snapshot_repo(path, root, leave_out=out)  # an --out inside the repository holds no source
        repo = discover(root, repo_name, test_command)
        mined = mine([repo], config, sandbox, show_progress=show_progress)
        if repo_name in mined.broken:
            run = mined.broken[repo_name]
            if run.returncode == 0 and not run.timed_out:  # it passes, but not as a pytest run says so
                raise EnvError(f"the tests of {path} pass (exit 0) but report no passed test in a pytest "
                               "summary line ('N passed'); mutants are judged by pytest's per-test results, "
                               "so the test command must run pytest, e.g. --test-cmd "
                               f'"python -m pytest -q tests". Output ends:\n{run.tail}')
            how = "timed out" if run.timed_out else f"{run.passed} passed"
            raise EnvError(f"the tests of {path} do not pass as given (exit {run.returncode}, {how}); tasks "
                           f"need a passing suite to mutate; check --test-cmd. Output ends:\n{run.tail}")
        splits: dict[str, Split] = {k.task_id: split for k in mined.kept}
        write_tasks(staging, mined.kept, splits, config)
        summary = summarize(staging, config, mined, splits, [], started)
        publish_task_set(staging, out, force)
    return summary.model_copy(update={"out": str(out)})

"""The generated task set on disk: splits, prompts, manifests, the output directory, ``benchmark.json``."""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from aios_rl.contracts.episode import Record, Split
from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.generator_config import GeneratorConfig
from aios_rl.envs.shell.mining import KeptMutant, MiningResult
from aios_rl.envs.shell.mutate import difficulty_estimate, fix_candidates, unified_diff
from aios_rl.envs.shell.task import IGNORED_IN_COPIES, MANIFEST, REPO, ShellTaskManifest, write_task
from aios_rl.storage.files import write_text_atomic

SUMMARY_FILE = "benchmark.json"


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


def check_out_dir(out: Path, force: bool) -> list[Path]:
    """What :func:`prepare_out_dir` would clear, checked without touching anything (so a generation can
    fail early, before its mining, and still leave a previous task set in place).

    Raises:
        EnvError: ``out`` is not empty (without ``force``), or holds something other than tasks.
    """
    if out.exists() and not out.is_dir():
        raise EnvError(f"{out} exists and is not a directory; choose a new --out")
    # the staging directory inside a mount point (see staging_dir) is the generation's, not a task set
    entries = sorted(e for e in out.iterdir() if e.name != _STAGING_INSIDE) if out.is_dir() else []
    if entries and not force:
        raise EnvError(f"{out} is not empty; choose a new --out, or pass --force to replace its task set")
    for entry in entries:
        is_task = entry.is_dir() and (entry / MANIFEST).is_file()
        if not (is_task or entry.name == SUMMARY_FILE or entry.name.startswith(".tmp-")):
            raise EnvError(f"refusing to clear {out}: {entry.name} is not a task; choose a new --out")
    return entries


def prepare_out_dir(out: Path, force: bool) -> None:
    """Creates ``out``; a non-empty one is refused unless ``force``, which clears a previous task set.

    Raises:
        EnvError: ``out`` is not empty (without ``force``), or holds something other than tasks.
    """
    entries = check_out_dir(out, force)
    for entry in entries:
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    out.mkdir(parents=True, exist_ok=True)


_STAGING_INSIDE = ".tmp-generating"


def _beside(out: Path, role: str) -> Path:
    real = out.resolve()  # a symlinked --out: the set goes where the link points, the link stays
    return real.parent / f".{real.name}.tmp-{role}"


@contextmanager
def staging_dir(out: Path) -> Iterator[Path]:
    """The directory beside ``out`` where its task set is built before :func:`publish_task_set` renames it
    into place, so a generation killed while writing never leaves a partial set in ``out`` (where the
    loaders would take it for a whole one). What a killed generation left there is removed, and so is
    the directory itself when the generation raises inside the ``with`` (a kill cannot be caught: the
    next generation into ``out`` clears what it leaves).

    An ``out`` that is a mount point (a container's volume) can be neither renamed nor renamed onto, and
    beside an ``out`` whose parent the user cannot write nothing can be built: then its set is built in
    ``out/.tmp-generating`` (hidden from the loaders) and moved in entry by entry."""
    real = out.resolve()
    inside = real.is_dir() and (os.path.ismount(real) or not os.access(real.parent, os.W_OK | os.X_OK))
    staging = real / _STAGING_INSIDE if inside else _beside(out, "generating")
    for leftover in (staging, _beside(out, "replaced")):
        if leftover.exists():
            shutil.rmtree(leftover)
    try:
        yield staging
    except BaseException:  # Ctrl-C too; ignore_errors: a failed clean-up must not hide why it stopped
        shutil.rmtree(staging, ignore_errors=True)
        raise


def publish_task_set(staging: Path, out: Path, force: bool) -> None:
    """Replaces ``out``'s task set (a previous one only with ``force``) with the complete one in
    ``staging``: the previous set is renamed aside whole, then ``staging`` renamed onto ``out``, then the
    previous set removed; a kill at any point leaves ``out`` holding a whole set or none.

    Raises:
        EnvError: ``out`` is not empty (without ``force``), or holds something other than tasks; or the
            new set could not be renamed onto it (the previous one is put back first).
    """
    real = out.resolve()
    if staging.parent == real:  # built inside (staging_dir): replaced entry by entry, benchmark.json last
        for entry in check_out_dir(out, force):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        for entry in sorted(staging.iterdir(), key=lambda e: e.name == SUMMARY_FILE):
            os.replace(entry, real / entry.name)
        staging.rmdir()
        return
    replaced = _beside(out, "replaced")
    if check_out_dir(out, force):  # not entry by entry: a kill half-way would leave part of the old set
        os.replace(real, replaced)
    try:
        os.replace(staging, real)
    except OSError as exc:
        if replaced.exists():  # back in place: left beside ``out``, the next generation would remove it
            os.replace(replaced, real)
        raise EnvError(f"cannot move the new task set into {out} ({exc}); any previous task set is left in "
                       "place") from exc
    if replaced.exists():
        shutil.rmtree(replaced)


def write_tasks(
    out: Path, kept: Sequence[KeptMutant], splits: dict[str, Split], config: GeneratorConfig
) -> None:
    """Writes each task atomically: a copy of its repo with the mutant in place, plus the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    for k in sorted(kept, key=lambda k: k.task_id):
        manifest = build_manifest(k, splits[k.task_id], config)
        with tempfile.TemporaryDirectory(prefix="aios-rl-task-") as scratch:
            repo = Path(scratch) / REPO
            shutil.copytree(k.repo.root, repo, ignore=IGNORED_IN_COPIES, symlinks=True)
            (repo / k.mutation.file).write_text(k.mutant_text, encoding="utf-8")
            write_task(out, manifest, repo)


def summarize(out: Path, config: GeneratorConfig, mined: MiningResult, splits: dict[str, Split],
               holdout_repos: Sequence[str], started: float) -> GenerationSummary:
    """Writes ``benchmark.json`` for the task set in ``out`` and returns the summary, timing included."""
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
    write_text_atomic(out / SUMMARY_FILE, json.dumps(record, indent=2) + "\n")
    return summary.model_copy(update={"duration_s": round(time.monotonic() - started, 3)})

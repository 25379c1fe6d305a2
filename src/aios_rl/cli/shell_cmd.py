"""`aios-rl shell benchmark-generate|tasks-from-repo|import-tasks|check-tasks`: shell bug-fix task sets."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, cast

import typer

from aios_rl.contracts.config import load_config
from aios_rl.contracts.episode import Split
from aios_rl.contracts.errors import ConfigError
from aios_rl.envs.shell.generator import (
    GenerationSummary,
    GeneratorConfig,
    generate_benchmark,
    generate_from_repo,
)
from aios_rl.envs.shell.importer import import_tasks
from aios_rl.envs.shell.task import require_task_dirs
from aios_rl.envs.shell.validation import check_tasks as run_checks
from aios_rl.envs.shell.validation import validation_sandbox

app = typer.Typer(
    help="Shell bug-fix tasks: generate them from the seed repos, mine any repo, import and check task sets.",
    no_args_is_help=True,
)

JsonOption = typer.Option(False, "--json", help="Print one JSON object instead of text (no progress bar).")
WorkersOption = typer.Option(2, "--workers", min=1, help="Sandboxed test runs at a time.")
ForceOption = typer.Option(False, "--force", help="Replace the task set in a non-empty --out directory.")


def _config(**values: Any) -> GeneratorConfig:
    return load_config(GeneratorConfig, overrides=values)


def _print_generated(summary: GenerationSummary, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"generated": summary.generated, "train": summary.train,
                               "holdout": summary.holdout, "out": summary.out}))
        return
    held = f"; holdout repos: {', '.join(summary.holdout_repos)}" if summary.holdout_repos else ""
    typer.echo(f"generated {summary.generated} tasks in {summary.out} "
               f"(train {summary.train}, holdout {summary.holdout}{held}) in {summary.duration_s:.1f}s")
    typer.echo("operators: " + ", ".join(f"{op} {n}" for op, n in summary.per_operator.items()))
    if summary.generated < summary.requested:
        typer.echo(f"warning: only {summary.generated} of {summary.requested} requested: candidates ran out",
                   err=True)


@app.command("benchmark-generate")
def benchmark_generate(
    count: int = typer.Option(20, "--count", help="Number of tasks to generate."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same task ids and contents."),
    out: Path = typer.Option(Path("tasks/shell"), "--out", help="Directory for the tasks (new or empty)."),
    holdout_repos: int = typer.Option(2, "--holdout-repos", help="Seed repos whose tasks are all holdout."),
    holdout_fraction: float = typer.Option(
        0.2, "--holdout-fraction", help="Share of the other repos' tasks held out too."
    ),
    workers: int = WorkersOption,
    force: bool = ForceOption,
    as_json: bool = JsonOption,
) -> None:
    """Mutate the bundled seed repos into validated bug-fix tasks (DIR/<task_id>/ + DIR/benchmark.json).

    A mutant is kept only if the original tests pass and the mutant fails at least one test while still
    passing one. A non-empty --out is refused unless --force, which replaces the task set there.
    """
    config = _config(count=count, seed=seed, holdout_repos=holdout_repos, holdout_fraction=holdout_fraction,
                     workers=workers)
    summary = generate_benchmark(out, config, force=force, show_progress=not as_json)
    _print_generated(summary, as_json)


@app.command("tasks-from-repo")
def tasks_from_repo(
    path: Path = typer.Argument(..., help="Root of a local repository (its working tree is used, not .git)."),
    test_cmd: str = typer.Option(
        ..., "--test-cmd", help='Test command, run from the repo root, e.g. "python -m pytest -q tests".'
    ),
    out: Path = typer.Option(..., "--out", help="Directory to write tasks into (new or empty)."),
    count: int = typer.Option(10, "--count", help="Number of tasks to mine."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same tasks."),
    split: str = typer.Option("train", "--split", help="Split of every mined task: train or holdout."),
    timeout: float = typer.Option(60.0, "--timeout", help="Wall limit of one test run, s (task timeout_s)."),
    workers: int = WorkersOption,
    force: bool = ForceOption,
    as_json: bool = JsonOption,
) -> None:
    """Mine bug-fix tasks from any local repository by mutating functions its tests reference.

    Each task is an isolated copy of the working tree without .git history, with one mutant in it.
    """
    if split not in ("train", "holdout"):
        raise ConfigError(f"--split must be train or holdout, got {split!r}")
    try:
        argv = shlex.split(test_cmd)
    except ValueError as exc:
        raise ConfigError(f"--test-cmd {test_cmd!r} is not a valid shell command line ({exc}); "
                          "check its quotes") from None
    config = _config(count=count, seed=seed, timeout_s=timeout, workers=workers, holdout_repos=0)
    summary = generate_from_repo(path, argv, out, config, split=cast(Split, split),
                                 force=force, show_progress=not as_json)
    _print_generated(summary, as_json)


@app.command("import-tasks")
def import_tasks_cmd(
    src: Path = typer.Argument(..., help="Directory holding task directories (<id>/manifest.json + repo/)."),
    out: Path = typer.Option(..., "--out", help="Task set to import into (created if missing)."),
    workers: int = WorkersOption,
    as_json: bool = JsonOption,
) -> None:
    """Validate each task in SRC (fails as given, passes with its patch) and copy the valid ones to --out.

    Invalid tasks are reported and skipped; nothing is half-imported. Exit code 0 when every task was
    imported, 1 when any was rejected (the valid ones are imported all the same), 2 when SRC holds no
    task directories.
    """
    report = import_tasks(src, out, validation_sandbox(), workers=workers, show_progress=not as_json)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json")))
    else:
        for rejection in report.rejected:
            typer.echo(f"rejected {rejection.task_id}: {rejection.reason}")
        typer.echo(f"imported {len(report.imported)} task(s) into {out}, rejected {len(report.rejected)}")
    if report.rejected:
        raise typer.Exit(1)


@app.command("check-tasks")
def check_tasks_cmd(
    root: Path = typer.Argument(..., help="Directory holding task directories."),
    workers: int = WorkersOption,
    as_json: bool = JsonOption,
) -> None:
    """Run each task's test_command in the sandbox as given, and again with its reference_patch applied.

    A task is valid when it fails as given and passes with its patch (without a patch: when it fails as
    given). Exit code 0 when every task is valid, 1 when any is invalid, 2 when ROOT holds no task
    directories.
    """
    task_dirs = require_task_dirs(root)
    checks = run_checks(task_dirs, validation_sandbox(), workers=workers, show_progress=not as_json)
    invalid = [c for c in checks if not c.valid]
    if as_json:
        typer.echo(json.dumps({"checked": len(checks), "valid": len(checks) - len(invalid),
                               "invalid": [{"task_id": c.task_id, "reason": c.reason} for c in invalid]}))
    else:
        for c in checks:
            typer.echo(f"{c.task_id}: {c.verdict} ({c.reason})")
        typer.echo(f"checked {len(checks)}: {len(checks) - len(invalid)} valid, {len(invalid)} invalid")
    if invalid:
        raise typer.Exit(1)

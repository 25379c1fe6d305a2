"""`aios-rl bench rollouts`: rollout allocators side by side at equal rollout budgets; `bench
merge-rollouts` combines runs over different seeds."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from aios_rl.campaign.rollout_bench import BenchConfig, MethodSummary

app = typer.Typer(help="Benchmarks that train and compare methods side by side.", no_args_is_help=True)


@app.command("rollouts")
def rollouts(
    tasks: Path = typer.Option(..., "--tasks", help="Task directory with train and holdout tasks."),
    methods: str | None = typer.Option(
        None,
        "--methods",
        help="Comma-separated allocators (default: uniform-8,uniform-16,dapo-16,arpo-16,vip-16,rail).",
    ),
    budget: int | None = typer.Option(
        None, "--budget", help="Rollouts each method may spend per seed (default 512; at most 100000000)."
    ),
    seeds: int | None = typer.Option(None, "--seeds", help="Seeds per method (default 3; at most 1000)."),
    first_seed: int | None = typer.Option(
        None, "--first-seed", help="First seed (default 0): run seeds in several processes, then merge-rollouts."
    ),
    seed_list: str | None = typer.Option(
        None,
        "--seed-list",
        help="Exact seeds, comma-separated (e.g. 0,2,5), in place of --seeds and --first-seed.",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="New output directory (default runs/bench-rollouts-TIME)."
    ),
    tasks_per_round: int | None = typer.Option(
        None, "--tasks-per-round", help="Training tasks per round (default 8)."
    ),
    eval_points: int | None = typer.Option(
        None, "--eval-points", help="Holdout evaluations per run (default 4; at most 1000)."
    ),
    eval_tasks: int | None = typer.Option(
        None, "--eval-tasks", help="Holdout tasks evaluated (default: all)."
    ),
    eval_samples: int | None = typer.Option(
        None, "--eval-samples", help="Episodes per holdout task (1: greedy; at most 1024)."
    ),
    max_steps: int | None = typer.Option(
        None, "--max-steps", help="Environment steps per episode (default 12; at most 1000)."
    ),
    warm_start_epochs: int | None = typer.Option(
        None,
        "--warm-start-epochs",
        help="Distillation passes before RL (default: shell train's warm_start_epochs, 60; 0: none).",
    ),
    config: Path | None = typer.Option(
        None, "--config", help="YAML with BenchConfig fields; `train:` takes any `shell train` setting but "
        "those each method's run sets itself (seed, allocator, group_size, tasks_per_epoch, rollout_budget, "
        "epochs), which are refused."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object per method instead of the table."
    ),
) -> None:
    """Train the same student under each allocator from the same checkpoint and seeds; compare holdout success
    at equal cumulative rollout budgets. Writes OUT/results.json and OUT/rollouts.png."""
    from aios_rl.campaign.rollout_bench import run_bench
    from aios_rl.contracts.errors import ConfigError

    cfg = bench_config(
        config,
        methods=methods,
        budget=budget,
        seeds=seeds,
        first_seed=first_seed,
        seed_list=seed_list,
        tasks_per_round=tasks_per_round,
        eval_points=eval_points,
        eval_tasks=eval_tasks,
        eval_samples=eval_samples,
        max_steps=max_steps,
        warm_start_epochs=warm_start_epochs,
    )
    out = out or Path("runs") / f"bench-rollouts-{time.strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; choose a new directory")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} is not empty; choose a new directory")
    out.mkdir(parents=True, exist_ok=True)
    summaries = run_bench(tasks, out, cfg, log=lambda line: typer.echo(line, err=True))
    _report(summaries, cfg, out, as_json)


def bench_config(
    config: Path | None,
    *,
    methods: str | None = None,
    budget: int | None = None,
    seeds: int | None = None,
    first_seed: int | None = None,
    seed_list: str | None = None,
    tasks_per_round: int | None = None,
    eval_points: int | None = None,
    eval_tasks: int | None = None,
    eval_samples: int | None = None,
    max_steps: int | None = None,
    warm_start_epochs: int | None = None,
) -> BenchConfig:
    """The settings `bench rollouts` runs with: ``config`` (a YAML file) under the options given.

    Raises:
        ConfigError: a value the settings refuse (e.g. an unknown allocator name, a budget of 0).
    """
    from aios_rl.campaign.rollout_bench import BenchConfig
    from aios_rl.contracts.config import load_config

    overrides = {
        "methods": None if methods is None else [m.strip() for m in methods.split(",") if m.strip()],
        "budget": budget,
        "seeds": seeds,
        "first_seed": first_seed,
        "seed_list": None if seed_list is None else _seed_list(seed_list),
        "tasks_per_round": tasks_per_round,
        "eval_points": eval_points,
        "eval_tasks": eval_tasks,
        "eval_samples": eval_samples,
        "train.env.max_steps": max_steps,
        "train.warm_start_epochs": warm_start_epochs,
    }
    return load_config(BenchConfig, config, overrides)


@app.command("merge-rollouts")
def merge_rollouts(
    dirs: list[Path] = typer.Argument(
        ..., help="Output directories of `bench rollouts` runs (other seeds or other methods)."
    ),
    out: Path = typer.Option(..., "--out", help="Where the merged results.json and rollouts.png go."),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object per method instead of the table."
    ),
) -> None:
    """Merge `bench rollouts` runs of the same settings into one table, results.json and plot: runs over
    other seeds (one per process, each with its own --first-seed) or of other methods on the same seeds."""
    from aios_rl.campaign.rollout_bench import merge_results

    summaries, cfg = merge_results(dirs, out)
    _report(summaries, cfg, out, as_json)


def _seed_list(text: str) -> list[int]:
    from aios_rl.contracts.errors import ConfigError

    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        seeds = []
    if not seeds:  # malformed, or nothing but commas
        raise ConfigError(f"--seed-list takes comma-separated integers, got {text!r}")
    return seeds


def _report(summaries: list[MethodSummary], cfg: BenchConfig, out: Path, as_json: bool) -> None:
    from aios_rl.campaign.rollout_bench import format_table
    from aios_rl.report.plots import plot_rollout_curves

    png = plot_rollout_curves(
        summaries,
        out / "rollouts.png",
        title=f"holdout success vs rollouts ({cfg.seeds} seed(s), budget {cfg.budget})",
    )
    if as_json:
        keep = (
            "method",
            "success_mean",
            "success_std",
            "rollouts",
            "env_steps",
            "rollouts_to_match_uniform16",
            "zero_variance_share",
            "wall_s",
            "curve",
            "rail",
        )
        typer.echo(json.dumps([{k: s.as_json()[k] for k in keep} for s in summaries], indent=2))
        return
    for line in format_table(summaries, cfg):
        typer.echo(line)
    typer.echo(f"\nplot: {png}\nresults: {out / 'results.json'}")

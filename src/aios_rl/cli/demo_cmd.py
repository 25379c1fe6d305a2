"""`aios-rl demo`: runnable walk-throughs on the embedded defaults."""

from __future__ import annotations

from pathlib import Path

import typer

from aios_rl.contracts.errors import ConfigError


app = typer.Typer(help="Runnable demonstrations on the embedded defaults.", no_args_is_help=True)


@app.command("control")
def control(
    run: Path = typer.Option(Path("runs/demo-control"), "--run", help="New run directory to create."),
) -> None:
    """Promotion, rollback and freeze on real checkpoints of a tiny torch module (scripted comparisons)."""
    from aios_rl.campaign.demo_control import run_control_demo

    plane = run_control_demo(run, typer.echo)
    with plane:
        problems = plane.verify_pointers()
    typer.echo(f"pointers verify: {'yes' if not problems else problems}")
    typer.echo(f"inspect: aios-rl lineage show --run {run}")


@app.command("shell")
def shell(
    out: Path = typer.Option(..., "--out", help="New directory for the generated tasks and the run."),
    count: int = typer.Option(30, "--count", min=1, help="Tasks to generate."),
    epochs: int = typer.Option(3, "--epochs", min=1, help="Training epochs."),
    tasks_per_epoch: int = typer.Option(6, "--tasks-per-epoch", min=1, help="Training tasks per epoch."),
    seed: int = typer.Option(0, "--seed", help="Seed for generation and training."),
) -> None:
    """The main job: generate tasks, train the compact student, compare it with baselines on the holdout."""
    from aios_rl.campaign.demo_shell import run_shell_demo, table

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is not a directory; choose a new directory")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} is not empty; choose a new directory")
    rows = run_shell_demo(out, typer.echo, count=count, epochs=epochs, tasks_per_epoch=tasks_per_epoch, seed=seed)
    typer.echo("")
    for line in table(rows):
        typer.echo(line)
    typer.echo(f"\nrun directory: {out / 'run'}  (aios-rl lineage show --run {out / 'run'})")

"""`aios-rl demo`: runnable walk-throughs on the embedded defaults."""

from __future__ import annotations

from pathlib import Path

import typer

from aios_rl.campaign.demo_control import run_control_demo

app = typer.Typer(help="Runnable demonstrations on the embedded defaults.", no_args_is_help=True)


@app.command("control")
def control(
    run: Path = typer.Option(Path("runs/demo-control"), "--run", help="New run directory to create."),
) -> None:
    """Promotion, rollback and freeze on real checkpoints of a tiny torch module (scripted comparisons)."""
    plane = run_control_demo(run, typer.echo)
    with plane:
        problems = plane.verify_pointers()
    typer.echo(f"pointers verify: {'yes' if not problems else problems}")
    typer.echo(f"inspect: aios-rl lineage show --run {run}")

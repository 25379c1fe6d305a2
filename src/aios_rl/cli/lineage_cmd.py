"""`aios-rl lineage show|rollback|unfreeze`: inspect and steer a run's checkpoint lineage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from aios_rl.contracts.errors import StorageError

if TYPE_CHECKING:  # the control plane imports torch (checkpoints): not on the path of `aios-rl --help`
    from aios_rl.control.lineage import LineageState
    from aios_rl.control.plane import ControlPlane

app = typer.Typer(help="Inspect and steer the checkpoint lineage of a run.", no_args_is_help=True)

RunOption = typer.Option(..., "--run", help="Run directory (holds control.db and checkpoints/).")


def open_run(run: Path, *, writer: bool = True) -> ControlPlane:
    """Open an existing run directory (never creates one)."""
    if not (run / "control.db").is_file():
        raise StorageError(f"{run} is not a run directory (no control.db); start one with a train or demo command")
    from aios_rl.control.plane import ControlPlane

    return ControlPlane(run, writer=writer)


def lineage_json(state: LineageState) -> dict[str, object]:
    return {
        **state.pointers(),
        "frozen": state.frozen,
        "consecutive_rollbacks": state.consecutive_rollbacks,
        "checkpoints": [
            {
                "id": c.checkpoint_id,
                "parent": c.parent,
                "sha256": c.sha256,
                "verdict": c.verdict,
                "verdict_reason": c.verdict_reason,
                "created_at": c.created_at,
                "config_hash": c.config_hash,
                "teacher_backend": c.teacher_backend,
                "env_versions": c.env_versions,
                "data_window": c.data_window,
            }
            for c in state.checkpoints.values()
        ],
    }


def lineage_tree(state: LineageState) -> list[str]:
    """Text lines: each checkpoint under its parent, marked with the pointers that name it."""
    children: dict[str | None, list[str]] = {}
    for c in state.checkpoints.values():
        children.setdefault(c.parent, []).append(c.checkpoint_id)
    marks = {}
    for name, cid in state.pointers().items():
        if cid is not None:
            marks.setdefault(cid, []).append(name)
    lines = [f"frozen: {'yes' if state.frozen else 'no'}  (consecutive rollbacks: {state.consecutive_rollbacks})"]

    # Depth first with an explicit stack: a long run's chain of updates is deeper than the recursion limit.
    stack = [(root, 0) for root in reversed(children.get(None, []))]
    while stack:
        cid, depth = stack.pop()
        record = state.checkpoints[cid]
        tags = f"  <- {', '.join(marks[cid])}" if cid in marks else ""
        verdict = f" [{record.verdict}]" if record.verdict else ""
        lines.append(f"{'  ' * depth}{cid} {record.sha256[:12]}{verdict}{tags}")
        stack.extend((child, depth + 1) for child in reversed(children.get(cid, [])))
    return lines


@app.command("show")
def show(run: Path = RunOption, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show the three pointers and every checkpoint with its parent and verdict."""
    with open_run(run, writer=False) as plane:
        state = plane.state.lineage
    if as_json:
        typer.echo(json.dumps(lineage_json(state), indent=2))
    else:
        for line in lineage_tree(state):
            typer.echo(line)


@app.command("rollback")
def rollback(
    run: Path = RunOption, reason: str = typer.Option(..., "--reason", help="Why (stored on the checkpoint).")
) -> None:
    """Roll back now: active <- pre_update_ref (else last_stable)."""
    with open_run(run) as plane:
        before = plane.state.lineage.active
        after = plane.rollback(reason).lineage
    typer.echo(f"rolled back: active {before} -> {after.active}" + ("  (lineage is now FROZEN)" if after.frozen else ""))


@app.command("unfreeze")
def unfreeze(run: Path = RunOption) -> None:
    """Allow updates again after the lineage froze on repeated rollbacks."""
    with open_run(run) as plane:
        plane.unfreeze()
    typer.echo("lineage unfrozen: updates allowed again")

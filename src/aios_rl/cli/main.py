"""The `aios-rl` entry point: one typer app, one module per command group."""

from __future__ import annotations

import inspect
import logging
import sys

import typer

from aios_rl.cli import (
    bench_cmd,
    campaign_cmd,
    contracts_cmd,
    demo_cmd,
    lineage_cmd,
    shell_cmd,
    status_cmd,
    teacher_cmd,
    train_cmd,
)
from aios_rl.contracts.errors import AiosRlError

app = typer.Typer(
    name="aios-rl",
    help="Train one agent policy with RL across sandboxed environments under one safe control plane.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("schema")(contracts_cmd.schema)
app.command("validate")(contracts_cmd.validate)
app.command("status")(status_cmd.status)
app.add_typer(lineage_cmd.app, name="lineage")
app.add_typer(demo_cmd.app, name="demo")
shell_cmd.app.command("train")(train_cmd.train)
shell_cmd.app.command("eval")(train_cmd.evaluate)
shell_cmd.app.command("redistill")(train_cmd.redistill)
shell_cmd.app.command("campaign")(campaign_cmd.campaign)
app.add_typer(shell_cmd.app, name="shell")
app.add_typer(teacher_cmd.app, name="teacher")
app.add_typer(bench_cmd.app, name="bench")


def _unwrap_help(group: typer.Typer) -> None:
    """Use each command's docstring as its help with the line breaks inside paragraphs joined.

    Typer's rich help joins the first paragraph but prints the others verbatim, so a docstring wrapped at
    the source line length broke mid-sentence on screen; joined, the terminal wraps each paragraph.
    """
    for info in group.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            paragraphs = inspect.cleandoc(info.callback.__doc__).split("\n\n")
            info.help = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _unwrap_help(sub.typer_instance)


_unwrap_help(app)


def main() -> None:
    """Run the CLI; framework errors become one clear message and exit code 2."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app()
    except AiosRlError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)

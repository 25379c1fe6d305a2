"""`--help` prints every paragraph of a command's docstring as one paragraph, wrapped by the terminal."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from aios_rl.cli.main import app

Command = tuple[tuple[str, ...], Callable[..., Any]]  # (argv to reach it, its function)


def commands(group: typer.Typer, prefix: tuple[str, ...] = ()) -> Iterator[Command]:
    for info in group.registered_commands:
        assert info.name is not None and info.callback is not None
        yield (*prefix, info.name), info.callback
    for sub in group.registered_groups:
        assert sub.name is not None and sub.typer_instance is not None
        yield from commands(sub.typer_instance, (*prefix, sub.name))


# Only commands whose docstring has a paragraph wrapped over several source lines: those broke on screen.
WRAPPED = [
    pytest.param(argv, callback, id=" ".join(argv))
    for argv, callback in commands(app)
    if any("\n" in p for p in inspect.cleandoc(callback.__doc__ or "").split("\n\n")[1:])
]


def test_the_eval_command_is_among_the_checked() -> None:
    assert ("shell", "eval") in [p.values[0] for p in WRAPPED]


@pytest.mark.parametrize(("argv", "callback"), WRAPPED)
def test_help_joins_lines_inside_a_paragraph(argv: tuple[str, ...], callback: Callable[..., Any]) -> None:
    result = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    shown = [line.strip() for line in result.output.splitlines()]
    for paragraph in inspect.cleandoc(callback.__doc__ or "").split("\n\n"):
        assert " ".join(paragraph.split()) in shown


@pytest.mark.parametrize("module", ["aios_rl", "aios_rl.cli"])
def test_python_dash_m_runs_the_cli(module: str) -> None:
    command = [sys.executable, "-m", module, "--help"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "shell" in result.stdout and "Usage" in result.stdout

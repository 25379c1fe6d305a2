"""`aios-rl schema` and `aios-rl validate`: the contracts as JSON Schema, and checking files against them."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer
from pydantic import BaseModel

from aios_rl.contracts.episode import Comparison, Episode, Task, TeacherSignal
from aios_rl.contracts.errors import ContractError
from aios_rl.contracts.validate import parse_json_record
from aios_rl.envs.shell.task import ShellTaskManifest


class RecordName(str, Enum):
    episode = "episode"
    task = "task"
    task_record = "task-record"
    teacher_signal = "teacher-signal"
    comparison = "comparison"


RECORDS: dict[RecordName, type[BaseModel]] = {
    RecordName.episode: Episode,
    RecordName.task: ShellTaskManifest,
    RecordName.task_record: Task,
    RecordName.teacher_signal: TeacherSignal,
    RecordName.comparison: Comparison,
}


def schema(name: RecordName = typer.Argument(..., help="Which contract to print.")) -> None:
    """Print the JSON Schema of a contract record.

    `task` is the on-disk task manifest (`TASK_DIR/manifest.json` next to `TASK_DIR/repo/`);
    `task-record` is the environment-neutral Task the environments are reset with.
    """
    typer.echo(json.dumps(RECORDS[name].model_json_schema(), indent=2))


def validate(
    name: RecordName = typer.Argument(..., help="Which contract the file must satisfy."),
    file: Path = typer.Argument(..., help="JSON file to check."),
) -> None:
    """Check a JSON file against a contract: exit 0 when valid, 2 with one line per problem otherwise."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        typer.echo(f"{file}: cannot read: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    except UnicodeDecodeError as exc:
        typer.echo(f"{file}: cannot read: not UTF-8 text ({exc.reason} at byte {exc.start}); JSON is UTF-8",
                   err=True)
        raise typer.Exit(2) from None
    try:
        parse_json_record(RECORDS[name], text, source=str(file))
    except ContractError as exc:
        for problem in exc.problems:
            typer.echo(problem, err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{file}: valid {RECORDS[name].__name__}")

"""`aios-rl teacher calibrate`: score an LLM teacher backend against the oracle on a gold set.

The gold set is a JSONL file, one record per line::

    {"task": <Task>, "episode": <Episode>, "oracle_signal": <TeacherSignal, optional>}

``oracle_signal`` is the reference judgement recorded for that episode; when it is missing and the task is a
``shell`` task, the shell oracle computes it from the task's reference patch (the task directory named in
``task.spec["task_dir"]`` must exist). ``--tasks`` may also name a directory holding ``gold.jsonl``, or a
task directory: then the gold set is rolled out first (per task, one episode following the reference fix
and one uniform-random episode) and saved as ``gold.jsonl`` beside the report for reuse.

The report is written as JSON to ``--out``, ``RUN/teacher_calibration.json`` or, by default,
``runs/teacher-calibration/<backend>.json``; the exit code is 0 when the
teacher passes the thresholds and 1 when it does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from aios_rl.contracts.config import load_config
from aios_rl.contracts.episode import Episode, Record, Task, TeacherSignal
from aios_rl.contracts.errors import ConfigError, ContractError
from aios_rl.contracts.validate import parse_json_record
from aios_rl.envs.shell.oracle import ShellOracle
from aios_rl.teacher.calibrate import CalibrationReport, CalibrationThresholds, calibrate
from aios_rl.teacher.gateway import TeacherConfig, TeacherGateway

app = typer.Typer(help="LLM teachers: calibrate a backend against the oracle before trusting its shaping.",
                  no_args_is_help=True)

GOLD_FILE = "gold.jsonl"
REPORT_FILE = "teacher_calibration.json"
DEFAULT_DIR = Path("runs") / "teacher-calibration"  # where reports go without --out or --run


class GoldRecord(Record):
    """One line of a gold set."""

    task: Task
    episode: Episode
    oracle_signal: TeacherSignal | None = None


def read_gold(path: Path) -> list[GoldRecord]:
    """Read a gold set (a JSONL file, or a directory holding ``gold.jsonl``).

    Raises:
        ConfigError: the path does not exist or a directory has no ``gold.jsonl``.
        ContractError: a line is not JSON or not a valid record (the message names the line).
    """
    if path.is_dir():
        if not (path / GOLD_FILE).is_file():
            raise ConfigError(
                f"{path} is a directory without {GOLD_FILE} and without task directories; pass a JSONL gold "
                "set of {task, episode, oracle_signal} records or a task directory"
            )
        path = path / GOLD_FILE
    if not path.is_file():
        raise ConfigError(f"gold set {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problem = f"<json>: got {exc.reason} at byte {exc.start}; expected UTF-8 text"
        raise ContractError(f"{path} is not UTF-8", [problem]) from None
    records = [
        parse_json_record(GoldRecord, line, source=f"{path}:{number}")
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not records:
        raise ConfigError(f"gold set {path} holds no records")
    return records


class RecordedOracle:
    """The oracle of a gold set: recorded signals by episode id, else the shell oracle for shell tasks."""

    backend = "oracle"

    def __init__(self, records: list[GoldRecord]) -> None:
        self._recorded = {
            r.episode.episode_id: r.oracle_signal for r in records if r.oracle_signal is not None
        }
        self._shell = ShellOracle()

    def signal(self, task: Task, episode: Episode) -> TeacherSignal:
        recorded = self._recorded.get(episode.episode_id)
        if recorded is not None:
            return recorded
        if task.environment == "shell":
            return self._shell.signal(task, episode)
        return TeacherSignal(status="failed_all_backends", backend="oracle",
                             error=f"no recorded oracle signal for episode {episode.episode_id}")


def _summary(report: CalibrationReport) -> list[str]:
    def show(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = [
        f"teacher {report.backend}: {report.n} gold episodes, {report.n_valid} valid answers, "
        f"{report.n_scored} scored",
        f"agreement {show(report.agreement)}  pearson {show(report.pearson)} (n={report.n_correlated})  "
        f"boundary rate {show(report.boundary_rate)}",
        "statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(report.teacher_statuses.items())),
        "PASSED" if report.passed else "FAILED: " + "; ".join(report.reasons),
    ]
    return lines


@app.command("calibrate")
def calibrate_cmd(
    backend: str = typer.Option(
        ..., "--backend", help="Teacher backend: claude, codex, gemini, opencode, openai, oracle."
    ),
    tasks: Path = typer.Option(
        ..., "--tasks", help=f"Gold set: a JSONL file, a directory holding {GOLD_FILE}, or a task directory."
    ),
    fallback: list[str] = typer.Option([], "--fallback", help="Fallback backend, in order (repeatable)."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per backend call."),
    config: Path | None = typer.Option(None, "--config", help="YAML file with any TeacherConfig fields."),
    out: Path | None = typer.Option(None, "--out", help="Where to write the JSON report."),
    run: Path | None = typer.Option(
        None, "--run", help=f"Run directory; the report goes to RUN/{REPORT_FILE}."
    ),
    min_agreement: float = typer.Option(0.7, "--min-agreement", help="Smallest sign agreement to pass."),
    min_correlation: float = typer.Option(
        0.3, "--min-correlation", help="Smallest correlation with the oracle."
    ),
    gold_limit: int | None = typer.Option(None, "--gold-limit", help="Task directory: use at most this many tasks."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Ask the teacher about every gold episode and compare it with the outcomes and the oracle."""
    target = out if out is not None else (run / REPORT_FILE if run is not None else DEFAULT_DIR / f"{backend}.json")
    if target.is_dir():  # found now, not after every teacher call has been paid for
        example = target / f"{backend}.json"
        raise ConfigError(f"report path {target} is a directory; name the report file, e.g. --out {example}")
    overrides: dict[str, Any] = {
        "backend": backend, "fallbacks": tuple(fallback) or None, "timeout_s": timeout
    }
    teacher_config = load_config(TeacherConfig, config, overrides)
    thresholds = load_config(CalibrationThresholds, None,
                             {"min_agreement": min_agreement, "min_correlation": min_correlation})
    if tasks.is_dir() and not (tasks / GOLD_FILE).is_file() and any(tasks.glob("*/manifest.json")):
        from aios_rl.campaign.gold import gold_from_tasks

        records = [GoldRecord(task=t, episode=e) for t, e in gold_from_tasks(tasks, limit=gold_limit)]
        target.parent.mkdir(parents=True, exist_ok=True)
        gold_path = target.with_name(GOLD_FILE)
        gold_path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    else:
        records = read_gold(tasks)
    oracle = RecordedOracle(records)
    gateway = TeacherGateway(teacher_config, oracle=oracle)
    try:
        report = calibrate(gateway, oracle, [(r.task, r.episode) for r in records], thresholds)
        metrics = gateway.metrics()
    finally:
        gateway.close()
    document = report.model_dump(mode="json") | {"gold": str(tasks), "teacher_metrics": metrics}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    if as_json:
        typer.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        for line in _summary(report):
            typer.echo(line)
        typer.echo(f"report: {target}")
    raise typer.Exit(0 if report.passed else 1)

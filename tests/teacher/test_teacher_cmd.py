"""`aios-rl teacher calibrate` on a JSONL gold set, with a real HTTP teacher on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from teacher_fakes import FakeServer, make_episode, make_task, openai_server
from typer.testing import CliRunner, Result

from aios_rl.cli.teacher_cmd import app
from aios_rl.contracts.episode import Task, TeacherSignal
from aios_rl.contracts.errors import ConfigError, ContractError

runner = CliRunner()
# Mounted the way cli/main.py mounts command groups (`aios-rl teacher calibrate ...`).
cli = typer.Typer()
cli.add_typer(app, name="teacher")


def invoke(*args: str) -> Result:
    return runner.invoke(cli, ["teacher", *args])


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with openai_server() as state:
        yield state


def write_gold(path: Path, *, recorded: bool = True, task: Task | None = None) -> Path:
    task = task or make_task()
    lines = []
    for i, outcome in enumerate(["success", "failure"] * 3):
        episode = make_episode(task, outcome=outcome, episode_id=f"gold-{i}")
        record: dict[str, object] = {
            "task": task.model_dump(mode="json"), "episode": episode.model_dump(mode="json")
        }
        if recorded:
            shaping = 0.9 - 0.1 * i if outcome == "success" else -0.4 - 0.1 * i
            record["oracle_signal"] = TeacherSignal(status="complete", backend="oracle", shaping=shaping,
                                                    confidence=1.0).model_dump(mode="json")
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def config_for(tmp_path: Path, server: FakeServer) -> Path:
    path = tmp_path / "teacher.yaml"
    path.write_text(f"openai:\n  base_url: {server.url}\n  model: judge\nretries: 0\n")
    return path


def faithful(prompt: str) -> str:
    shaping = 0.7 if "outcome: success" in prompt else -0.6
    return f'Verdict:\n```json\n{{"critique": "c", "shaping": {shaping}, "confidence": 0.8}}\n```'


def test_wrong_teacher_fails_calibration_and_writes_the_report(tmp_path: Path, server: FakeServer) -> None:
    server.reply = '{"critique": "always harsh", "shaping": -0.5, "confidence": 0.9, "boundary": false}'
    gold, out = write_gold(tmp_path / "gold.jsonl"), tmp_path / "reports" / "cal.json"
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(gold), "--out", str(out),
                                 "--config", str(config_for(tmp_path, server)))
    assert result.exit_code == 1, result.output
    assert "FAILED" in result.output and "agreement 0.50" in result.output
    report = json.loads(out.read_text())
    assert report["agreement"] == 0.5 and report["passed"] is False and report["n"] == 6
    assert report["pearson"] is None  # a constant teacher cannot be shown to track the oracle
    metrics = report["teacher_metrics"]
    # Episodes with equal prompts share a cache entry (unless asked concurrently): every one is answered once.
    assert metrics["teacher/calls"] + metrics["teacher/cache_hits"] == 6
    assert metrics["teacher/calls"] == len(server.requests) >= 2


def test_faithful_teacher_passes_and_stores_in_the_run_dir(tmp_path: Path, server: FakeServer) -> None:
    server.judge = faithful
    gold, run = write_gold(tmp_path / "gold.jsonl"), tmp_path / "run"
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(gold), "--run", str(run),
                                 "--config", str(config_for(tmp_path, server)), "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    stored = json.loads((run / "teacher_calibration.json").read_text())
    assert printed == stored
    assert stored["agreement"] == 1.0 and stored["pearson"] > 0.9 and stored["passed"] is True


def test_gold_dir_and_shell_oracle_for_missing_signals(tmp_path: Path, server: FakeServer) -> None:
    server.judge = faithful
    task = make_task().model_copy(update={"oracle": {}})  # no reference patch: the oracle reads the evidence
    write_gold(tmp_path / "gold.jsonl", recorded=False, task=task)
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(tmp_path), "--out",
                                 str(tmp_path / "r.json"), "--config", str(config_for(tmp_path, server)))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["oracle_failures"] == 0 and report["n_correlated"] == 6


def test_bad_inputs_are_clear_errors(tmp_path: Path) -> None:
    empty_dir = tmp_path / "tasks"
    empty_dir.mkdir()
    out = ["--out", str(tmp_path / "r.json")]
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(empty_dir), *out)
    assert isinstance(result.exception, ConfigError) and "gold.jsonl" in str(result.exception)
    bad = tmp_path / "bad.jsonl"
    write_gold(bad)
    bad.write_text(bad.read_text() + "{not json\n")
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(bad), *out)
    assert isinstance(result.exception, ContractError) and "bad.jsonl:7" in str(result.exception)
    result = invoke("calibrate", "--backend", "claud", "--tasks", str(bad), *out)
    assert isinstance(result.exception, ConfigError) and "did you mean 'claude'" in str(result.exception)



def test_report_goes_to_runs_by_default(tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.judge = faithful
    gold = write_gold(tmp_path / "gold.jsonl")
    config = config_for(tmp_path, server)
    monkeypatch.chdir(tmp_path)
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(gold), "--config", str(config))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "runs" / "teacher-calibration" / "openai.json").read_text())
    assert report["passed"] is True and report["n"] == 6


@pytest.mark.slow
def test_task_directory_rolls_out_a_gold_set_first(tmp_path: Path, server: FakeServer) -> None:
    from aios_rl.envs.shell.generator import GeneratorConfig, generate_benchmark

    server.judge = faithful
    tasks = tmp_path / "tasks"
    generate_benchmark(tasks, GeneratorConfig(count=3, seed=5))
    out = tmp_path / "cal" / "report.json"
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(tasks), "--gold-limit", "2",
                    "--out", str(out), "--config", str(config_for(tmp_path, server)))
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    assert report["n"] == 4  # two tasks x (reference-following episode, random episode)
    gold = [json.loads(line) for line in (out.parent / "gold.jsonl").read_text().splitlines()]
    assert [g["episode"]["policy_version"] for g in gold] == ["gold-reference", "gold-random"] * 2
    assert report["agreement"] == 1.0  # the faithful judge reads the verification outcome correctly


def test_gold_sets_the_json_decoder_refuses_are_contract_errors(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "r.json")]
    huge = write_gold(tmp_path / "huge.jsonl")
    huge.write_text(huge.read_text() + '{"task": ' + "9" * 5000 + "}\n")
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(huge), *out)
    assert isinstance(result.exception, ContractError) and "huge.jsonl:7" in str(result.exception)
    latin = write_gold(tmp_path / "latin.jsonl")
    latin.write_bytes(latin.read_bytes() + b'{"task": "caf\xe9"}\n')
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(latin), *out)
    assert isinstance(result.exception, ContractError) and "latin.jsonl" in str(result.exception)
    assert "UTF-8" in str(result.exception)


def test_out_naming_a_directory_is_refused_before_any_teacher_call(
    tmp_path: Path, server: FakeServer
) -> None:
    server.judge = faithful
    gold, reports = write_gold(tmp_path / "gold.jsonl"), tmp_path / "reports"
    reports.mkdir()
    result = invoke("calibrate", "--backend", "openai", "--tasks", str(gold), "--out", str(reports),
                    "--config", str(config_for(tmp_path, server)))
    assert isinstance(result.exception, ConfigError) and "is a directory" in str(result.exception)
    assert server.requests == []  # refused before paying for any answer

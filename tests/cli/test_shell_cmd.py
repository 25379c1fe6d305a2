"""`aios-rl shell ...` commands: bad flags are ConfigErrors (one clear message), never tracebacks."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from aios_rl.cli.main import app
from aios_rl.contracts.errors import ConfigError


def test_tasks_from_repo_with_an_unbalanced_quote_in_the_test_command(tmp_path: Path) -> None:
    args = ["shell", "tasks-from-repo", str(tmp_path), "--test-cmd", 'python -m pytest "tests',
            "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert "--test-cmd" in str(result.exception)
    assert not (tmp_path / "out").exists()

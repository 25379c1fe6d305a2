"""`aios-rl demo shell`: bad flags are refused up front with a clear error, before anything is generated."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aios_rl.cli.main import app
from aios_rl.contracts.errors import ConfigError


def test_an_out_path_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    out = tmp_path / "file"
    out.write_text("not a directory")
    result = CliRunner().invoke(app, ["demo", "shell", "--out", str(out)])
    assert isinstance(result.exception, ConfigError), result.output
    assert "not a directory" in str(result.exception)


@pytest.mark.parametrize("flag", ["--count", "--epochs", "--tasks-per-epoch"])
def test_a_count_below_one_is_a_usage_error_before_any_work(tmp_path: Path, flag: str) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "shell", "--out", str(out), flag, "0"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert flag in result.output
    assert not out.exists()  # refused before generating tasks

"""`aios-rl bench rollouts`: its --out directory is checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aios_rl.cli.main import app
from aios_rl.contracts.errors import ConfigError


@pytest.mark.parametrize("kind", ["file", "non-empty directory"])
def test_out_that_is_not_a_new_directory_is_a_config_error(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("not a directory\n")
    else:
        out.mkdir()
        (out / "results.json").write_text("{}\n")
    args = ["bench", "rollouts", "--tasks", str(tmp_path / "tasks"), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.exception
    assert "--out" in str(result.exception)
    assert out.exists() and (out.is_file() or [p.name for p in out.iterdir()] == ["results.json"])

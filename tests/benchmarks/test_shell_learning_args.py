"""The learning benchmark refuses bad settings before it generates or trains anything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Settings the parser refuses, and choices checked once parsed: both before OUT exists or a task is made.
BAD = ["--setting=bogus=1", "--setting=consolidation_passes=-1", "--setting=epochs", "--trainer=lr=0",
       "--configs=bogus", "--label-fraction=0", "--val-fraction=1", "--configs=distill+gate"]


@pytest.mark.parametrize("flag", BAD)
def test_a_bad_setting_stops_before_any_work(
    load_benchmark, tmp_path: Path, monkeypatch, capsys, flag: str
) -> None:
    bench = load_benchmark("shell_learning")
    out = tmp_path / "out"

    def generate(*args, **kwargs):
        raise AssertionError("generated 120 tasks before checking the flags")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    monkeypatch.setattr(sys, "argv", ["shell_learning.py", "--out", str(out), flag])
    with pytest.raises(SystemExit) as exited:
        bench.main()
    assert exited.value.code == 2
    assert flag.split("=")[0] in capsys.readouterr().err
    assert not out.exists()

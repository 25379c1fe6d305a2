"""The learning benchmark refuses bad settings before it generates or trains anything."""

from __future__ import annotations

from pathlib import Path

import pytest

# Settings the parser refuses, and choices checked once parsed: both before OUT exists or a task is made.
BAD = ["--setting=bogus=1", "--setting=consolidation_passes=-1", "--setting=epochs", "--trainer=lr=0",
       "--configs=bogus", "--label-fraction=0", "--val-fraction=1", "--configs=distill+gate"]


@pytest.mark.parametrize("flag", BAD)
def test_a_bad_setting_stops_before_any_work(
    load_benchmark, tmp_path: Path, monkeypatch, usage_error, flag: str
) -> None:
    bench = load_benchmark("shell_learning")
    out = tmp_path / "out"

    def generate(*args, **kwargs):
        raise AssertionError("generated 120 tasks before checking the flags")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    err = usage_error(bench, ["shell_learning.py", "--out", str(out), flag])
    assert flag.split("=")[0] in err
    assert not out.exists()

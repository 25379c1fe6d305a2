"""The learning benchmark refuses bad settings before it generates or trains anything."""

from __future__ import annotations

from pathlib import Path

import pytest

# Settings the parser refuses, and choices checked once parsed: both before OUT exists or a task is made.
BAD = ["--setting=bogus=1", "--setting=consolidation_passes=-1", "--setting=epochs", "--trainer=lr=0",
       "--configs=bogus", "--label-fraction=0", "--val-fraction=1", "--configs=distill+gate", "--count=0",
       "--epochs=0", "--tasks-per-epoch=0", "--group-size=0"]


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


def test_a_missing_task_set_is_a_usage_error_not_a_generation(
    load_benchmark, tmp_path: Path, monkeypatch, usage_error
) -> None:
    """``--tasks`` names an existing task set: a typo must not cost minutes generating 120 tasks into it."""
    bench = load_benchmark("shell_learning")
    out, missing = tmp_path / "out", tmp_path / "taks"

    def generate(*args, **kwargs):
        raise AssertionError("generated tasks into a --tasks path that did not exist")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    err = usage_error(bench, ["shell_learning.py", "--out", str(out), "--tasks", str(missing)])
    assert "--tasks" in err and str(missing) in err and "benchmark-generate" in err
    assert not out.exists() and not missing.exists()


def test_the_header_names_the_task_set_used_not_the_count_flag(
    load_benchmark, tmp_path: Path, monkeypatch, capsys
) -> None:
    bench = load_benchmark("shell_learning")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    monkeypatch.setattr(bench.sys, "argv", ["shell_learning.py", "--seeds", "0", "--no-baselines",
                                            "--out", str(tmp_path / "out"), "--tasks", str(tasks)])
    bench.main()
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shell learning"))
    assert "generated" not in header and f"0 tasks from {tasks}" in header


class Generated(Exception):
    """Raised by the stand-in generator: the benchmark chose to generate, with these arguments."""


@pytest.mark.parametrize("complete", [False, True])
def test_a_default_task_set_a_killed_generation_left_is_generated_again(
    load_benchmark, tmp_path: Path, monkeypatch, capsys, complete: bool
) -> None:
    # Generation writes benchmark.json last; OUT/tasks without it is what a kill mid-generation left, and was
    # used as the whole task set because only its existence was checked.
    bench = load_benchmark("shell_learning")
    out = tmp_path / "out"
    (out / "tasks" / "calc-1").mkdir(parents=True)
    (out / "tasks" / "calc-1" / "manifest.json").write_text("{}")
    (out / "tasks-labels-0.5").mkdir()  # derived from the partial set by that earlier run
    if complete:
        (out / "tasks" / "benchmark.json").write_text("{}")

    def generate(tasks_dir, config, *args, **kwargs):
        raise Generated(tasks_dir, kwargs.get("force"))

    def used(tasks_dir):
        raise AssertionError(f"used the task set in {tasks_dir}")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    monkeypatch.setattr(bench, "iter_task_dirs", used)
    monkeypatch.setattr(bench.sys, "argv", ["shell_learning.py", "--seeds", "0", "--out", str(out)])
    with pytest.raises(AssertionError if complete else Generated) as raised:
        bench.main()
    if complete:
        assert str(out / "tasks") in str(raised.value)  # a complete set is used as it is
        return
    assert raised.value.args == (out / "tasks", True)
    assert "incomplete" in capsys.readouterr().out
    assert not (out / "tasks-labels-0.5").exists()  # a copy of the partial set is not reused either


@pytest.mark.parametrize("layout", ["not a task set", "no train tasks"])
def test_a_task_set_the_framework_refuses_is_an_error_message_not_a_traceback(
    load_benchmark, tmp_path: Path, usage_error, layout: str
) -> None:
    # --tasks naming a directory that is not a task set (a ContractError) or one without train tasks (a
    # ConfigError from the first training run) ended in a traceback; the other benchmarks say why, as the CLI.
    bench = load_benchmark("shell_learning")
    tasks = tmp_path / "tasks"
    if layout == "not a task set":
        (tasks / "seed-0").mkdir(parents=True)  # e.g. a `bench rollouts` output
        says = "no manifest.json"
    else:
        tasks.mkdir()
        says = "holds no train-split tasks"
    err = usage_error(bench, ["shell_learning.py", "--seeds", "1", "--configs", "distill", "--no-baselines",
                              "--out", str(tmp_path / "out"), "--tasks", str(tasks)])
    assert says in err and "Traceback" not in err

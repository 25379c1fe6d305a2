"""The rollout benchmark wraps `aios-rl bench rollouts`: the command's failure is its exit, no traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


def test_a_bad_bench_option_exits_with_the_commands_status(
    load_benchmark, tmp_path: Path, monkeypatch, capfd
) -> None:
    bench = load_benchmark("rollouts")
    tasks = tmp_path / "tasks"
    tasks.mkdir()  # exists: nothing is generated
    argv = ["rollouts.py", "--tasks", str(tasks), "--out", str(tmp_path / "out"), "--budget", "abc"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exited:
        bench.main()
    assert exited.value.code == 2  # argparse's usage error in the wrapped command, which printed why
    assert "--budget" in capfd.readouterr().err


def test_a_bad_count_is_a_usage_error_not_a_traceback(
    load_benchmark, tmp_path: Path, monkeypatch, usage_error
) -> None:
    bench = load_benchmark("rollouts")

    def generate(*args, **kwargs):
        raise AssertionError("generated tasks with a bad --count")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    err = usage_error(bench, ["rollouts.py", "--count", "0", "--tasks", str(tmp_path / "tasks"),
                              "--out", str(tmp_path / "out")])
    assert "--count" in err and "greater than or equal to 1" in err


def test_the_mae_target_line_says_higher_when_the_online_mae_is_above_the_frozen_copys(
    load_benchmark,
) -> None:
    bench = load_benchmark("rollouts")
    uniform = {"method": "uniform-16", "rollouts": 256, "success_mean": 0.72,
               "curve": [[0, 0.7], [256, 0.72]]}
    rail = {"method": "rail", "rollouts_to_match_uniform16": 0, "success_mean": 0.72,
            "rail": {"rail/mae_online_paired": 0.0531, "rail/mae_frozen": 0.0436}}
    lines = bench.targets([uniform, rail])
    assert lines[-1] == ("controller MAE online 0.0531 vs frozen 0.0436: 22 % higher  "
                         "(target >= 30 % lower): NOT met")


class Generated(Exception):
    """Raised by the stand-in generator: the benchmark chose to generate, with these arguments."""


@pytest.mark.parametrize("complete", [False, True])
def test_a_default_task_set_a_killed_generation_left_is_generated_again(
    load_benchmark, tmp_path: Path, monkeypatch, capsys, complete: bool
) -> None:
    # Generation writes benchmark.json last; bench-out/tasks-COUNT without it is what a kill mid-generation
    # left, and was used as the whole task set because only its existence was checked.
    bench = load_benchmark("rollouts")
    monkeypatch.chdir(tmp_path)
    tasks = Path("bench-out") / "tasks-4"
    (tasks / "calc-1").mkdir(parents=True)
    (tasks / "calc-1" / "manifest.json").write_text("{}")
    if complete:
        (tasks / "benchmark.json").write_text("{}")

    def generate(tasks_dir, config, *args, **kwargs):
        raise Generated(tasks_dir, kwargs.get("force"))

    def run(command):
        raise AssertionError(f"ran {command}")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    monkeypatch.setattr(bench, "run", run)
    monkeypatch.setattr(sys, "argv", ["rollouts.py", "--count", "4", "--out", str(tmp_path / "out")])
    with pytest.raises(AssertionError if complete else Generated) as raised:
        bench.main()
    if complete:
        assert str(tasks) in str(raised.value)  # a complete set is used as it is
        return
    assert raised.value.args == (tasks, True)
    assert "incomplete" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("option", "says"),
    [(["--budgte", "512"], "No such option: --budgte"), (["--budget", "abc"], "Invalid value for '--budget'"),
     (["--seeds"], "--seeds"), (["stray"], "unexpected extra argument")],
)
def test_a_bad_bench_option_is_a_usage_error_before_the_task_set_is_generated(
    load_benchmark, tmp_path: Path, monkeypatch, usage_error, option: list[str], says: str
) -> None:
    # The options for `aios-rl bench rollouts` were only checked when it ran, after minutes of generating
    # a missing task set; they are parsed by that command's own parser first.
    bench = load_benchmark("rollouts")

    def generate(tasks_dir, config, *args, **kwargs):
        raise Generated(tasks_dir)

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    argv = ["rollouts.py", "--count", "4", "--tasks", str(tmp_path / "tasks"), "--out", str(tmp_path / "out")]
    with pytest.raises(Generated):  # good options go on to the generation
        monkeypatch.setattr(sys, "argv", [*argv, "--budget", "64", "--methods", "uniform-8,rail", "--json"])
        bench.main()
    err = usage_error(bench, [*argv, *option])
    assert says in err and "aios-rl bench rollouts" in err


class Ran(Exception):
    """Raised by the stand-in for `run`: the command the benchmark would have run."""


@pytest.mark.parametrize("extra", [["--json"], ["--budget", "64"]])
def test_merge_passes_its_other_options_on_rather_than_dropping_them(
    load_benchmark, tmp_path: Path, monkeypatch, extra: list[str]
) -> None:
    # `--merge A B --out C --json` printed the table: options beside --merge were parsed and thrown away, so
    # a merge-rollouts option was ignored and an option it does not take (e.g. --budget) went unnoticed.
    bench = load_benchmark("rollouts")

    def run(command):
        raise Ran(command)

    monkeypatch.setattr(bench, "run", run)
    out = tmp_path / "out"
    argv = ["rollouts.py", "--merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), *extra]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(Ran) as ran:
        bench.main()
    command = ran.value.args[0]
    assert command[3:6] == ["bench", "merge-rollouts", str(tmp_path / "a")]
    assert command[-len(extra):] == extra and ["--out", str(out)] == command[-len(extra) - 2:-len(extra)]


@pytest.mark.parametrize(
    ("option", "says"),
    [(["--methods", "uniform-16,rali"], "unknown allocator 'rali'"), (["--budget", "0"], "budget"),
     (["--seed-list", "1,x"], "--seed-list")],
)
def test_a_bench_option_its_config_refuses_is_a_usage_error_before_the_task_set_is_generated(
    load_benchmark, tmp_path: Path, monkeypatch, usage_error, option: list[str], says: str
) -> None:
    # Values the parser takes but the benchmark's settings refuse (an allocator name mistyped, a budget of 0)
    # were found only when `bench rollouts` ran, after the missing task set had been generated.
    bench = load_benchmark("rollouts")

    def generate(tasks_dir, config, *args, **kwargs):
        raise AssertionError("generated the task set before checking the bench options")

    monkeypatch.setattr(bench, "generate_benchmark", generate)
    argv = ["rollouts.py", "--count", "4", "--tasks", str(tmp_path / "tasks"), "--out", str(tmp_path / "out")]
    err = usage_error(bench, [*argv, *option])
    assert says in err and "aios-rl bench rollouts" in err

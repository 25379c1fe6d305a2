"""The learning benchmark's paired comparison over (seed, holdout task) outcomes."""

from __future__ import annotations

import json

import pytest
from scipy.stats import binomtest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("shell_learning")


def test_counts_discordant_pairs_on_common_seeds_and_tasks_only(bench) -> None:
    by_task = {
        "distillation + RL": {"0": {"a": 1, "b": 1, "c": 0, "d": 1}, "1": {"a": 1, "b": 0}, "2": {"a": 1}},
        "distillation only": {"0": {"a": 0, "b": 1, "c": 1, "e": 0}, "1": {"a": 0, "b": 0}},
    }
    (line,) = bench.paired_lines(by_task)
    # seed 2 has no partner, task d and e are each on one side only: better 0:a and 1:a, worse 0:c
    assert "seeds 0,1:" in line and "better on 2, worse on 1" in line
    assert f"p = {binomtest(2, 3, 0.5).pvalue:.3f}" in line


def test_a_one_sided_sweep_is_significant_and_ties_print_p_one(bench) -> None:
    sweep = {"pure RL (--teacher none)": {"0": {f"t{i}": 1 for i in range(9)}},
             "untrained student": {"0": {f"t{i}": 0 for i in range(9)}}}
    (line,) = bench.paired_lines(sweep)
    assert "better on 9, worse on 0" in line and "p = 0.004" in line
    tie = {"distillation + RL": {"0": {"a": 1}}, "distillation only": {"0": {"a": 1}}}
    assert "p = 1.000" in bench.paired_lines(tie)[0]


def test_with_holdout_groups_each_group_gets_its_own_count(bench) -> None:
    by_task = {"distillation + RL": {"0": {"r1": 1, "r2": 1, "m1": 0, "m2": 1}, "1": {"r1": 1, "m1": 1}},
               "distillation only": {"0": {"r1": 0, "r2": 1, "m1": 1, "m2": 0}, "1": {"r1": 0, "m1": 1}}}
    groups = {"r1": "unseen_repos", "r2": "unseen_repos", "m1": "unseen_mutants", "m2": "unseen_mutants"}
    overall, repos, mutants = bench.paired_lines(by_task, groups)
    assert "better on 3, worse on 1" in overall
    assert repos.startswith("  unseen repos: better on 2, worse on 0")  # 0:r1 and 1:r1
    assert mutants.startswith("  unseen mutants: better on 1, worse on 1")  # 0:m2 and 0:m1
    assert len(bench.paired_lines(by_task, {"r1": "unseen_repos"})) == 2  # no line for a group without tasks


def test_every_configuration_has_a_short_name_and_its_own_run_directory(bench) -> None:
    assert sorted(bench.SHORT.values()) == sorted(bench.CONFIGS)
    names = {bench.run_name(0, name, config) for name, config in bench.CONFIGS.items()}
    assert len(names) == len(bench.CONFIGS)
    assert bench.REDISTILLED_FROM in bench.CONFIGS
    base = bench.run_name(0, bench.REDISTILLED_FROM, bench.CONFIGS[bench.REDISTILLED_FROM])
    name = "distillation + RL, redistilled"
    assert bench.run_name(0, name, bench.CONFIGS[name]) == base + "-redistill"


def test_merge_reads_the_groups_of_an_older_file_from_its_task_set(bench, tmp_path, capsys) -> None:
    # a results file written before holdout_groups: its run named a task set that still exists
    tasks = tmp_path / "tasks"
    bench.generate_benchmark(tasks, bench.GeneratorConfig(count=6, seed=3))
    groups = bench.holdout_groups(tasks)
    assert groups and set(groups.values()) <= {"unseen_repos", "unseen_mutants"}
    by_task = {"distillation + RL": {"0": {task: 1 for task in groups}},
               "distillation only": {"0": {task: 0 for task in groups}}}
    older = {"rows": {}, "by_task": by_task, "args": {"first_seed": 0, "seeds": 1, "tasks": str(tasks)}}
    (tmp_path / "old.json").write_text(json.dumps(older))
    bench.merge([tmp_path / "old.json"])
    out = capsys.readouterr().out
    for group, label in bench.GROUP_LABELS.items():
        count = sum(g == group for g in groups.values())
        assert (f"  {label}: better on {count}, worse on 0" in out) == (count > 0)
    gone = older | {"args": older["args"] | {"tasks": str(tmp_path / "no-such-tasks")}}
    (tmp_path / "gone.json").write_text(json.dumps(gone))
    bench.merge([tmp_path / "gone.json"])
    captured = capsys.readouterr()
    assert "holdout groups are unknown" in captured.err and "  unseen" not in captured.out


def test_merge_counts_a_row_shared_by_files_over_the_same_seeds_once(bench, tmp_path, capsys) -> None:
    # two processes over seeds 0-2, one per teacher configuration: each evaluates the shared warm start
    warm = [0.70, 0.72, 0.78]
    args = {"first_seed": 0, "seeds": 3, "tasks": str(tmp_path / "no-such-tasks")}
    for name, config in (("a", "distillation only"), ("b", "distillation + RL")):
        rows = {"oracle warm start alone": {"holdout": warm}, config: {"holdout": [0.6, 0.7, 0.8]}}
        data = {"rows": rows, "holdout_groups": {"t": "unseen_repos"}, "args": args}
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    bench.merge([tmp_path / "a.json", tmp_path / "b.json"])
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("oracle warm start")]
    assert bench.fmt(warm) in line  # mean ± std over the three seeds, not over six copies


def test_merge_prints_no_minutes_when_the_file_counted_for_those_seeds_had_none(
    bench, tmp_path, capsys
) -> None:
    # the same configuration and seeds in two files: the first, stored before phase times, has no minutes;
    # the second's minutes are for seeds already merged, so they are left out and nothing is left to average
    args = {"first_seed": 0, "seeds": 3, "tasks": str(tmp_path / "no-such-tasks")}
    rows = {"distillation + RL": {"holdout": [0.6, 0.7, 0.8]}}
    old = {"rows": rows, "holdout_groups": {"t": "unseen_repos"}, "args": args}
    new = old | {"train_minutes": {"distillation + RL": [9.0, 10.0, 11.0]}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    bench.merge([tmp_path / "old.json", tmp_path / "new.json"])
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("distillation + RL")]
    assert line.split()[-1] == "-"


@pytest.mark.parametrize("content", [None, '{"rows": {"distillation only": {"holdout": [0.5', "[]", "{}"])
def test_merge_of_a_file_that_is_not_a_results_file_is_a_usage_error(
    bench, tmp_path, usage_error, content
) -> None:
    # A missing file (e.g. an OUT/results-*.json glob that matched nothing), one a killed write cut short,
    # or another JSON ended in a FileNotFoundError, JSONDecodeError, AttributeError or KeyError traceback.
    file = tmp_path / "results-distill-s0-0.json"
    if content is not None:
        file.write_text(content)
    err = usage_error(bench, ["shell_learning.py", "--merge", str(file)])
    assert "--merge" in err and str(file) in err

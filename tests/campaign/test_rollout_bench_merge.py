"""`bench merge-rollouts` over directories that split the seeds or the methods, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aios_rl.campaign.rollout_bench import (
    CONFIG_FILE,
    RESULTS_FILE,
    BenchConfig,
    SeedRun,
    format_table,
    merge_results,
    summarize,
)
from aios_rl.contracts.errors import ConfigError


def seed_run(method: str, seed: int, final: float) -> SeedRun:
    return SeedRun(method=method, seed=seed, curve=[(0, 0.5), (8, final)], rollouts=8, env_steps=20, groups=2,
                   zero_variance_groups=1, wall_s=1.0)


def bench_dir(path: Path, finals: dict[tuple[str, int], float], **config) -> Path:
    """A finished `bench rollouts` output directory with the given final success per (method, seed)."""
    runs: dict[str, list[SeedRun]] = {}
    for (method, seed), final in finals.items():
        runs.setdefault(method, []).append(seed_run(method, seed, final))
    path.mkdir()
    methods = tuple(runs)
    cfg = BenchConfig(methods=methods, seeds=1, budget=8, **config)
    (path / CONFIG_FILE).write_text(cfg.model_dump_json())
    (path / RESULTS_FILE).write_text(json.dumps([s.as_json() for s in summarize(runs)]))
    return path


def test_methods_run_in_separate_directories_merge_into_one_table(tmp_path):
    uniform = bench_dir(tmp_path / "u", {("uniform-16", 0): 0.6, ("uniform-16", 1): 0.8})
    rail = bench_dir(tmp_path / "r", {("rail", 0): 0.7, ("rail", 1): 0.9})
    summaries, cfg = merge_results([uniform, rail], tmp_path / "out")
    assert [s.method for s in summaries] == ["uniform-16", "rail"] and cfg.methods == ("uniform-16", "rail")
    assert (cfg.seeds, cfg.first_seed) == (2, 0)
    by = {s.method: s for s in summaries}
    assert by["uniform-16"].success_mean == pytest.approx(0.7)
    assert by["rail"].success_mean == pytest.approx(0.8)
    assert by["rail"].rollouts_to_match_uniform16 == 8  # rail's mean at 8 rollouts (0.8) reaches 0.7
    saved = json.loads((tmp_path / "out" / RESULTS_FILE).read_text())
    assert [r["method"] for r in saved] == ["uniform-16", "rail"]
    assert BenchConfig.model_validate_json((tmp_path / "out" / CONFIG_FILE).read_text()) == cfg


def test_methods_over_different_seeds_are_refused(tmp_path):
    uniform = bench_dir(tmp_path / "u", {("uniform-16", 0): 0.6, ("uniform-16", 1): 0.8})
    rail = bench_dir(tmp_path / "r", {("rail", 0): 0.7})
    with pytest.raises(ConfigError, match="cover different seeds"):
        merge_results([uniform, rail], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_other_settings_and_repeated_seeds_are_refused(tmp_path):
    a = bench_dir(tmp_path / "a", {("rail", 0): 0.7})
    b = bench_dir(tmp_path / "b", {("uniform-16", 0): 0.6}, tasks_per_round=2)
    with pytest.raises(ConfigError, match="other settings"):
        merge_results([a, b], tmp_path / "out")
    c = bench_dir(tmp_path / "c", {("rail", 0): 0.5})
    with pytest.raises(ConfigError, match="repeat"):
        merge_results([a, c], tmp_path / "out")


def test_merged_seeds_that_skip_numbers_are_recorded_as_they_are(tmp_path):
    a = bench_dir(tmp_path / "a", {("rail", 0): 0.7, ("rail", 2): 0.5})
    b = bench_dir(tmp_path / "b", {("rail", 5): 0.6}, seed_list=(5,))
    summaries, cfg = merge_results([a, b], tmp_path / "out")
    assert cfg.seed_list == (0, 2, 5) and cfg.seed_numbers() == [0, 2, 5]
    saved = BenchConfig.model_validate_json((tmp_path / "out" / CONFIG_FILE).read_text())
    assert saved.seed_numbers() == [0, 2, 5]
    assert "seeds 0, 2, 5," in format_table(summaries, cfg)[0]


def test_seed_list_replaces_the_range_and_must_be_distinct():
    assert BenchConfig(seeds=2, first_seed=3).seed_numbers() == [3, 4]
    listed = BenchConfig(seed_list=(7, 1))
    assert listed.seed_numbers() == [7, 1] and (listed.seeds, listed.first_seed) == (2, 1)
    assert BenchConfig.model_validate_json(listed.model_dump_json()) == listed
    assert BenchConfig(seeds=2, first_seed=1, seed_list=(7, 1)) == listed  # agreeing values are fine
    with pytest.raises(ConfigError, match="disagrees with seeds=3"):
        BenchConfig(seeds=3, seed_list=(7, 1))
    with pytest.raises(ConfigError, match="disagrees with first_seed=0"):
        BenchConfig(first_seed=0, seed_list=(7, 1))
    with pytest.raises(ConfigError, match="distinct"):
        BenchConfig(seed_list=(1, 1))
    with pytest.raises(ConfigError, match="distinct"):
        BenchConfig(seed_list=(-1,))


def test_runs_on_different_task_sets_are_refused(tmp_path):
    from aios_rl.storage.db import RunStore

    def on_tasks(path: Path, tasks: str) -> Path:  # what the seed's warm-start run stores
        store = RunStore(path / "seed-0" / "initial" / "control.db")
        store.set_meta("tasks_dir", tasks)
        store.close()
        return path

    uniform = on_tasks(bench_dir(tmp_path / "u", {("uniform-16", 0): 0.6}), "/sets/a")
    rail = on_tasks(bench_dir(tmp_path / "r", {("rail", 0): 0.7}), "/sets/b")
    with pytest.raises(ConfigError, match="different task directories"):
        merge_results([uniform, rail], tmp_path / "out")
    same = on_tasks(bench_dir(tmp_path / "s", {("rail", 0): 0.7}), "/sets/a")
    assert [s.method for s in merge_results([uniform, same], tmp_path / "out")[0]] == ["uniform-16", "rail"]


def test_a_merge_never_overwrites_a_run_directorys_results(tmp_path):
    uniform = bench_dir(tmp_path / "u", {("uniform-16", 0): 0.6})
    rail = bench_dir(tmp_path / "r", {("rail", 0): 0.7})
    (tmp_path / "elsewhere" / "seed-0").mkdir(parents=True)  # a bench rollouts output not among the inputs
    before = (uniform / RESULTS_FILE).read_text()
    for out in (uniform, rail, tmp_path / "elsewhere"):
        with pytest.raises(ConfigError, match="would overwrite"):
            merge_results([uniform, tmp_path / "r"], out)
    assert (uniform / RESULTS_FILE).read_text() == before
    merge_results([uniform, rail], tmp_path / "merged")
    merge_results([uniform, rail], tmp_path / "merged")  # a merge's own directory may be merged into again


def test_an_out_that_is_a_file_is_refused_before_anything_is_written(tmp_path):
    uniform = bench_dir(tmp_path / "u", {("uniform-16", 0): 0.6})
    rail = bench_dir(tmp_path / "r", {("rail", 0): 0.7})
    out = tmp_path / "merged.json"
    out.write_text("{}\n")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        merge_results([uniform, rail], out)
    assert out.read_text() == "{}\n"


def test_directories_a_bench_wrote_before_it_refused_train_settings_it_sets_still_merge(tmp_path):
    """`bench rollouts` took `train: {epochs: 3, seed: 7}` until it refused the settings each method's run
    sets itself (it overwrote them): the directories it wrote store them, and their merge must not refuse
    the finished runs, telling to leave out of `train:` what no merge can change."""
    dirs = [bench_dir(tmp_path / "u", {("uniform-16", 0): 0.6}),
            bench_dir(tmp_path / "r", {("rail", 0): 0.7})]
    for d in dirs:  # as the older bench stored them
        stored = json.loads((d / CONFIG_FILE).read_text())
        stored["train"] |= {"epochs": 3, "seed": 7}
        (d / CONFIG_FILE).write_text(json.dumps(stored))
    summaries, cfg = merge_results(dirs, tmp_path / "out")
    assert [s.method for s in summaries] == ["uniform-16", "rail"] and cfg.train.epochs == 3
    with pytest.raises(ConfigError, match="train.epochs is set by bench rollouts itself"):
        BenchConfig.model_validate({"train": {"epochs": 3}})  # a new bench still refuses them



def test_directories_a_bench_wrote_with_two_names_of_one_allocator_still_merge(tmp_path):
    """`bench rollouts` took `--methods uniform-16,grpo-16` (or 'rail,RAIL') until it refused two names of
    one allocator: the directories it wrote store both, and their merge must not refuse the finished runs
    with a `--methods` error that no merge can act on."""
    dirs = []
    for name, seed in (("a", 0), ("b", 1)):
        d = bench_dir(tmp_path / name, {("uniform-16", seed): 0.6, ("rail", seed): 0.7})
        config = json.loads((d / CONFIG_FILE).read_text())
        (d / CONFIG_FILE).write_text(json.dumps(config | {"methods": ["uniform-16", "grpo-16"]}))
        results = json.loads((d / RESULTS_FILE).read_text())
        results[1]["method"] = results[1]["seeds"][0]["method"] = "grpo-16"  # as the older bench stored them
        (d / RESULTS_FILE).write_text(json.dumps(results))
        dirs.append(d)
    summaries, cfg = merge_results(dirs, tmp_path / "out")
    assert [s.method for s in summaries] == ["uniform-16", "grpo-16"] and cfg.seed_list == (0, 1)
    with pytest.raises(ConfigError, match="name the same allocator"):
        BenchConfig(methods=("uniform-16", "grpo-16"))  # a new bench still refuses them

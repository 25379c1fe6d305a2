"""Which tasks an RL epoch runs: the frontier (neither solved nor labelled) first, fewest visits first."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

from aios_rl.algos.trainer import TrainerConfig
from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.task_sampling import frontier_cost, frontier_tasks, visit_counts
from aios_rl.campaign.train import EPOCH_TASKS_KEY, ShellTrainConfig, ShellTraining
from aios_rl.contracts.episode import Task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def _tasks(n: int) -> list[Task]:
    return [Task(task_id=f"t{i}", environment="shell", family="failing_tests", split="train", prompt="fix it") for i in range(n)]


def test_cost_doubles_per_level_and_grows_with_visits() -> None:
    assert frontier_cost(0, labelled=False, solved=False) == 1
    assert frontier_cost(1, labelled=False, solved=False) == frontier_cost(0, labelled=True, solved=False) == 2
    assert frontier_cost(0, labelled=True, solved=True) == frontier_cost(0, labelled=False, solved=True) == 4
    assert frontier_cost(3, labelled=True, solved=False) == 8


def test_frontier_runs_unlabelled_unsolved_tasks_before_the_rest() -> None:
    tasks = _tasks(12)
    labelled = {f"t{i}" for i in range(6)}
    solved = {"t6", "t0"}  # t6: an unlabelled task the student solved; t0 labelled and solved
    for seed in range(20):
        chosen = {t.task_id for t in frontier_tasks(tasks, 5, random.Random(seed), visits={}, labelled=labelled,
                                                    solved=solved)}
        assert chosen == {"t7", "t8", "t9", "t10", "t11"}  # the unlabelled tasks without a success
        # One visit each makes them level with unvisited labelled tasks: 5 of those 10 tasks are drawn.
        visits = {f"t{i}": 1 for i in range(7, 12)}
        again = [t.task_id for t in frontier_tasks(tasks, 5, random.Random(seed), visits=visits, labelled=labelled,
                                                   solved=solved)]
        assert set(again) <= {"t1", "t2", "t3", "t4", "t5", "t7", "t8", "t9", "t10", "t11"}
    draws = Counter(t.task_id for seed in range(200) for t in frontier_tasks(
        tasks, 5, random.Random(seed), visits=visits, labelled=labelled, solved=solved))
    assert set(draws) == {"t1", "t2", "t3", "t4", "t5", "t7", "t8", "t9", "t10", "t11"}  # ties broken at random
    assert min(draws.values()) > 60  # about 100 each


def test_a_solved_task_yields_to_any_unsolved_one_visited_less_than_thrice() -> None:
    tasks = _tasks(2)
    visits = {"t0": 0, "t1": 2}  # t0 solved (cost 4), t1 unlabelled, tried twice without success (cost 3)
    assert [t.task_id for t in frontier_tasks(tasks, 1, random.Random(0), visits=visits, labelled=(),
                                              solved={"t0"})] == ["t1"]
    visits["t1"] = 4  # cost 5
    assert [t.task_id for t in frontier_tasks(tasks, 1, random.Random(0), visits=visits, labelled=(),
                                              solved={"t0"})] == ["t0"]


def test_visits_count_only_earlier_epochs() -> None:
    record = {"1": ["a", "b"], "2": ["a"], "3": ["c"]}
    assert visit_counts(record, 3) == Counter({"a": 2, "b": 1})
    assert visit_counts(record, 1) == Counter()
    assert visit_counts({}, 5) == Counter()


def test_the_order_depends_only_on_the_generator() -> None:
    tasks = _tasks(30)
    first = frontier_tasks(tasks, 8, random.Random(7), visits={}, labelled=(), solved=())
    assert first == frontier_tasks(list(tasks), 8, random.Random(7), visits={}, labelled=(), solved=())
    assert first != frontier_tasks(tasks, 8, random.Random(8), visits={}, labelled=(), solved=())


def test_shell_training_runs_the_frontier_records_it_and_resumes_it(tmp_path: Path) -> None:
    make_task(tmp_path, task_id="calc-1")  # the oracle has its reference fix
    make_task(tmp_path, task_id="calc-2", oracle=False)  # a bug report without a known fix
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=1, warm_start_epochs=0)
    training = ShellTraining(tmp_path / "run", tasks, config)
    try:
        assert training.labelled == {"calc-1"}
        training.run_epoch(1)  # the task no teacher can label comes first
        record = read_metrics(tmp_path / "run" / "metrics.jsonl")[-1]
        assert record["tasks/unlabelled"] == 1 and record["tasks/solved_before"] == 0
        assert training.plane.store.get_meta(EPOCH_TASKS_KEY)["1"] == ["calc-2"]
    finally:
        training.close()
    resumed = ShellTraining(tmp_path / "run", tasks, config.model_copy(update={"epochs": 2}))
    try:  # an epoch run again (as after a kill) runs what it started with, even where the frontier moved on
        assert [t.task_id for t in resumed._choose_tasks(1, random.Random(0), {"calc-2"})] == ["calc-2"]
    finally:
        resumed.close()


def test_distillation_epochs_and_older_runs_draw_uniformly(tmp_path: Path, edit_stored_config) -> None:
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path, task_id="calc-2", oracle=False)
    tasks = tmp_path / "tasks"
    distill = ShellTraining(tmp_path / "distill", tasks, ShellTrainConfig(epochs=1, tasks_per_epoch=1, rl=False))
    try:
        drawn = {distill._choose_tasks(epoch, random.Random(epoch), set())[0].task_id for epoch in range(1, 30)}
        assert drawn == {"calc-1", "calc-2"}
    finally:
        distill.close()

    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, warm_start_epochs=0, teacher="none")
    ShellTraining(tmp_path / "old", tasks, config).close()

    def as_before(stored: dict) -> None:  # as a run stored by the previous version
        del stored["task_sampling"], stored["demo_replay"]

    edit_stored_config(tmp_path / "old", as_before)
    resumed = ShellTraining(tmp_path / "old", tasks, config.model_copy(update={"epochs": 2}))  # the same command
    try:
        assert resumed.config.task_sampling == "uniform" and resumed.config.demo_replay is False
    finally:
        resumed.close()


def test_demonstrations_are_replayed_in_epochs_that_run_only_unlabelled_tasks(tmp_path: Path) -> None:
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path, task_id="calc-2", oracle=False)  # the frontier runs this one: nothing to label there
    tasks = tmp_path / "tasks"
    base = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=2, warm_start_epochs=0,
                            trainer=TrainerConfig(self_imitation_coef=0))
    records = {}
    for replay in (False, True):
        run = tmp_path / f"replay-{replay}"
        training = ShellTraining(run, tasks, base.model_copy(update={"demo_replay": replay}))
        try:
            training.run_epoch(1)
        finally:
            training.close()
        records[replay] = read_metrics(run / "metrics.jsonl")[-1]
    assert records[False]["tasks/unlabelled"] == records[True]["tasks/unlabelled"] == 1
    assert records[False]["train/demonstrations_replayed"] == 0
    assert records[False]["train/distill_loss"] == 0.0  # the oracle labels no state of calc-2
    assert records[True]["train/demonstrations_replayed"] >= 1  # calc-1's opening state at least
    assert records[True]["train/distill_loss"] > 0.0

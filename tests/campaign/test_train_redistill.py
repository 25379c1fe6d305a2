"""`shell redistill` / `redistill_passes`: a fresh student distilled on the teacher's demonstrations plus the
demonstrations built from the fixes RL verified on tasks the teacher cannot label."""

from __future__ import annotations

import json
from collections.abc import Callable
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aios_rl.algos.self_imitation import archived_fixes
from aios_rl.campaign.demos import fix_demonstrations, oracle_demonstrations
from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.online_update import load_episodes
from aios_rl.campaign import train as train_module
from aios_rl.campaign.train import (
    PENDING_EPOCH_KEY, SELF_IMITATION_KEY, ShellTrainConfig, ShellTraining, open_training,
)
from aios_rl.campaign.validation import ValidationConfig, ValidationGate
from aios_rl.contracts.episode import Episode, Observation, Step
from aios_rl.contracts.errors import ConfigError, StorageError
from aios_rl.control.plane import ControlPlane
from aios_rl.envs.shell.candidates import REVERT_CANDIDATE
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.sandbox import Sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import CALC, FIXED, make_task  # noqa: E402

FIX = "patch\n" + unified_diff(CALC, FIXED, "calc.py")


def _step(state: str, action: str) -> Step:
    return Step(observation=Observation(text=state, candidates=[action, "stop"], state_key=state), action=action,
                logprob=-0.5, entropy=0.1)


def _episode(task: str, outcome: str, steps: list[Step]) -> Episode:
    reward = float(outcome == "success")
    return Episode(environment="shell", task_id=task, trajectory=steps, outcome=outcome, reward=reward,
                   env_reward=reward, policy_version="ckpt-0001")


def test_archived_fixes_are_the_loop_free_action_of_successes_at_the_opening_state() -> None:
    detour = [_step("A", "patch wrong"), _step("B", "revert"), _step("A", "patch right")]
    idle = [_step("A", "run tests"), _step("A", "patch again")]  # a step that leaves the state as it was
    episodes = [
        _episode("t1", "success", detour),
        _episode("t2", "failure", [_step("A", "patch nope")]),
        _episode("t3", "success", [_step("A", "patch first")]),
        _episode("t3", "success", [_step("A", "patch kept"), _step("C", "patch on top")]),
        _episode("t4", "success", []),
        _episode("t5", "success", [_step("A", "patch old")]),
        _episode("t5", "success", idle),
        _episode("t6", "success", [_step("A", "patch kept"), _step("C", "patch on top")]),
    ]
    # t3's later success kept a patch it never reverted, so its last action is no fix from the opening
    # state: the earlier one stands, and t6, which has no other, has no fix.
    assert archived_fixes(episodes) == {"t1": "patch right", "t3": "patch first", "t5": "patch again"}


def test_demonstrations_from_a_verified_fix_equal_the_oracles_for_the_same_fix(tmp_path: Path) -> None:
    sandbox = Sandbox()
    labelled = make_task(tmp_path, task_id="calc-1")
    unlabelled = make_task(tmp_path, task_id="calc-2", oracle=False)
    make_env = lambda: ShellBugfixEnv(sandbox=sandbox)  # noqa: E731
    ticks: list[int] = []
    found = fix_demonstrations([(unlabelled, FIX), (labelled, None)], make_env, seed=3,
                               progress=lambda: ticks.append(1))
    assert len(ticks) == 2 and [t for _, _, t, _ in found] == [[FIX], [REVERT_CANDIDATE], [FIX], [REVERT_CANDIDATE],
                                                                [FIX]]
    assert oracle_demonstrations([unlabelled], make_env, seed=3) == []  # no reference: the oracle cannot
    taught = oracle_demonstrations([make_task(tmp_path / "copy", task_id="calc-2")], make_env, seed=3)
    assert [(o.text, o.candidates, t) for o, _, t, _ in found] == [(o.text, o.candidates, t) for o, _, t, _ in taught]


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, ShellTrainConfig]:
    """A gated RL run over a labelled and an unlabelled copy of one bug, whose epoch verified a fix of the
    latter (a third copy is the validation task)."""
    root = tmp_path_factory.mktemp("redistill")
    make_task(root, task_id="calc-1")
    make_task(root, task_id="calc-2", oracle=False)
    make_task(root / "val", task_id="calc-v")
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=2, group_size=4, warm_start_epochs=60, temperature=0.5,
                              redistill_passes=60,
                              validation=ValidationConfig(tasks_dir=str(root / "val" / "tasks"), rule="mean"))
    training = ShellTraining(root / "run", root / "tasks", config)
    try:
        training.warm_start()
        training.run_epoch(1)
        archive = training.plane.store.get_meta(SELF_IMITATION_KEY, {})
    finally:
        training.close()
    assert "calc-2" in archive, "the epoch verified no fix of the unlabelled task"
    return root / "run", root / "tasks", config


def _copy(run: Path, tmp_path: Path) -> Path:
    """A copy of the module's run, so each test redistils its own."""
    subprocess.run(["cp", "-r", str(run), str(tmp_path / "run")], check=True)
    return tmp_path / "run"


def _weights(policy) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


def test_redistill_fits_a_fresh_student_on_the_verified_fix_and_is_not_repeated(rl_run, tmp_path: Path) -> None:
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy)
    try:
        before, epoch_checkpoint = _weights(training.policy), training.plane.state.lineage.active
        assert not training.redistilled()
        with pytest.raises(ConfigError, match="at least one pass"):
            training.redistill(0)
        report = training.redistill()
        assert report is not None and training.redistilled()
        lineage = training.plane.state.lineage
        assert lineage.active == report.checkpoint != epoch_checkpoint
        assert lineage.checkpoints[report.checkpoint].parent == epoch_checkpoint
        m = report.metrics
        assert (m["phase"], m["passes"], m["discovered_tasks"]) == ("redistill", 60, 1)
        assert m["val/decision"] in ("same", "better") and m["val/active"] == report.checkpoint  # the gate judged it
        assert m["demonstrations"] == 5 + m["discovered_demonstrations"] == 10  # calc-1's by the oracle, calc-2's
        assert read_metrics(copy / "metrics.jsonl")[-1]["checkpoint"] == report.checkpoint
        assert m["time/phase_s"] > 0  # the distillation and the gate's judgement
        after = _weights(training.policy)
        assert any(not torch.equal(before[k], v) for k, v in after.items())
        stored = training.load_student()
        assert all(torch.equal(stored.state_dict()[k], v) for k, v in after.items())
        env = ShellBugfixEnv(sandbox=training.sandbox)
        try:  # the fresh student learned the verified fix of the task no teacher labelled
            opening = env.reset(next(t for t in training.tasks if t.task_id == "calc-2"), seed=0)
        finally:
            env.close()
        logits = training.policy.forward([opening], ["shell"]).logits[0][: len(opening.candidates)]
        assert opening.candidates[int(logits.argmax())] == FIX
    finally:
        training.close()
    again = open_training(copy)
    try:
        assert again.redistilled() and again.epochs_done() == 1  # a redistillation is not an epoch
    finally:
        again.close()
    result = subprocess.run([sys.executable, "-m", "aios_rl.cli", "shell", "redistill", "--run", str(copy)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "already redistilled" in result.stdout
    command = [sys.executable, "-m", "aios_rl.cli", "shell", "redistill", "--run", str(copy), "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and json.loads(result.stdout) == {"already_redistilled": True,
                                                                    "active": report.checkpoint}


def test_a_redistilled_student_worse_on_validation_is_rolled_back(rl_run, tmp_path: Path) -> None:
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy)
    try:
        before, epoch_checkpoint = _weights(training.policy), training.plane.state.lineage.active
        report = training.redistill(1)  # one pass: a fresh student that has barely learned the fixes
        assert report is not None and training.redistilled()
        m = report.metrics
        assert m["val/decision"] == "worse" and m["val/success"] < m["val/reference_success"]
        lineage = training.plane.state.lineage
        assert lineage.active == m["val/active"] == epoch_checkpoint
        assert lineage.checkpoints[report.checkpoint].verdict == "rolled_back"
        after = _weights(training.policy)
        assert all(torch.equal(before[k], v) for k, v in after.items())  # the trainer has the parent's again
        assert (copy / "rollbacks" / "redistill-after-epoch-1.json").is_file()
    finally:
        training.close()


@pytest.mark.parametrize("kill_at", ["during_the_gate", "after_the_rollback"])
def test_a_redistillation_killed_after_its_checkpoint_is_finished_not_repeated(
    rl_run, tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]], kill_at: str
) -> None:
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy)
    epoch_checkpoint, rollbacks = training.plane.state.lineage.active, training.plane.state.lineage.rollbacks
    where = (ValidationGate, "score") if kill_at == "during_the_gate" else (train_module, "append_metrics")
    killed = kill_once(*where)
    with pytest.raises(killed):
        training.redistill(1)  # one pass: worse on validation, so the gate rolls it back
    redistilled = training.plane.state.lineage.checkpoints.keys() - {epoch_checkpoint}
    stored_seconds = training.plane.store.get_meta(PENDING_EPOCH_KEY)["time/phase_s"]  # the distillation's
    assert stored_seconds > 0
    training.close()
    resumed = open_training(copy)
    try:
        assert not resumed.redistilled()
        before = dict(resumed.plane.state.lineage.checkpoints)
        report = resumed.redistill(1)
        lineage = resumed.plane.state.lineage
        assert report is not None and report.checkpoint in redistilled
        assert lineage.checkpoints.keys() == before.keys()  # no second student
        assert lineage.active == epoch_checkpoint and lineage.rollbacks == rollbacks + 1  # once, not twice
        assert [r["phase"] for r in read_metrics(copy / "metrics.jsonl")].count("redistill") == 1
        assert report.metrics["val/decision"] == "worse" and resumed.redistilled()
        assert report.metrics["time/phase_s"] > stored_seconds  # the killed process's time, and the gate's
    finally:
        resumed.close()


def test_a_redistillation_registered_and_killed_before_it_was_applied_is_applied_on_resume(
    rl_run, tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]]
) -> None:
    """A kill between the redistilled checkpoint's registration and its ``update.completed``: the resumed
    redistillation applies that checkpoint, leaving no second student (nor a registered one no phase made)."""
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy)
    lineage = training.plane.state.lineage
    epoch_checkpoint, trained = lineage.active, set(lineage.checkpoints)
    killed = kill_once(ControlPlane, "complete_update")
    with pytest.raises(killed):
        training.redistill(1)
    registered = training.plane.state.lineage.checkpoints.keys() - trained
    assert len(registered) == 1
    assert training.plane.state.lineage.active == epoch_checkpoint
    training.close()
    resumed = open_training(copy)
    try:
        before = dict(resumed.plane.state.lineage.checkpoints)
        report = resumed.redistill(1)
        lineage = resumed.plane.state.lineage
        assert report is not None and report.checkpoint in registered
        assert lineage.checkpoints.keys() == before.keys()  # applied, not registered a second time
        assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == sorted(before)
        assert [r["phase"] for r in read_metrics(copy / "metrics.jsonl")].count("redistill") == 1
    finally:
        resumed.close()


def test_verified_fixes_that_are_no_candidate_leave_nothing_to_redistil(
    rl_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copy(rl_run[0], tmp_path)
    monkeypatch.setattr(train_module, "archived_fixes", lambda _: {"calc-2": "an answer written as text"})
    training = open_training(copy)
    try:
        before = dict(training.plane.state.lineage.checkpoints)
        assert training.redistill() is None  # no empty batch distilled into an untrained student
        assert training.plane.state.lineage.checkpoints == before and not training.redistilled()
    finally:
        training.close()


def test_redistill_needs_finished_epochs_and_a_verified_unlabelled_fix(rl_run, tmp_path: Path) -> None:
    run, tasks, config = rl_run
    early = ShellTraining(tmp_path / "early", tasks, config.model_copy(update={"epochs": 2, "init_from": str(run)}))
    try:
        with pytest.raises(ConfigError, match="0 of its 2 epochs") as info:
            early.redistill()
        assert "--epochs 0" not in str(info.value)  # no epoch done: nothing to end the run at
    finally:
        early.close()
    copy = _copy(run, tmp_path)
    unfinished = open_training(copy, epochs=2)  # its 1 epoch done, 2 asked for
    try:
        with pytest.raises(ConfigError, match="1 of its 2 epochs") as info:
            unfinished.redistill()
    finally:
        unfinished.close()
    assert f"`aios-rl shell train --run {copy} --epochs 1`" in str(info.value)
    ended = open_training(copy, epochs=1)  # as the message says, then redistil (one pass is enough here)
    try:
        assert ended.redistill(1) is not None
    finally:
        ended.close()
    labelled_only = tmp_path / "labelled"
    make_task(labelled_only, task_id="calc-1")
    no_rl = config.model_copy(update={"rl": False, "warm_start_epochs": 2, "redistill_passes": 0})
    distill = ShellTraining(tmp_path / "distill", labelled_only / "tasks", no_rl)
    try:
        distill.warm_start()
        distill.run_epoch(1)
        assert distill.redistill(60) is None  # no archive: nothing RL verified
    finally:
        distill.close()
    with pytest.raises(ConfigError, match="needs RL epochs"):  # a run without RL never archives a fix
        ShellTrainConfig(rl=False, redistill_passes=1)
    with pytest.raises(StorageError, match="not a run directory"):
        open_training(tmp_path / "nowhere")
    result = subprocess.run([sys.executable, "-m", "aios_rl.cli", "shell", "redistill", "--run",
                             str(tmp_path / "distill")], capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "nothing to redistil" in result.stderr


def test_shell_train_redistills_after_its_last_epoch(tmp_path: Path) -> None:
    make_task(tmp_path, task_id="calc-1")
    make_task(tmp_path, task_id="calc-2", oracle=False)
    settings = tmp_path / "train.yaml"
    settings.write_text(json.dumps({"warm_start_epochs": 60, "temperature": 0.5, "tasks_per_epoch": 2,
                                    "group_size": 4}))
    command = [sys.executable, "-m", "aios_rl.cli", "shell", "train", "--tasks", str(tmp_path / "tasks"),
               "--run", str(tmp_path / "run"), "--epochs", "1", "--config", str(settings),
               "--redistill-passes", "60", "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [m["phase"] for m in summary["epochs_run"]] == ["rl"]  # the redistillation is not an epoch
    assert summary["redistill"]["phase"] == "redistill" and summary["redistill"]["discovered_tasks"] == 1
    assert summary["active"] == summary["redistill"]["checkpoint"]  # no gate: it becomes active


def test_a_redistillation_killed_before_its_line_is_finished_before_the_next_epoch(
    rl_run, tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]]
) -> None:
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy)
    killed = kill_once(train_module, "append_metrics")
    with pytest.raises(killed):
        training.redistill(1)
    redistilled = training.plane.store.get_meta(PENDING_EPOCH_KEY)["checkpoint"]
    training.close()
    more = open_training(copy, epochs=2)  # the run continued with another epoch instead of redistilling again
    try:
        report = more.run_epoch(2)
        phases = [(r["phase"], r["checkpoint"]) for r in read_metrics(copy / "metrics.jsonl")]
        assert phases[-2] == ("redistill", redistilled)  # its gate ran and its line is in
        assert phases[-1] == ("rl", report.checkpoint)
    finally:
        more.close()


def test_a_redistillation_killed_after_its_line_is_not_finished_a_second_time(
    rl_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy)
    store, real = training.plane.store, training.plane.store.set_meta

    class Killed(BaseException):
        pass

    def set_meta(key: str, value: object) -> None:
        if key == PENDING_EPOCH_KEY and value is None:  # killed after the line, before the record is cleared
            raise Killed
        real(key, value)

    monkeypatch.setattr(store, "set_meta", set_meta)
    with pytest.raises(Killed):
        training.redistill(1)
    training.close()
    more = open_training(copy, epochs=2)  # the run continued with another epoch
    try:
        assert more.redistilled()
        more.run_epoch(2)
        phases = [r["phase"] for r in read_metrics(copy / "metrics.jsonl")]
        assert phases.count("redistill") == 1, phases  # its line was written once, before the kill
        assert phases[-1] == "rl"
    finally:
        more.close()


def test_an_epoch_run_again_after_a_redistillation_rolls_out_the_redistilled_student(
    rl_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An epoch killed after some of its episodes were stored, the run ended before it and redistilled, then
    continued: the epoch runs from the redistilled student, so none of the episodes the first student rolled
    out for it are reused as the new student's (same epoch, task and place in the group)."""
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy, epochs=2)
    real, calls = training.plane.record_episode, []

    class Killed(BaseException):
        pass

    def record(*args: object, **kwargs: object) -> object:
        if len(calls) == 2:
            raise Killed
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(training.plane, "record_episode", record)
    with pytest.raises(Killed):
        training.run_epoch(2)
    training.close()
    ended = open_training(copy, epochs=1)  # the run ended at its first epoch instead, and redistilled
    try:
        redistilled = ended.redistill(60)
        assert redistilled is not None and redistilled.metrics["val/decision"] != "worse"
    finally:
        ended.close()
    more = open_training(copy, epochs=2)
    try:
        report = more.run_epoch(2)
        trained_from = report.metrics["checkpoint"]
        window = more.plane.state.lineage.checkpoints[trained_from].data_window
        versions = {e.policy_version for e in load_episodes(more.plane, window)}
        active = more.plane.state.lineage.checkpoints[trained_from].parent
        assert versions == {active}, versions  # every episode trained on is the redistilled student's
    finally:
        more.close()


def test_redistilling_refuses_while_an_epoch_committed_before_a_kill_is_unfinished(
    rl_run, tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]]
) -> None:
    """Epoch 2 killed after its checkpoint's commit and before its line, the run ended at epoch 1: the
    redistillation would train on top of epoch 2's update and drop its record, so epoch 2 ran a second time
    (its rollouts spent twice) when the run went on. It refuses and says how to finish the epoch."""
    copy = _copy(rl_run[0], tmp_path)
    training = open_training(copy, epochs=2)
    killed = kill_once(train_module, "append_metrics")
    with pytest.raises(killed):
        training.run_epoch(2)
    committed = training.plane.store.get_meta(PENDING_EPOCH_KEY)["checkpoint"]
    training.close()
    ended = open_training(copy, epochs=1)
    try:
        with pytest.raises(ConfigError, match="--epochs 2"):
            ended.redistill(60)
    finally:
        ended.close()
    more = open_training(copy, epochs=2)
    try:
        report = more.run_epoch(2)
        assert report.checkpoint == committed  # finished, not trained again
        assert [r["phase"] for r in read_metrics(copy / "metrics.jsonl")].count("rl") == 2
    finally:
        more.close()

"""`shell train --init-from RUN[:CHECKPOINT]` starts a new run from another run's checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from aios_rl.campaign.train import ShellTrainConfig, ShellTraining
from aios_rl.contracts.errors import ConfigError, PolicyError, StorageError
from aios_rl.control.plane import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


def _weights(training: ShellTraining) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in training.policy.state_dict().items()}


def _warmed_first_run(tmp_path: Path) -> tuple[Path, ShellTrainConfig, dict[str, torch.Tensor]]:
    """A run FIRST warm-started on one task; the task directory, the configuration of a second run starting
    from it (``init_from``) and the weights it starts from."""
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=2, warm_start_epochs=2)
    first = ShellTraining(tmp_path / "first", tasks, config)
    first.warm_start()
    warmed = _weights(first)
    first.close()
    return tasks, config.model_copy(update={"init_from": str(tmp_path / "first")}), warmed


def test_a_run_starts_from_another_runs_checkpoint_without_a_second_warm_start(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, tasks_per_epoch=1, group_size=2, warm_start_epochs=2)
    first = ShellTraining(tmp_path / "first", tasks, config)
    fresh = _weights(first)
    assert first.warm_start() is not None
    warmed = _weights(first)
    first.close()
    assert any(not torch.equal(fresh[k], warmed[k]) for k in fresh)

    for spec in (f"{tmp_path / 'first'}", f"{tmp_path / 'first'}:ckpt-0001", f"{tmp_path / 'first'}:active"):
        run = tmp_path / f"second-{len(spec)}"
        second = ShellTraining(run, tasks, config.model_copy(update={"init_from": spec}))
        try:
            assert all(torch.equal(warmed[k], v) for k, v in _weights(second).items())
            assert second.warm_start() is None
            _, meta = second.plane.load_checkpoint("ckpt-0000")
            assert meta["init_from"] == f"{tmp_path / 'first'}:ckpt-0001"
        finally:
            second.close()
    initial = ShellTraining(tmp_path / "third", tasks,
                            config.model_copy(update={"init_from": f"{tmp_path / 'first'}:initial"}))
    assert all(torch.equal(fresh[k], v) for k, v in _weights(initial).items())
    initial.close()


def test_bad_sources_are_clear_errors(tmp_path: Path) -> None:
    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0)
    ShellTraining(tmp_path / "first", tasks, config).close()
    with pytest.raises(ConfigError, match="not a run directory"):
        ShellTraining(tmp_path / "a", tasks, config.model_copy(update={"init_from": str(tmp_path / "nowhere")}))
    with pytest.raises(StorageError, match="ckpt-0009"):
        ShellTraining(tmp_path / "b", tasks, config.model_copy(update={"init_from": f"{tmp_path / 'first'}:ckpt-0009"}))
    lm = ShellTrainConfig.model_validate({"epochs": 1, "student": {"kind": "causal-lm"},
                                          "init_from": str(tmp_path / "first")})
    with pytest.raises(ConfigError, match="holds a compact student"):
        ShellTraining(tmp_path / "c", tasks, lm)
    assert not any((tmp_path / name).exists() for name in "abc")  # fixing the source needs no new --run


def test_init_from_is_stored_absolute_and_a_lost_ancestor_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aios_rl.campaign.train import trained_task_ids

    monkeypatch.chdir(tmp_path)
    assert ShellTrainConfig(init_from="runs/a").init_from == str(tmp_path / "runs" / "a")
    assert ShellTrainConfig(init_from="runs/a:ckpt-0001").init_from == f"{tmp_path / 'runs' / 'a'}:ckpt-0001"
    # an ancestor that cannot be found is not read as "trained on nothing", and no store is made there
    with pytest.raises(ConfigError, match="is gone"):
        trained_task_ids(tmp_path / "gone")
    assert not (tmp_path / "gone").exists()


def test_a_run_continues_only_on_its_own_task_directory(tmp_path: Path) -> None:
    make_task(tmp_path / "a")
    make_task(tmp_path / "b")
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0)
    ShellTraining(tmp_path / "run", tmp_path / "a" / "tasks", config).close()
    with pytest.raises(ConfigError, match="not .*b/tasks"):
        ShellTraining(tmp_path / "run", tmp_path / "b" / "tasks", config)
    again = ShellTraining(tmp_path / "run", tmp_path / "a" / "tasks", config)
    assert again.plane.store.get_meta("tasks_dir") == str((tmp_path / "a" / "tasks").resolve())
    again.close()


def test_a_start_that_failed_after_creating_the_store_still_starts_from_init_from(
    tmp_path: Path, kill_once
) -> None:
    from aios_rl.campaign import train as train_module

    tasks, start, warmed = _warmed_first_run(tmp_path)
    killed = kill_once(train_module, "build_teacher")  # e.g. an API key not set yet: the store exists already
    with pytest.raises(killed):
        ShellTraining(tmp_path / "second", tasks, start)
    assert (tmp_path / "second" / "control.db").exists()
    second = ShellTraining(tmp_path / "second", tasks, start)  # the same command again
    try:
        assert all(torch.equal(warmed[k], v) for k, v in _weights(second).items())
        assert second.plane.load_checkpoint("ckpt-0000")[1]["init_from"] == f"{tmp_path / 'first'}:ckpt-0001"
    finally:
        second.close()


def test_a_start_killed_between_registering_and_initialising_its_first_checkpoint_resumes(
    tmp_path: Path, kill_once
) -> None:
    """A kill after ``ckpt-0000`` is registered and before ``lineage.initialized``: the same command again
    initialises the lineage on that checkpoint (the student it stored) instead of registering it twice."""
    tasks, start, warmed = _warmed_first_run(tmp_path)
    killed = kill_once(ControlPlane, "initialize")
    with pytest.raises(killed):
        ShellTraining(tmp_path / "second", tasks, start)
    second = ShellTraining(tmp_path / "second", tasks, start)  # the same command again
    try:
        lineage = second.plane.state.lineage
        assert (lineage.active, list(lineage.checkpoints)) == ("ckpt-0000", ["ckpt-0000"])
        assert all(torch.equal(warmed[k], v) for k, v in _weights(second).items())
        assert second.plane.load_checkpoint("ckpt-0000")[1]["init_from"] == f"{tmp_path / 'first'}:ckpt-0001"
    finally:
        second.close()


def test_a_model_path_for_a_compact_student_is_refused_before_the_run_exists(tmp_path: Path) -> None:
    from aios_rl.campaign.students import StudentConfig

    make_task(tmp_path)
    # as a --config file could give it
    config = ShellTrainConfig(student=StudentConfig(kind="compact", model_path=str(tmp_path)))
    with pytest.raises(ConfigError, match="set student.kind: causal-lm"):
        ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    assert not (tmp_path / "run").exists()


def test_student_settings_that_differ_from_the_start_checkpoint_are_refused(
    tmp_path: Path, model_dir: Path
) -> None:
    """The student comes from the start checkpoint, so a setting asked for that it does not have (another
    model, mode, LoRA or compact width) is refused rather than stored while another student trains."""
    from aios_rl.policy.tiny_lm import build_tiny_lm

    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    ShellTraining(tmp_path / "compact", tasks, ShellTrainConfig(epochs=1, warm_start_epochs=0)).close()
    wider = ShellTrainConfig.model_validate({"epochs": 1, "student": {"compact": {"hidden_size": 7}},
                                             "init_from": str(tmp_path / "compact")})
    with pytest.raises(ConfigError, match=r"student\.compact\.hidden_size"):
        ShellTraining(tmp_path / "a", tasks, wider)

    lm = {"kind": "causal-lm", "model_path": str(model_dir), "lora": True,
          "causal_lm": {"max_prompt_tokens": 1536}}
    ShellTraining(tmp_path / "lm", tasks, ShellTrainConfig.model_validate(
        {"epochs": 1, "warm_start_epochs": 0, "student": lm})).close()
    other = build_tiny_lm(tmp_path / "other-lm", seed=1)
    changes = (({"model_path": str(other)}, "student.model_path"),
               ({"lm_mode": "generate"}, "student.lm_mode"),
               ({"lora": False}, "student.lora"),
               ({"causal_lm": {"max_prompt_tokens": 512}}, r"student\.causal_lm\.max_prompt_tokens"))
    for change, needle in changes:
        asked = ShellTrainConfig.model_validate({"epochs": 1, "student": lm | change,
                                                 "init_from": str(tmp_path / "lm")})
        with pytest.raises(ConfigError, match=needle):
            ShellTraining(tmp_path / "b", tasks, asked)
    assert not any((tmp_path / name).exists() for name in "ab")
    # the same settings, or only the kind, start from it
    for name, student in (("c", lm), ("d", {"kind": "causal-lm"})):
        same = ShellTrainConfig.model_validate({"epochs": 1, "student": student,
                                                "init_from": str(tmp_path / "lm")})
        ShellTraining(tmp_path / name, tasks, same).close()


def test_student_settings_that_cannot_build_a_student_fail_before_the_run_exists(
    tmp_path: Path, model_dir: Path
) -> None:
    # A forgotten --model or a misspelt student.causal_lm key used to fail after the run directory had
    # stored the configuration, so the corrected command was refused ("trained with a different
    # configuration") although nothing had been trained.
    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    lm = {"kind": "causal-lm", "model_path": str(model_dir), "causal_lm": {"max_prompt_tokens": 1536}}
    for student, needle in (({"kind": "causal-lm"}, "needs --model"),
                            (lm | {"causal_lm": {"max_prompt_token": 1536}}, "max_prompt_token"),
                            (lm | {"model_path": str(tmp_path / "no-model")}, "neither a local directory")):
        with pytest.raises((ConfigError, PolicyError), match=needle):
            ShellTraining(run, tasks, ShellTrainConfig.model_validate({"epochs": 1, "student": student}))
        assert not run.exists()
    ShellTraining(run, tasks, ShellTrainConfig.model_validate({"epochs": 1, "student": lm})).close()


def test_a_float16_full_model_start_checkpoint_is_refused_before_the_run_exists(
    tmp_path: Path, model_dir: Path
) -> None:
    """A float16 full-model checkpoint (stored before such students were refused) still loads, but cannot
    train: a run started from it is refused with the trainer's message before its directory is created, so
    the corrected command needs no new --run."""
    from aios_rl.control.plane import ControlPlane

    make_task(tmp_path)
    tasks = tmp_path / "tasks"
    lm = {"kind": "causal-lm", "model_path": str(model_dir), "causal_lm": {"max_prompt_tokens": 1536}}
    ShellTraining(tmp_path / "lm", tasks, ShellTrainConfig.model_validate(
        {"epochs": 1, "warm_start_epochs": 0, "student": lm})).close()
    plane = ControlPlane(tmp_path / "lm")
    try:  # the initial student as an older version stored a float16 one
        tensors, meta = plane.load_checkpoint("ckpt-0000")
        meta["policy"]["config"]["dtype"] = "float16"
        half = {k: v.half() if k.startswith("policy/model.") else v for k, v in tensors.items()}
        plane.save_checkpoint("ckpt-0001", half, meta, parent="ckpt-0000")
    finally:
        plane.close()
    run = tmp_path / "run"
    config = ShellTrainConfig.model_validate({"epochs": 1, "student": {"kind": "causal-lm"},
                                              "init_from": f"{tmp_path / 'lm'}:ckpt-0001"})
    with pytest.raises(ConfigError, match="dtype float16 cannot train the full model"):
        ShellTraining(run, tasks, config)
    assert not run.exists()

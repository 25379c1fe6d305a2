"""`--teacher NAME[,FALLBACK...]` selects the oracle alone, the gateway over backends, or no teacher."""

from __future__ import annotations

import pytest

from aios_rl.campaign.train import ShellTrainConfig, build_teacher, teacher_backends
from aios_rl.contracts.errors import ConfigError
from aios_rl.envs.shell.oracle import ShellOracle
from aios_rl.teacher.gateway import TeacherGateway


def test_backend_lists() -> None:
    assert teacher_backends("none") == []
    assert teacher_backends("oracle") == ["oracle"]
    assert teacher_backends(" claude , codex,oracle ") == ["claude", "codex", "oracle"]
    for bad in ("", "none,oracle", ","):
        with pytest.raises(ConfigError):
            teacher_backends(bad)


def test_teacher_objects() -> None:
    assert build_teacher(ShellTrainConfig(teacher="none")) is None
    assert isinstance(build_teacher(ShellTrainConfig(teacher="oracle")), ShellOracle)
    gateway = build_teacher(ShellTrainConfig(teacher="gemini,oracle"))
    assert isinstance(gateway, TeacherGateway)
    assert gateway.backend == "gemini"
    gateway.close()


def test_unknown_backend_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'codex'"):
        build_teacher(ShellTrainConfig(teacher="codx"))


def test_gateway_cache_lives_in_the_run_directory(tmp_path) -> None:
    gateway = build_teacher(ShellTrainConfig(teacher="codex,oracle"), tmp_path)
    assert isinstance(gateway, TeacherGateway)
    gateway.close()
    assert (tmp_path / "teacher_cache.db").exists()


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"rl": False, "warm_start_epochs": 0}, "rl: false"),
        ({}, "the oracle warm start"),
        ({"warm_start_epochs": 0, "consolidation_passes": 2}, "consolidation_passes"),
        ({"warm_start_epochs": 0, "redistill_passes": 5}, "redistill_passes"),
    ],
)
def test_distill_coef_zero_is_refused_where_an_update_only_distils(settings: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        ShellTrainConfig.model_validate({"trainer": {"distill_coef": 0.0}} | settings)


def test_distill_coef_zero_is_fine_where_rl_trains() -> None:
    ShellTrainConfig.model_validate({"trainer": {"distill_coef": 0.0}, "warm_start_epochs": 0})
    ShellTrainConfig.model_validate({"trainer": {"distill_coef": 0.0}, "teacher": "none", "rl": False})
    ShellTrainConfig.model_validate({"trainer": {"distill_coef": 0.0}, "teacher": "claude,oracle"})


def test_a_distillation_update_with_distill_coef_zero_says_why() -> None:
    import torch

    from aios_rl.algos.distill import distill_batch_from, distill_update
    from aios_rl.algos.trainer import Trainer, TrainerConfig
    from aios_rl.contracts.episode import Observation
    from aios_rl.contracts.errors import TrainingError
    from aios_rl.policy.compact import CompactStudent, CompactStudentConfig

    batch = distill_batch_from([(Observation(text="o", candidates=["a", "b"]), "shell", ["a"], 1.0)])
    trainer = Trainer(CompactStudent(CompactStudentConfig()), TrainerConfig(distill_coef=0.0))
    with pytest.raises(TrainingError, match="distill_coef 0 has nothing to train"):
        distill_update(trainer, batch, generator=torch.Generator().manual_seed(0))


def test_the_oracle_is_not_watched_for_disagreement_behind_a_gateway(tmp_path) -> None:
    import sys
    from pathlib import Path

    from aios_rl.campaign.train import ShellTraining

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    make_task(tmp_path)
    config = ShellTrainConfig.model_validate({
        "epochs": 1, "tasks_per_epoch": 1, "group_size": 2, "workers": 1, "teacher": "oracle,claude",
        "warm_start_epochs": 0,
    })
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        training.run_epoch(1)
        # every answer was the oracle's
        assert training.monitor.metrics()["teacher/disagreement_samples"] == 0
    finally:
        training.close()


def test_a_run_with_an_api_key_in_its_config_resumes_with_the_key_given_again(tmp_path) -> None:
    from aios_rl.campaign.online_config import CampaignConfig, resume_config
    from aios_rl.campaign.train_config import TRAIN_CONFIG_KEY, resolve_stored_config
    from aios_rl.control.plane import ControlPlane
    from aios_rl.teacher.gateway import TeacherConfig
    from aios_rl.teacher.http_backend import OpenAIBackendConfig

    teacher = TeacherConfig(backend="openai", openai=OpenAIBackendConfig(api_key="sk-real"))
    asked = ShellTrainConfig(teacher="openai", teacher_config=teacher)
    plane = ControlPlane(tmp_path / "run")
    try:
        resolve_stored_config(plane, asked)
        assert "sk-real" not in str(plane.store.get_meta(TRAIN_CONFIG_KEY))
        resumed = resolve_stored_config(plane, asked)  # the same command again
        assert resumed.teacher_config.openai.api_key.get_secret_value() == "sk-real"
        stored = ShellTrainConfig.model_validate(plane.store.get_meta(TRAIN_CONFIG_KEY))
        assert stored.teacher_config.openai.api_key is None  # the mask is never sent as a key
    finally:
        plane.close()
    campaign = CampaignConfig(teacher="openai", teacher_config=teacher)
    kept = CampaignConfig.model_validate(campaign.model_dump(mode="json"))
    again = resume_config(kept, campaign, {})
    assert again.teacher_config.openai.api_key.get_secret_value() == "sk-real"


def test_a_run_stored_under_the_previous_fold_rules_resumes_with_the_same_command(tmp_path) -> None:
    from aios_rl.campaign.train_config import TRAIN_CONFIG_KEY, resolve_stored_config
    from aios_rl.control.plane import ControlPlane

    plane = ControlPlane(tmp_path / "run")
    try:
        stored = ShellTrainConfig().model_dump(mode="json")
        stored["control"]["semantics"] = 2  # what `shell train` stored before control.semantics 3
        plane.store.set_meta(TRAIN_CONFIG_KEY, stored)
        assert resolve_stored_config(plane, ShellTrainConfig()).control.semantics == 2
    finally:
        plane.close()


def test_an_unknown_backend_is_refused_before_the_run_directory_exists(tmp_path) -> None:
    import sys
    from pathlib import Path

    from aios_rl.campaign.train import ShellTraining

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    make_task(tmp_path)
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="codx")
    with pytest.raises(ConfigError, match="did you mean 'codex'"):
        ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    assert not (tmp_path / "run").exists()  # so the corrected command starts the run afresh
    repeated = config.model_copy(update={"teacher": "oracle,oracle"})
    with pytest.raises(ConfigError, match="names oracle more than once"):
        ShellTraining(tmp_path / "run", tmp_path / "tasks", repeated)
    assert not (tmp_path / "run").exists()  # it stored 'oracle,oracle', and refused the corrected command


def test_a_capitalised_oracle_is_the_oracle_first_as_written_lowercase(tmp_path) -> None:
    # `--teacher Oracle` passed the case-insensitive name check, but every later "is the oracle first?"
    # compared the spelling as written: the run got the oracle behind the gateway with no warm start and
    # no demonstration replay. The configuration now stores the canonical spelling.
    import sys
    from pathlib import Path

    from aios_rl.campaign.train import ShellTraining
    from aios_rl.envs.shell.oracle import ShellOracle

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    assert ShellTrainConfig(teacher="Oracle").teacher == "oracle"
    assert ShellTrainConfig(teacher=" Claude-Code , ORACLE").teacher == "claude,oracle"
    assert ShellTrainConfig(teacher="None").teacher == "none"
    make_task(tmp_path)
    config = ShellTrainConfig(epochs=1, teacher="Oracle")
    training = ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    try:
        assert isinstance(training.teacher, ShellOracle)
        assert training.oracle_first is True
    finally:
        training.close()
    with pytest.raises(ConfigError, match="unknown teacher backend 'Orcale'"):
        ShellTraining(tmp_path / "run2", tmp_path / "tasks", ShellTrainConfig(epochs=1, teacher="Orcale"))
    assert not (tmp_path / "run2").exists()


class _Contrarian:
    """A judge that always contradicts the verifier (the prompt states its outcome)."""

    model = "contrarian"

    def complete(self, prompt: str, timeout_s: float):  # noqa: ANN201 - a PromptBackend
        import json

        from aios_rl.teacher.backend import BackendReply

        shaping = 0.5 if "VERIFICATION:\noutcome: failure" in prompt else -0.5
        return BackendReply(json.dumps({"critique": "c", "shaping": shaping, "confidence": 0.9}))


def _contrarian_training(run, tasks, epochs: int, min_samples: int = 4):  # noqa: ANN202
    from aios_rl.campaign.train import ShellTraining
    from aios_rl.envs.shell.oracle import ShellOracle
    from aios_rl.teacher.calibrate import MonitorConfig

    config = ShellTrainConfig(
        epochs=epochs, tasks_per_epoch=1, group_size=2, workers=1, teacher="claude", warm_start_epochs=0,
        monitor=MonitorConfig(window=4, min_samples=min_samples, threshold=0.3),
    )
    training = ShellTraining(run, tasks, config)
    training.teacher.close()
    training.teacher = TeacherGateway(config.teacher_config.model_copy(update={"backend": "claude"}),
                                      backends={"claude": _Contrarian()}, oracle=ShellOracle())
    return training


def test_the_disagreement_window_survives_a_resume(tmp_path) -> None:
    # The monitor's window started empty in every process, so a run resumed each epoch (`--epochs N` then
    # `--epochs N+1`) with fewer than min_samples judged episodes per epoch never raised the alarm, however
    # wrong its judge: here 2 disagreeing episodes per epoch against min_samples 4.
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    make_task(tmp_path)
    run, tasks = tmp_path / "run", tmp_path / "tasks"
    for epoch in (1, 2):
        training = _contrarian_training(run, tasks, epoch)
        try:
            training.run_epoch(epoch)
            samples = training.monitor.metrics()["teacher/disagreement_samples"]
            alarms = [e for e in training.plane.store.events() if e.kind == "teacher.alarm"]
        finally:
            training.close()
    assert samples == 4
    assert len(alarms) == 1 and alarms[0].payload["rate"] == 1.0


def test_a_run_stored_with_a_capitalised_oracle_resumes_without_a_warm_start_after_its_epochs(
    tmp_path, edit_stored_config
) -> None:
    # Before the teacher spec was stored canonically, `--teacher Oracle` ran its epochs without the oracle
    # warm start. Resumed now it reads as the oracle first; its warm start (before epoch 1, once per run)
    # must not be distilled onto a student that already trained its RL epochs.
    import sys
    from pathlib import Path

    from aios_rl.campaign.train import ShellTraining

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    make_task(tmp_path)
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    config = ShellTrainConfig(epochs=1, warm_start_epochs=2, teacher="none", group_size=2)
    training = ShellTraining(run, tasks, config)
    try:
        training.run_epoch(1)
    finally:
        training.close()
    edit_stored_config(run, lambda settings: settings.update(teacher="Oracle"))  # as that version stored it
    asked = ShellTrainConfig(epochs=2, warm_start_epochs=2, teacher="Oracle", group_size=2)  # as typed
    resumed = ShellTraining(run, tasks, asked)
    try:
        assert resumed.epochs_done() == 1
        assert resumed.warm_start() is None
    finally:
        resumed.close()


def test_an_alarm_a_kill_cut_off_from_its_episode_is_recorded_on_resume(tmp_path, monkeypatch) -> None:
    # The episode that pushed the rate over the threshold was stored, then the process died before its
    # teacher.alarm event: resumed, the stored episode is not observed again (the restored monitor replays
    # it, already alarmed), so that alarm was never recorded.
    import sys
    from pathlib import Path

    from aios_rl.control.plane import ControlPlane

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    class Killed(BaseException):
        pass

    def killed(self, kind, payload, **kwargs):  # noqa: ANN001, ANN202, ARG001
        raise Killed

    make_task(tmp_path)
    run, tasks = tmp_path / "run", tmp_path / "tasks"
    training = _contrarian_training(run, tasks, 1, min_samples=2)
    try:
        with monkeypatch.context() as patch, pytest.raises(Killed):
            patch.setattr(ControlPlane, "raise_alarm", killed)
            training.run_epoch(1)
        assert training.plane.state.episodes_recorded == 2  # the alarm's episode is stored, its alarm not
    finally:
        training.close()
    training = _contrarian_training(run, tasks, 1, min_samples=2)
    try:
        training.run_epoch(1)
        alarms = [e for e in training.plane.store.events() if e.kind == "teacher.alarm"]
        assert training.monitor.metrics()["teacher/disagreement_alarms"] == 1
    finally:
        training.close()
    assert len(alarms) == 1 and alarms[0].payload["rate"] == 1.0

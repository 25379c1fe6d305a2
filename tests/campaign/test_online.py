"""Starting an online campaign: a refused start leaves the run directory as free as it found it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aios_rl.campaign.online import OnlineCampaign
from aios_rl.campaign.online_config import CampaignConfig
from aios_rl.contracts.errors import AiosRlError
from aios_rl.control.events import ControlConfig
from aios_rl.control.ledger import LedgerConfig
from aios_rl.storage.db import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import make_task  # noqa: E402


@pytest.mark.parametrize("bad", ["missing", "empty", "none"])
def test_a_start_refused_for_its_tasks_can_be_retried_with_the_right_ones(tmp_path: Path, bad: str) -> None:
    make_task(tmp_path)
    (tmp_path / "empty").mkdir()
    run = tmp_path / "run"
    wrong = {"missing": tmp_path / "nosuch", "empty": tmp_path / "empty", "none": None}[bad]
    with pytest.raises(AiosRlError):
        OnlineCampaign(run, wrong, CampaignConfig(teacher="none"))
    # the same command with the task directory (and another batch size) fixed now starts the campaign
    config = CampaignConfig(teacher="none", control=ControlConfig(ledger=LedgerConfig(batch_size=2)))
    campaign = OnlineCampaign(run, tmp_path / "tasks", config)
    try:
        assert campaign.plane.config == config.control and len(campaign.tasks) == 1
    finally:
        campaign.close()


def test_a_campaign_and_shell_train_refuse_a_directory_without_train_tasks_alike(tmp_path: Path) -> None:
    from aios_rl.campaign.train import ShellTrainConfig, ShellTraining
    from aios_rl.contracts.errors import ConfigError

    empty = tmp_path / "empty"
    empty.mkdir()
    messages = []
    for start in (lambda: OnlineCampaign(tmp_path / "run-c", empty, CampaignConfig(teacher="none")),
                  lambda: ShellTraining(tmp_path / "run-t", empty, ShellTrainConfig(teacher="none"))):
        with pytest.raises(ConfigError, match="holds no train-split tasks") as refused:
            start()
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
    assert not (tmp_path / "run-c").exists() and not (tmp_path / "run-t").exists()


def test_a_start_killed_before_it_stored_its_control_settings_starts_again(
    tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]]
) -> None:
    make_task(tmp_path)
    run, config = tmp_path / "run", CampaignConfig(
        teacher="none", control=ControlConfig(ledger=LedgerConfig(batch_size=2))
    )
    # the first meta write of a fresh start is the control settings, right after control.db is created
    killed = kill_once(RunStore, "set_meta")
    with pytest.raises(killed):
        OnlineCampaign(run, tmp_path / "tasks", config)
    assert (run / "control.db").exists()
    campaign = OnlineCampaign(run, tmp_path / "tasks", config)  # the same command again
    try:
        assert campaign.plane.config == config.control
    finally:
        campaign.close()
    reopened = OnlineCampaign(run, None, config, resume=True)
    assert reopened.plane.config == config.control
    reopened.close()


def test_a_start_refused_for_its_teacher_can_be_retried_with_another(tmp_path: Path) -> None:
    make_task(tmp_path)
    run = tmp_path / "run"
    with pytest.raises(AiosRlError, match="unknown teacher backend 'oracel'"):
        OnlineCampaign(run, tmp_path / "tasks", CampaignConfig(teacher="oracel"))
    campaign = OnlineCampaign(run, tmp_path / "tasks", CampaignConfig(teacher="none"))
    try:
        assert campaign.config.teacher == "none" and campaign.teacher is None
    finally:
        campaign.close()


def test_a_start_refused_for_its_student_commits_no_campaign(tmp_path: Path) -> None:
    # A campaign's student used to be built only when it ran, after the campaign was committed, so a
    # causal-lm student without a model (or a misspelt student setting) left a campaign that could
    # neither start again ("already holds a campaign") nor resume with the corrected --config.
    from aios_rl.campaign.students import StudentConfig

    make_task(tmp_path)
    run = tmp_path / "run"
    for student in (StudentConfig(kind="causal-lm"), StudentConfig(compact={"bukets": 8})):
        with pytest.raises(AiosRlError, match="needs --model|student.compact.bukets"):
            OnlineCampaign(run, tmp_path / "tasks", CampaignConfig(teacher="none", student=student))
    campaign = OnlineCampaign(run, tmp_path / "tasks", CampaignConfig(teacher="none"))
    try:
        assert campaign.config.student.kind == "compact"
    finally:
        campaign.close()


@pytest.mark.parametrize("where", ["complete_update", "append_metrics"])
def test_an_update_killed_before_its_metrics_line_writes_it_once_on_resume(
    tmp_path: Path, kill_once: Callable[[object, str], type[BaseException]], where: str
) -> None:
    from aios_rl.campaign import online
    from aios_rl.campaign.metrics import read_metrics
    from aios_rl.control.plane import ControlPlane

    make_task(tmp_path)
    control = ControlConfig(ledger=LedgerConfig(batch_size=1))
    config = CampaignConfig(teacher="none", max_tasks=2, control=control)
    killed = kill_once(ControlPlane if where == "complete_update" else online, where)
    campaign = OnlineCampaign(tmp_path / "run", tmp_path / "tasks", config)
    with pytest.raises(killed):
        campaign.run()
    campaign.close()
    resumed = OnlineCampaign(tmp_path / "run", None, config, resume=True)
    try:
        resumed.run()
    finally:
        resumed.close()
    updates = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["phase"] == "campaign_update"]
    assert len(updates) == 1 and "train/loss" in updates[0]
    assert updates[0].get("resumed") == (1.0 if where == "complete_update" else None)


def test_resuming_below_the_slots_already_run_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_task(tmp_path)
    control = ControlConfig(ledger=LedgerConfig(batch_size=1))
    config = CampaignConfig(teacher="none", max_tasks=2, control=control)
    campaign = OnlineCampaign(tmp_path / "run", tmp_path / "tasks", config)
    try:
        campaign.run()
    finally:
        campaign.close()
    resumed = OnlineCampaign(tmp_path / "run", None, config.model_copy(update={"max_tasks": 1}), resume=True)
    try:
        with caplog.at_level("WARNING"):
            summary = resumed.run()
    finally:
        resumed.close()
    assert summary.tasks_run == 2 and "more than --max-tasks 1" in caplog.text


def test_a_capitalised_oracle_teacher_is_the_oracle(tmp_path: Path) -> None:
    from aios_rl.envs.shell.oracle import ShellOracle

    make_task(tmp_path)
    assert CampaignConfig(teacher="Oracle").teacher == "oracle"
    campaign = OnlineCampaign(tmp_path / "run", tmp_path / "tasks", CampaignConfig(teacher="Oracle"))
    try:
        assert isinstance(campaign.teacher, ShellOracle)
    finally:
        campaign.close()


def test_a_start_over_a_refused_one_holds_the_writer_lock_throughout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A start refused before its campaign meta left control.db holding that start's control settings; the
    # retry with other settings stored its own, then closed its control plane and opened it again: between
    # the two, the run's writer lock was free and another process could take the run.
    import fcntl
    import subprocess

    from aios_rl.control.plane import ControlPlane
    from aios_rl.storage import run_lock

    make_task(tmp_path)
    run = tmp_path / "run"
    ControlPlane(run, ControlConfig()).close()  # what the refused start left: its settings, no campaign
    probe = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
             f"fcntl.flock(fd, {fcntl.LOCK_EX | fcntl.LOCK_NB})\n")
    taken = []
    release = run_lock.WriterLock.release

    def release_then_let_another_process_try(self: run_lock.WriterLock) -> None:
        release(self)
        grab = subprocess.run([sys.executable, "-c", probe, str(self.path)], capture_output=True, check=False)
        if grab.returncode == 0:
            taken.append(self.path)

    monkeypatch.setattr(run_lock.WriterLock, "release", release_then_let_another_process_try)
    config = CampaignConfig(teacher="none", control=ControlConfig(ledger=LedgerConfig(batch_size=2)))
    campaign = OnlineCampaign(run, tmp_path / "tasks", config)
    try:
        assert campaign.plane.config == config.control
        assert taken == [], "another process could take the run while its campaign was starting"
    finally:
        monkeypatch.undo()
        campaign.close()
    reopened = OnlineCampaign(run, None, config, resume=True)  # the new settings are the run's
    assert reopened.plane.config == config.control
    reopened.close()


@pytest.mark.parametrize(
    ("student", "needle"),
    [
        ({"kind": "causal-lm"}, "needs --model PATH"),
        ({"kind": "causal-lm", "model_path": "no/such-model"}, "neither a local directory nor in the"),
        ({"compact": {"bukets": 8}}, "student.compact.bukets"),
    ],
)
def test_a_start_refused_for_its_student_can_be_retried_with_another(
    tmp_path: Path, student: dict, needle: str
) -> None:
    from aios_rl.campaign.students import StudentConfig

    make_task(tmp_path)
    run = tmp_path / "run"
    config = CampaignConfig(teacher="none", student=StudentConfig(**student))
    with pytest.raises(AiosRlError, match=needle):
        OnlineCampaign(run, tmp_path / "tasks", config)
    assert not run.exists()  # refused before the store exists: the corrected command starts afresh
    campaign = OnlineCampaign(run, tmp_path / "tasks", CampaignConfig(teacher="none"))
    campaign.close()


def test_an_update_line_carries_the_act_metrics_of_the_students_runs_before_it(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The update line's ``policy/*`` is the mean of what the active student's ``act`` calls reported since
    the previous line, weighted by their observations (here slot 0's episode, the only run before it)."""
    from aios_rl.campaign.metrics import read_metrics
    from aios_rl.campaign.students import StudentConfig
    from aios_rl.policy.causal_lm import CausalLMStudent

    make_task(tmp_path)
    reported: list[tuple[int, dict[str, float]]] = []
    act = CausalLMStudent.act

    def recording(self, observations, *args, **kwargs):  # type: ignore[no-untyped-def]
        samples = act(self, observations, *args, **kwargs)
        reported.append((len(observations), dict(self.last_act_metrics)))
        return samples

    monkeypatch.setattr(CausalLMStudent, "act", recording)
    before_update: list[int] = []
    update = OnlineCampaign._update
    monkeypatch.setattr(OnlineCampaign, "_update", lambda self: (before_update.append(len(reported)),
                                                                 update(self))[1])
    student = StudentConfig(kind="causal-lm", model_path=str(model_dir), causal_lm={"max_prompt_tokens": 320})
    config = CampaignConfig.model_validate({
        "teacher": "none", "max_tasks": 2, "warm_start_epochs": 0, "student": student.model_dump(),
        "env": {"max_steps": 2, "max_candidates": 3},
        "control": ControlConfig(ledger=LedgerConfig(batch_size=1)).model_dump(),
    })
    campaign = OnlineCampaign(tmp_path / "run", tmp_path / "tasks", config)
    try:
        campaign.run()
    finally:
        campaign.close()
    [line] = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["phase"] == "campaign_update"]
    acts = reported[: before_update[0]]
    assert acts and all(m.keys() == {"policy/prompt_truncated_frac"} for _, m in acts)
    share = sum(n * m["policy/prompt_truncated_frac"] for n, m in acts) / sum(n for n, _ in acts)
    assert line["policy/prompt_truncated_frac"] == pytest.approx(share)
    assert share > 0  # a 320-token limit cuts the prompts: a number a missing key would not show


def test_a_start_asking_for_ppo_is_refused_since_campaign_updates_are_no_ppo(tmp_path: Path) -> None:
    # A campaign's updates are always offline_update's importance-weighted policy gradient: trainer.algo
    # was read by nothing, so `trainer: {algo: ppo}` started a campaign that silently never ran PPO.
    from aios_rl.algos.trainer import TrainerConfig
    from aios_rl.contracts.errors import ConfigError

    make_task(tmp_path)
    run = tmp_path / "run"
    ppo = CampaignConfig(teacher="none", trainer=TrainerConfig(algo="ppo"))
    with pytest.raises(ConfigError, match="trainer.algo 'ppo'"):
        OnlineCampaign(run, tmp_path / "tasks", ppo)
    assert not run.exists()  # refused before the store exists
    campaign = OnlineCampaign(run, tmp_path / "tasks", CampaignConfig(teacher="none"))
    campaign.close()


@pytest.mark.parametrize(
    "unused",
    [{"advantage": "rloo"}, {"eps_low": 0.1}, {"eps_high": 0.4}, {"agg": "seq-mean-token-mean"},
     {"value_coef": 1.0}, {"value_clip": 0.2}, {"gamma": 0.9}, {"lam": 0.9}, {"step_advantage_coef": 0.0},
     {"step_gamma": 0.5}, {"self_imitation_coef": 0.0}],
)
def test_a_start_setting_trainer_fields_campaign_updates_never_read_is_refused(
    tmp_path: Path, unused: dict
) -> None:
    # offline_update reads lr, update_epochs, minibatch_size, the KL/entropy/distill/negative-lane weights,
    # max_grad_norm and the replay bounds; the clipped surrogate, GAE, GiGPO and self-imitation settings were
    # accepted and silently ignored.
    from aios_rl.algos.trainer import TrainerConfig
    from aios_rl.contracts.errors import ConfigError

    make_task(tmp_path)
    run, [(name, value)] = tmp_path / "run", unused.items()
    config = CampaignConfig(teacher="none", trainer=TrainerConfig(lr=3e-4, kl_coef=0.1, **unused))
    with pytest.raises(ConfigError, match=rf"trainer\.{name} \({value!r}\).*never read") as refused:
        OnlineCampaign(run, tmp_path / "tasks", config)
    assert "trainer.lr" not in str(refused.value) and "trainer.kl_coef" not in str(refused.value)
    assert not run.exists()  # refused before the store exists


def test_trainer_fields_the_updates_read_or_left_at_their_defaults_start_a_campaign(tmp_path: Path) -> None:
    from aios_rl.algos.trainer import TrainerConfig

    make_task(tmp_path)
    defaults = TrainerConfig()
    trainer = TrainerConfig(lr=3e-4, update_epochs=3, minibatch_size=8, kl_coef=0.1, entropy_coef=0.0,
                            distill_coef=0.5, negative_kl_coef=1.0, max_grad_norm=0.5, offline_ratio_clip=3.0,
                            max_staleness=2, eps_low=defaults.eps_low, gamma=defaults.gamma)  # named defaults
    config = CampaignConfig(teacher="none", trainer=trainer)
    campaign = OnlineCampaign(tmp_path / "run", tmp_path / "tasks", config)
    assert campaign.config.trainer == trainer
    campaign.close()


def test_a_campaign_stored_with_trainer_fields_it_never_reads_still_resumes(tmp_path: Path) -> None:
    from aios_rl.algos.trainer import TrainerConfig
    from aios_rl.campaign.online_config import CAMPAIGN_KEY

    make_task(tmp_path)
    run, tasks = tmp_path / "run", tmp_path / "tasks"
    control = ControlConfig(ledger=LedgerConfig(batch_size=1))
    OnlineCampaign(run, tasks, CampaignConfig(teacher="none", max_tasks=1, control=control)).close()
    with RunStore(run / "control.db") as store:  # as a version that accepted them stored it
        meta = store.get_meta(CAMPAIGN_KEY)
        meta["config"]["trainer"] |= {"eps_low": 0.1, "gamma": 0.9}
        store.set_meta(CAMPAIGN_KEY, meta)
    stored = CampaignConfig(teacher="none", max_tasks=1, control=control,
                            trainer=TrainerConfig(eps_low=0.1, gamma=0.9))
    campaign = OnlineCampaign(run, tasks, stored, resume=True)
    try:
        assert campaign.config.trainer.eps_low == 0.1
        assert campaign.run().tasks_run == 1
    finally:
        campaign.close()

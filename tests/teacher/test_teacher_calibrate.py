"""Judge governance: calibration against the oracle and the online disagreement alarm."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
from teacher_fakes import make_episode, make_task

from aios_rl.contracts.episode import Episode, Task, TeacherSignal
from aios_rl.contracts.errors import ConfigError
from aios_rl.teacher.backend import BackendReply
from aios_rl.teacher.calibrate import (
    DisagreementMonitor,
    MonitorConfig,
    agrees,
    calibrate,
    pearson,
)
from aios_rl.teacher.gateway import TeacherConfig, TeacherGateway


class OutcomeOracle:
    """Shaping +0.8 for success, +0.3 partial, -0.6 failure, 0 blocked (a stand-in for ShellOracle)."""

    SHAPING = {"success": 0.8, "partial": 0.3, "failure": -0.6, "blocked": 0.0}

    def signal(self, task: Task, episode: Episode) -> TeacherSignal:
        shaping = self.SHAPING[episode.outcome]
        return TeacherSignal(status="complete", backend="oracle", shaping=shaping, confidence=1.0)


class ContrarianBackend:
    """A deliberately wrong judge: praises failures, condemns successes (reads the outcome in the prompt)."""

    model = "contrarian"

    def complete(self, prompt: str, timeout_s: float) -> BackendReply:
        shaping = -0.7 if "outcome: success" in prompt or "outcome: partial" in prompt else 0.7
        return BackendReply(f'{{"critique": "x", "shaping": {shaping}, "confidence": 0.9}}')


class FaithfulBackend:
    model = "faithful"

    def complete(self, prompt: str, timeout_s: float) -> BackendReply:
        shaping = 0.6 if "outcome: success" in prompt else -0.5 if "outcome: failure" in prompt else 0.1
        boundary = "true" if "outcome: partial" in prompt else "false"
        return BackendReply(f'{{"shaping": {shaping}, "confidence": 0.9, "boundary": {boundary}}}')


def gold() -> list[tuple[Task, Episode]]:
    task = make_task()
    outcomes = ["success", "failure"] * 4 + ["partial", "blocked"]
    return [(task, make_episode(task, outcome=o, episode_id=f"g{i}")) for i, o in enumerate(outcomes)]


def gateway(backend: object) -> TeacherGateway:
    config = TeacherConfig(backend="openai")
    return TeacherGateway(config, backends={"openai": backend})  # type: ignore[dict-item]


def test_wrong_teacher_gets_low_agreement_and_fails() -> None:
    report = calibrate(gateway(ContrarianBackend()), OutcomeOracle(), gold())
    assert (report.n, report.n_valid, report.n_scored) == (10, 10, 9)  # blocked has no sign
    assert report.agreement == pytest.approx(0.0)
    assert report.pearson is not None and report.pearson < -0.9
    assert not report.passed and any("agreement" in r for r in report.reasons)
    assert len(report.disagreements) == 9 and "g9" not in report.disagreements


def test_faithful_teacher_passes() -> None:
    report = calibrate(gateway(FaithfulBackend()), OutcomeOracle(), gold())
    assert report.agreement == pytest.approx(1.0)
    assert report.pearson is not None and report.pearson > 0.9
    assert report.boundary_rate == pytest.approx(0.1)
    assert report.passed and report.reasons == [] and report.teacher_statuses == {"complete": 10}


def test_failing_teacher_is_counted_not_scored() -> None:
    class Down:
        model = "down"

        def complete(self, prompt: str, timeout_s: float) -> BackendReply:
            raise TimeoutError("no")

    report = calibrate(gateway(Down()), OutcomeOracle(), gold())
    assert report.n_valid == 0 and report.agreement is None and report.pearson is None
    assert report.teacher_statuses == {"failed_all_backends": 10} and not report.passed


def test_verification_outcome_overrides_recorded_outcome() -> None:
    task = make_task()
    episode = make_episode(task, outcome="success").model_copy(update={"outcome": "blocked"})
    signal = TeacherSignal(status="complete", backend="x", shaping=0.4, confidence=1)
    assert agrees(signal, episode) is True  # verification (completed) says success
    assert agrees(signal.model_copy(update={"shaping": 0.0}), episode) is False  # abstaining is not agreeing
    assert agrees(signal.model_copy(update={"status": "invalid_response"}), episode) is None


def test_pearson_matches_numpy_on_random_inputs() -> None:
    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(2, 30)
        xs = [rng.uniform(-1, 1) for _ in range(n)]
        ys = [x * rng.uniform(-2, 2) + rng.gauss(0, 0.5) for x in xs]
        assert pearson(xs, ys) == pytest.approx(float(np.corrcoef(xs, ys)[0, 1]), abs=1e-9)
    assert pearson([1.0, 1.0, 1.0], [0.0, 1.0, 2.0]) is None and pearson([1.0], [2.0]) is None


def test_monitor_raises_one_alarm_when_the_teacher_goes_wrong(caplog: pytest.LogCaptureFixture) -> None:
    task = make_task()
    monitor = DisagreementMonitor(MonitorConfig(window=10, threshold=0.3, min_samples=5))
    good = TeacherSignal(status="complete", backend="claude", shaping=0.5, confidence=1)
    bad = good.model_copy(update={"shaping": -0.5})
    success = make_episode(task, outcome="success")
    for _ in range(10):
        assert monitor.observe(success, good) is None
    assert monitor.metrics()[DisagreementMonitor.METRIC] == 0.0
    alarms = []
    with caplog.at_level(logging.WARNING):
        for _ in range(8):
            alarms.append(monitor.observe(success, bad))
    fired = [a for a in alarms if a is not None]
    assert len(fired) == 1 and alarms.index(fired[0]) == 3  # 4 of 10 disagree: 0.4 > 0.3
    alarm = fired[0]
    assert alarm.kind == "teacher.disagreement_alarm" and alarm.payload()["rate"] == pytest.approx(0.4)
    assert alarm.backend == "claude" and monitor.rate == pytest.approx(0.8)
    assert any("disagrees with verification" in r.getMessage() for r in caplog.records)
    for _ in range(10):  # recovers, then goes wrong again: a second alarm
        monitor.observe(success, good)
    assert monitor.rate == 0.0
    assert [monitor.observe(success, bad) for _ in range(4)][-1] is not None
    assert monitor.metrics()["teacher/disagreement_alarms"] == 2


def test_monitor_ignores_unscorable_and_waits_for_min_samples() -> None:
    task = make_task()
    monitor = DisagreementMonitor(MonitorConfig(window=50, threshold=0.3, min_samples=5))
    bad = TeacherSignal(status="complete", backend="x", shaping=-1, confidence=1)
    failed = TeacherSignal(status="failed_all_backends", backend="x")
    success = make_episode(task, outcome="success")
    blocked = make_episode(task, outcome="blocked")
    assert monitor.observe(success, failed) is None and monitor.observe(blocked, bad) is None
    assert monitor.metrics()["teacher/disagreement_samples"] == 0
    results = [monitor.observe(success, bad) for _ in range(5)]
    assert results[:4] == [None] * 4 and results[4] is not None
    # The episode's own signal is used when none is given.
    assert monitor.observe(success.model_copy(update={"teacher_signal": bad})) is None  # already alarmed
    assert monitor.metrics()["teacher/disagreement_samples"] == 6


def test_a_window_smaller_than_min_samples_is_a_config_error() -> None:
    # The window never holds more than `window` samples, so with min_samples > window the alarm could never
    # fire: window=10 with the default min_samples=20 silently disabled the monitor.
    with pytest.raises(ConfigError, match="min_samples"):
        MonitorConfig(window=10)
    with pytest.raises(ConfigError, match="min_samples"):
        MonitorConfig(window=50, min_samples=51)
    assert MonitorConfig(window=20).min_samples == 20


def test_a_restored_monitor_goes_on_where_it_was(caplog: pytest.LogCaptureFixture) -> None:
    task = make_task()
    bad = TeacherSignal(status="complete", backend="x", shaping=-1, confidence=1)
    wrong = make_episode(task, outcome="success").model_copy(update={"teacher_signal": bad})
    unjudged = make_episode(task, outcome="success")
    config = MonitorConfig(window=10, threshold=0.3, min_samples=5)
    before = DisagreementMonitor(config)
    before.restore([wrong, unjudged, wrong])  # 2 scored, under min_samples: no alarm yet
    assert before.metrics()["teacher/disagreement_samples"] == 2
    assert [before.observe(wrong) for _ in range(3)][-1] is not None  # the 5th fires
    after = DisagreementMonitor(config)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        after.restore([wrong] * 6)  # already alarmed before the resume: neither logged nor raised again
    assert not caplog.records and after.rate == 1.0
    assert after.observe(wrong) is None
    # The count of alarms raised so far is the run's recorded one, not what fired during the replay.
    assert after.metrics()["teacher/disagreement_alarms"] == 0
    resumed = DisagreementMonitor(config)
    resumed.restore([wrong] * 6, alarms=3)
    assert resumed.metrics()["teacher/disagreement_alarms"] == 3

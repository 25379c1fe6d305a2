"""Admission: each check rejects on its own, and the source fingerprint sees a changed task repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from aios_rl.campaign.admission import admission, source_fingerprint, with_admission
from aios_rl.contracts.episode import Episode, Observation, Step, Task, TeacherSignal, Verification


def episode(
    *,
    completed: bool = True,
    steps: int = 2,
    ended: bool = True,
    invalid: bool = False,
    teacher: str | None = "complete",
) -> Episode:
    trajectory = [
        Step(
            observation=Observation(text="o", candidates=["a", "b"]),
            action="a",
            logprob=-0.7,
            entropy=0.6,
            info={"invalid_action": invalid},
            truncated=ended and i == steps - 1,
        )
        for i in range(steps)
    ]
    signal = TeacherSignal(status=teacher, backend="oracle") if teacher else None
    return Episode(
        environment="shell",
        task_id="t",
        trajectory=trajectory,
        outcome="failure",
        reward=-1.0,
        env_reward=-1.0,
        policy_version="ckpt-0000",
        teacher_signal=signal,
        verification=Verification(
            completed=completed,
            outcome="failure" if completed else "blocked",
            evidence={} if completed else {"error": "sandbox died"},
        ),
    )


def test_a_clean_episode_is_admitted() -> None:
    assert admission(episode(), isolation_held=True, require_teacher=True) == ("admitted", "")


@pytest.mark.parametrize(
    ("kwargs", "isolation", "require", "needle"),
    [
        ({"completed": False}, True, False, "verification did not complete: sandbox died"),
        ({"steps": 0}, True, False, "no steps"),
        ({"ended": False}, True, False, "did not end"),
        ({"invalid": True}, True, False, "every action was invalid"),
        ({}, False, False, "sandbox isolation"),
        ({"teacher": "failed_all_backends"}, True, True, "teacher status failed_all_backends"),
        ({"teacher": None}, True, True, "no teacher signal"),
    ],
)
def test_each_check_rejects(kwargs: dict, isolation: bool, require: bool, needle: str) -> None:
    status, reason = admission(episode(**kwargs), isolation_held=isolation, require_teacher=require)
    assert status == "rejected" and needle in reason


def test_teacher_failure_is_fine_when_not_required() -> None:
    bad = episode(teacher="invalid_response")
    assert admission(bad, isolation_held=True, require_teacher=False)[0] == "admitted"
    stored = with_admission(bad, "rejected", "why")
    assert (stored.admission_status, stored.admission_reason, stored.episode_id) == (
        "rejected",
        "why",
        bad.episode_id,
    )


def test_source_fingerprint_sees_a_changed_repository(tmp_path: Path) -> None:
    repo = tmp_path / "task" / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "mod.py").write_text("x = 1\n")
    (repo / "tests" / "test_mod.py").write_text("def test(): pass\n")
    task = Task(
        task_id="t",
        environment="shell",
        family="failing_tests",
        split="train",
        prompt="fix",
        spec={"task_dir": str(tmp_path / "task")},
    )
    before = source_fingerprint(task)
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "mod.pyc").write_bytes(b"cache")  # caches are not the source
    assert source_fingerprint(task) == before
    (repo / "mod.py").write_text("x = 2\n")
    assert source_fingerprint(task) != before
    (repo / "mod.py").write_text("x = 1\n")
    (repo / "escaped.txt").write_text("written from inside a sandbox\n")
    assert source_fingerprint(task) != before

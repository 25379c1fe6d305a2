"""Choosing the student from its config: bad overrides are ConfigErrors that name the key."""

from __future__ import annotations

import pytest

from aios_rl.campaign.students import StudentConfig, make_student
from aios_rl.contracts.errors import ConfigError
from aios_rl.policy.compact import CompactStudent


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [({"bukets": 1024}, "student.compact.bukets"), ({"buckets": 3}, "student.compact.buckets")],
)
def test_bad_compact_overrides_are_config_errors_naming_the_key(overrides: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        make_student(StudentConfig(compact=overrides), seed=0)


def test_compact_overrides_reach_the_student() -> None:
    student = make_student(StudentConfig(compact={"buckets": 1024, "text_scorer": True}), seed=3)
    assert isinstance(student, CompactStudent)
    assert (student.config.buckets, student.config.text_scorer, student.config.seed) == (1024, True, 3)

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

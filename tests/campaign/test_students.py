"""Choosing the student from its config: bad overrides are ConfigErrors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from aios_rl.campaign.students import StudentConfig, make_student, restore_student
from aios_rl.contracts.errors import AiosRlError, ConfigError, PolicyError
from aios_rl.policy.compact import CompactStudent
from aios_rl.policy.factory import policy_spec


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


def test_a_relative_model_directory_is_stored_absolute(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run records its student's model directory (configuration and checkpoints) so that `shell eval`,
    a resume or ``init_from`` finds it from any working directory, as it records its task directories."""
    monkeypatch.chdir(model_dir.parent)
    config = StudentConfig(kind="causal-lm", model_path=model_dir.name)
    assert config.model_path == str(model_dir.resolve())
    student = make_student(config, seed=0)
    spec, tensors = policy_spec(student), student.state_dict()
    monkeypatch.chdir(tmp_path)
    restored = restore_student(spec, {f"policy/{k}": v for k, v in tensors.items()})
    assert Path(restored.config_dict()["model_path"]) == model_dir.resolve()
    # a model id of the Hugging Face cache is no local directory and stays as given
    assert StudentConfig(kind="causal-lm", model_path="org/some-model").model_path == "org/some-model"


def test_a_checkpoint_spec_this_version_cannot_read_is_a_policy_error() -> None:
    """A checkpoint's policy spec with a setting this version does not know (written by another version, or
    edited) is a PolicyError naming the setting, like weights that do not fit; it was a raw
    ValidationError."""
    with pytest.raises(PolicyError, match="new_knob"):
        restore_student({"kind": "compact", "config": {"buckets": 64, "new_knob": 1}}, {})


@pytest.mark.parametrize(
    ("student", "needle"),
    [
        ({"kind": "causal-lm"}, "needs --model PATH"),
        ({"kind": "causal-lm", "model_path": "no/such-model"}, "neither a local directory nor in the"),
        ({"compact": {"bukets": 8}}, "student.compact.bukets"),
    ],
)
def test_a_student_that_cannot_be_built_is_refused_before_the_run_directory_exists(
    tmp_path: Path, student: dict, needle: str
) -> None:
    """Stored first, such a configuration left a run the corrected command refused as 'trained with a
    different configuration', with no checkpoint in it."""
    import sys

    from aios_rl.campaign.train import ShellTrainConfig, ShellTraining

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
    from test_env import make_task

    make_task(tmp_path)
    config = ShellTrainConfig(epochs=1, warm_start_epochs=0, teacher="none", student=StudentConfig(**student))
    with pytest.raises(AiosRlError, match=needle):
        ShellTraining(tmp_path / "run", tmp_path / "tasks", config)
    assert not (tmp_path / "run").exists()


def test_start_conflicts_compare_the_values_the_student_config_would_hold() -> None:
    """A setting pydantic coerces to the checkpoint's value (a YAML string "64") asks for nothing, and a
    mistyped key is an unknown-key ConfigError as a fresh student reports it, not a "has None" conflict."""
    from aios_rl.campaign.students import start_conflicts

    held = make_student(StudentConfig(), seed=0).config_dict()
    same = StudentConfig(compact={"embed_dim": str(held["embed_dim"]), "buckets": str(held["buckets"])})
    assert start_conflicts(same, held) == []
    assert start_conflicts(StudentConfig(compact={"embed_dim": "7"}), held) == [
        f"student.compact.embed_dim is 7 but the checkpoint's student has {held['embed_dim']}"
    ]
    for overrides, needle in (({"embed_dims": 64}, "student.compact.embed_dims"),
                              ({"embed_dim": 0}, "student.compact.embed_dim")):
        with pytest.raises(ConfigError, match=rf"invalid compact student settings:\n{needle}"):
            start_conflicts(StudentConfig(compact=overrides), held)


def test_a_float16_full_model_checkpoint_restores_for_evaluation_but_does_not_train(
    model_dir: Path, tmp_path: Path
) -> None:
    """A checkpoint stored before float16 was refused without LoRA (its untrained ``initial`` at least) is
    evaluated as before; only training it is refused (Adam's eps is 0 in float16), and a new such student
    is refused before its run directory exists."""
    from aios_rl.algos.trainer import Trainer

    fresh = make_student(StudentConfig(kind="causal-lm", model_path=str(model_dir)), seed=0)
    spec = policy_spec(fresh)
    spec["config"] = {**spec["config"], "dtype": "float16"}  # as that version stored it
    tensors = {f"policy/{k}": v.half() if k.startswith("model.") else v
               for k, v in fresh.state_dict().items()}
    restored = restore_student(spec, tensors)
    assert restored.config_dict()["dtype"] == "float16"
    with pytest.raises(ConfigError, match="dtype float16 cannot train the full model"):
        Trainer(restored)
    with pytest.raises(ConfigError, match="dtype float16 cannot train the full model"):
        make_student(StudentConfig(kind="causal-lm", model_path=str(model_dir),
                                   causal_lm={"dtype": "float16"}), seed=0)

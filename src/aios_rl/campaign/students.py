"""Choosing and restoring the student: the same code path for the compact student and a causal LM."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

import torch
from pydantic import Field, ValidationError, field_validator, model_validator

from aios_rl.algos.trainer import load_policy_weights
from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.errors import ConfigError, PolicyError
from aios_rl.contracts.validate import problems_from
from aios_rl.policy.base import Policy
from aios_rl.policy.factory import build_policy

_Config = TypeVar("_Config", bound=ConfigModel)

# Set through StudentConfig's own fields (and --model); an override of them would be a second source.
_LM_OWN_FIELDS = {"model_path": "model_path", "mode": "lm_mode", "lora": "lora"}


class StudentConfig(ConfigModel):
    """Which student to train."""

    kind: Literal["compact", "causal-lm"] = Field(default="compact", description="compact (CPU default) or causal-lm.")
    model_path: str | None = Field(default=None, description="causal-lm: local model directory or HF-cache id.")
    lm_mode: Literal["score", "generate"] = Field(default="score", description="causal-lm: score candidates or generate JSON.")
    lora: bool = Field(default=False, description="causal-lm: train LoRA adapters instead of all weights.")
    compact: dict[str, Any] = Field(default_factory=dict, description="Overrides of the compact student's config.")
    causal_lm: dict[str, Any] = Field(
        default_factory=dict,
        description="causal-lm: overrides of CausalLMStudentConfig (e.g. max_prompt_tokens, max_new_tokens).",
    )

    @field_validator("model_path")
    @classmethod
    def _absolute_model_dir(cls, path: str | None) -> str | None:
        """A local model directory made absolute (so stored with the run and its checkpoints): `shell eval`,
        a resume or ``init_from`` finds it from any working directory. A Hugging Face cache id stays."""
        if path is None or not Path(path).expanduser().is_dir():
            return path
        return str(Path(path).expanduser().resolve())

    @model_validator(mode="after")
    def _no_second_source(self) -> StudentConfig:
        clashes = sorted(_LM_OWN_FIELDS.keys() & self.causal_lm.keys())
        if clashes:
            fields = ", ".join(f"student.{_LM_OWN_FIELDS[k]}" for k in clashes)
            raise ConfigError(f"student.causal_lm must not set {clashes}; use {fields} instead")
        return self


def check_student(config: StudentConfig, *, seed: int) -> dict[str, Any]:
    """The policy spec of a fresh student with these settings, its config validated without building the
    student (no model is loaded), so a run or campaign refuses settings it could not start from before it
    creates its store.

    Raises:
        ConfigError: causal-lm without a model path, ``compact``/``causal_lm`` overrides the student's
            config rejects, or settings it could not train with (dtype float16 without LoRA).
        PolicyError: a causal-lm model path that is neither a local directory nor in the Hugging Face cache.
    """
    if config.kind == "compact":
        from aios_rl.policy.compact import CompactStudentConfig

        spec = {"seed": seed, **config.compact}
        _validated(CompactStudentConfig, spec, "compact", "compact student")
        return {"kind": config.kind, "config": spec}
    if config.model_path is None:
        raise ConfigError("student.kind=causal-lm needs --model PATH (a local model directory; "
                          "nothing is downloaded)")
    from aios_rl.policy.causal_lm import CausalLMStudentConfig, check_trainable, resolve_model_dir

    resolve_model_dir(config.model_path)  # a directory or cache entry; its files load with the student
    spec = {"model_path": config.model_path, "mode": config.lm_mode, "lora": config.lora, "seed": seed,
            **config.causal_lm}
    # float16 without LoRA: a stored student still loads (for evaluation), a fresh one is to train
    check_trainable(_validated(CausalLMStudentConfig, spec, "causal_lm", "causal-LM student"))
    return {"kind": config.kind, "config": spec}


def _validated(model: type[_Config], spec: dict[str, Any], section: str, what: str) -> _Config:
    """``spec`` validated by the student's own config model; the free-form overrides are validated only here.

    Raises:
        ConfigError: the config rejects ``spec``, one ``student.SECTION.KEY`` line per problem.
    """
    try:
        return model.model_validate(spec)
    except ValidationError as exc:
        problems = "\n".join(f"student.{section}.{line}" for line in problems_from(exc))
        raise ConfigError(f"invalid {what} settings:\n{problems}") from None


def make_student(config: StudentConfig, *, seed: int) -> Policy:
    """A freshly initialised student.

    Raises:
        ConfigError: causal-lm without a model path, or ``compact``/``causal_lm`` overrides the student's
            config rejects (:func:`check_student`).
    """
    spec = check_student(config, seed=seed)
    if config.kind == "causal-lm":
        torch.manual_seed(seed)
    return build_policy(spec)


def start_conflicts(config: StudentConfig, held: dict[str, Any]) -> list[str]:
    """The settings ``config`` asks for that the start checkpoint's student does not have (``held``, its
    ``config_dict()``), one ``student.X`` line each. A setting left unset asks for nothing: the checkpoint's
    holds. A warm start from ``init_from`` keeps the checkpoint's student, so these would be ignored. The
    values compared are the ones the student's config holds once validated (a YAML ``"64"`` asks for 64).

    Raises:
        ConfigError: the asked settings are ones the student's config rejects (an unknown key, a bad value),
            as :func:`check_student` reports them.
    """
    model: type[ConfigModel]
    if config.kind == "compact":
        from aios_rl.policy.compact import CompactStudentConfig

        asked = {key: (f"student.compact.{key}", value) for key, value in config.compact.items()}
        model, section, what = CompactStudentConfig, "compact", "compact student"
    else:
        from aios_rl.policy.causal_lm import CausalLMStudentConfig  # transformers

        asked = {key: (f"student.causal_lm.{key}", value) for key, value in config.causal_lm.items()}
        for key, own in _LM_OWN_FIELDS.items():
            if own in config.model_fields_set and getattr(config, own) is not None:
                asked[key] = (f"student.{own}", getattr(config, own))
        model, section, what = CausalLMStudentConfig, "causal_lm", "causal-LM student"
    values = _validated(model, {**held, **{key: value for key, (_, value) in asked.items()}}, section, what)
    wanted = values.model_dump(mode="json")
    return [f"{name} is {wanted[key]!r} but the checkpoint's student has {held.get(key)!r}"
            for key, (name, _) in sorted(asked.items()) if held.get(key) != wanted[key]]


def restore_student(
    spec: dict[str, Any], tensors: dict[str, torch.Tensor], *, source: str = "this checkpoint"
) -> Policy:
    """Rebuild a student from a checkpoint's policy spec and tensors; ``source`` names the checkpoint in
    errors (``"checkpoint RUN:ID"``).

    Raises:
        PolicyError: the spec's config is not one this version accepts (written by another version?), a
            causal LM's ``model_path`` now holds another model than the one it was trained on, or the
            tensors do not fit the student.
    """
    try:
        policy = build_policy(spec, source=source)
    except ValidationError as exc:  # the checkpoint's own config, validated only here
        problems = "; ".join(problems_from(exc))
        raise PolicyError(
            f"the checkpoint's {spec.get('kind')} student config does not fit this version of aios-rl "
            f"(written by a different version?): {problems}; start a new run directory"
        ) from None
    load_policy_weights(policy, tensors)
    return policy

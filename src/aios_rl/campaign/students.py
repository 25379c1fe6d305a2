"""Choosing and restoring the student: the same code path for the compact student and a causal LM."""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field

from aios_rl.algos.trainer import load_policy_weights
from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.errors import ConfigError
from aios_rl.policy.base import Policy
from aios_rl.policy.factory import build_policy


class StudentConfig(ConfigModel):
    """Which student to train."""

    kind: Literal["compact", "causal-lm"] = Field(default="compact", description="compact (CPU default) or causal-lm.")
    model_path: str | None = Field(default=None, description="causal-lm: local model directory or HF-cache id.")
    lm_mode: Literal["score", "generate"] = Field(default="score", description="causal-lm: score candidates or generate JSON.")
    lora: bool = Field(default=False, description="causal-lm: train LoRA adapters instead of all weights.")
    compact: dict[str, Any] = Field(default_factory=dict, description="Overrides of the compact student's config.")


def make_student(config: StudentConfig, *, seed: int) -> Policy:
    """A freshly initialised student."""
    if config.kind == "compact":
        return build_policy({"kind": "compact", "config": {"seed": seed, **config.compact}})
    if config.model_path is None:
        raise ConfigError("student.kind=causal-lm needs --model PATH (a local model directory; nothing is downloaded)")
    torch.manual_seed(seed)
    return build_policy(
        {"kind": "causal-lm", "config": {"model_path": config.model_path, "mode": config.lm_mode, "lora": config.lora}}
    )


def restore_student(spec: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Policy:
    """Rebuild a student from a checkpoint's policy spec and tensors."""
    policy = build_policy(spec)
    load_policy_weights(policy, tensors)
    return policy

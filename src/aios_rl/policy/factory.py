"""Build a policy from the spec stored in checkpoints (``{"kind": ..., "config": {...}}``, and for a causal LM
``"base"``: the fingerprint of the model it was trained on)."""

from __future__ import annotations

from typing import Any

from aios_rl.contracts.errors import PolicyError
from aios_rl.policy.base import Policy
from aios_rl.policy.uniform import UniformPolicy

KINDS = ("compact", "causal-lm", "uniform")


def build_policy(spec: dict[str, Any], *, source: str = "this checkpoint") -> Policy:
    """A freshly initialised policy of the given kind and config (load weights separately).

    A causal LM's spec with a ``"base"`` fingerprint is checked against the model at its ``model_path`` first
    (specs stored before fingerprints have none, and are not checked).

    Raises:
        PolicyError: an unknown kind, or another model at ``model_path`` than the one the spec was stored
            with (the message names ``source``, e.g. ``"checkpoint RUN:ID"``).
    """
    kind = spec.get("kind")
    config = spec.get("config") or {}
    if kind == "compact":
        from aios_rl.policy.compact import CompactStudent, CompactStudentConfig

        return CompactStudent(CompactStudentConfig.model_validate(config))
    if kind == "causal-lm":
        # Imported lazily: transformers is an optional extra and slow to import.
        from aios_rl.policy.causal_lm import CausalLMStudent, CausalLMStudentConfig, check_base

        lm_config = CausalLMStudentConfig.model_validate(config)
        if spec.get("base") is not None:
            check_base(lm_config, spec["base"], source)  # before the model loads, which may fail on shapes
        return CausalLMStudent(lm_config)
    if kind == "uniform":
        return UniformPolicy()
    raise PolicyError(f"unknown policy kind {kind!r}; expected one of {', '.join(KINDS)}")


def policy_spec(policy: Policy) -> dict[str, Any]:
    """The spec that rebuilds ``policy`` with :func:`build_policy`."""
    name = type(policy).__name__
    kind = {"CompactStudent": "compact", "CausalLMStudent": "causal-lm", "UniformPolicy": "uniform"}.get(name)
    if kind is None:
        raise PolicyError(f"no policy kind is registered for {name}")
    spec: dict[str, Any] = {"kind": kind, "config": policy.config_dict()}
    base = getattr(policy, "base_fingerprint", None)  # a causal LM: the model its weights fit
    if base is not None:
        spec["base"] = base
    return spec

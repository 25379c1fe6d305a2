"""Build a policy from the spec stored in checkpoints (``{"kind": ..., "config": {...}}``)."""

from __future__ import annotations

from typing import Any

from aios_rl.contracts.errors import PolicyError
from aios_rl.policy.base import Policy
from aios_rl.policy.uniform import UniformPolicy

KINDS = ("compact", "causal-lm", "uniform")


def build_policy(spec: dict[str, Any]) -> Policy:
    """A freshly initialised policy of the given kind and config (load weights separately)."""
    kind = spec.get("kind")
    config = spec.get("config") or {}
    if kind == "compact":
        from aios_rl.policy.compact import CompactStudent, CompactStudentConfig

        return CompactStudent(CompactStudentConfig.model_validate(config))
    if kind == "causal-lm":
        # Imported lazily: transformers is an optional extra and slow to import.
        from aios_rl.policy.causal_lm import CausalLMStudent, CausalLMStudentConfig

        return CausalLMStudent(CausalLMStudentConfig.model_validate(config))
    if kind == "uniform":
        return UniformPolicy()
    raise PolicyError(f"unknown policy kind {kind!r}; expected one of {', '.join(KINDS)}")


def policy_spec(policy: Policy) -> dict[str, Any]:
    """The spec that rebuilds ``policy`` with :func:`build_policy`."""
    name = type(policy).__name__
    kind = {"CompactStudent": "compact", "CausalLMStudent": "causal-lm", "UniformPolicy": "uniform"}.get(name)
    if kind is None:
        raise PolicyError(f"no policy kind is registered for {name}")
    return {"kind": kind, "config": policy.config_dict()}

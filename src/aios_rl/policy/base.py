"""What every student policy offers the rollout engine and the trainers (ARCHITECTURE §7).

A policy chooses actions (``act``) and re-scores recorded actions with gradients (``evaluate``); it owns
no optimizer — trainers in ``algos/`` hold those. Both students speak the same records so one trainer and
one rollout engine serve either.
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from aios_rl.contracts.episode import DecodingRegime, Observation
from aios_rl.contracts.errors import ConfigError


@dataclass(frozen=True)
class ActionSample:
    """One action chosen by ``Policy.act``.

    Attributes:
        action: the action text sent to the environment.
        index: position of the action in ``observation.candidates`` when chosen among candidates, else None.
        logprob: log-probability of the action under the sampling distribution (after temperature/top-p).
        entropy: entropy of the policy's (untempered) action distribution at this step.
        value: the value head's estimate of the state.
        hidden: the policy's state summary (a fixed-size vector) for RAIL's context features.
        token_ids / token_logprobs / loss_mask: LM policies only — the generated tokens.
    """

    action: str
    index: int | None
    logprob: float
    entropy: float
    value: float
    hidden: tuple[float, ...] = ()
    token_ids: tuple[int, ...] | None = None
    token_logprobs: tuple[float, ...] | None = None
    loss_mask: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Evaluation:
    """``Policy.evaluate`` output for B recorded (observation, action) pairs, with gradients.

    ``candidate_logits``/``candidate_mask`` describe the whole candidate distribution of each row (needed by
    distillation and the negative-lane KL); rows without candidates are all-masked. For LM policies that
    generate freely, C may be 0.
    """

    logprobs: torch.Tensor  # (B,) log pi(action | observation), summed over the action's tokens
    entropy: torch.Tensor  # (B,)
    values: torch.Tensor  # (B,)
    candidate_logits: torch.Tensor  # (B, C), invalid entries masked by candidate_mask
    candidate_mask: torch.Tensor  # (B, C) bool
    token_logprobs: torch.Tensor | None = None  # (B, T) LM policies
    token_mask: torch.Tensor | None = None  # (B, T) LM policies
    extras: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Policy(Protocol):
    """A student. ``environment`` ids let one network serve several environments.

    A policy whose ``act`` records tokens (``ActionSample.token_ids`` not None: the LM student) must also
    accept the keywords ``token_ids=`` and ``loss_mask=`` in ``evaluate``, one recorded row (or None) per
    observation, and re-score exactly those tokens. Trainers pass them only for steps that recorded tokens
    (``algos.batch.evaluate_steps``), so a policy that never records any keeps the three-argument form.

    ``act``'s ``distinct`` gives each observation a group id (or None): a policy that chooses among
    candidates draws distinct ones for the rows of a group while it can (``policy.sampling``), so a GRPO
    group's first actions differ; ``drawn`` (optional) holds what each group drew in earlier calls, to be
    excluded too and updated in place. The rollout runner passes them only when asked to (``distinct``).

    ``last_act_metrics`` holds ``policy/*`` numbers about the latest ``act`` call, each a share of that
    call's observations (the LM student's ``policy/non_json_frac``: answers that are not one JSON action);
    a policy with nothing to report keeps it empty. The rollout runner reads it after every ``act`` call and
    averages it over a run (``rollout.budget.ActMetrics``), so it reaches each epoch's metrics line.
    """

    hidden_size: int

    @property
    def last_act_metrics(self) -> dict[str, float]: ...

    def act(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        regime: DecodingRegime,
        generator: torch.Generator | None = None,
        distinct: Sequence[Hashable | None] | None = None,
        drawn: MutableMapping[Hashable, set[str]] | None = None,
    ) -> list[ActionSample]: ...

    def evaluate(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        actions: Sequence[str],
    ) -> Evaluation: ...

    def parameters(self) -> Any: ...

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> Any: ...

    def config_dict(self) -> dict[str, Any]: ...


def float16_untrainable(*, stored: bool) -> ConfigError:
    """The error for training a whole model held in float16 (a causal-LM student without LoRA): Adam's eps
    (1e-8) rounds to 0 in float16, so a zero gradient (an unused embedding row) gives 0 / 0 and NaN weights.
    ``stored``: the student exists already (a checkpoint from before this was refused), which still loads
    to be evaluated; otherwise it is refused before it is built."""
    fix = "such a student can be evaluated, but train one with dtype" if stored else "use dtype"
    return ConfigError(
        "dtype float16 cannot train the full model: Adam's update turns float16 weights into NaN (its eps of "
        f"1e-8 is 0 in float16); {fix} bfloat16 or float32, or lora: true (the adapters train in float32 "
        "over the float16 model)"
    )

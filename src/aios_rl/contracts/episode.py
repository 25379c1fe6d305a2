"""The records every environment, policy, teacher and the control plane exchange (ARCHITECTURE §4).

All records are pydantic v2 models: frozen, ``extra="forbid"``, non-finite floats rejected, and carrying a
``schema_version`` so stored episodes stay readable as the contract evolves. External input is parsed with
:func:`aios_rl.contracts.validate.parse_record`, which turns violations into a :class:`ContractError`
with one line per problem.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

Split = Literal["train", "holdout"]
Outcome = Literal["success", "partial", "failure", "blocked"]
TeacherStatus = Literal["complete", "fallback_complete", "invalid_response", "failed_all_backends"]
ComparisonStatus = Literal["completed", "comparison_failed"]
RelativeOutcome = Literal["better", "same", "worse"]
AdmissionStatus = Literal["pending", "admitted", "rejected", "update_failed"]
Lane = Literal["positive", "neutral", "negative", "diagnostic_only"]

LANES: tuple[Lane, ...] = ("positive", "neutral", "negative", "diagnostic_only")


def new_id() -> str:
    """A fresh globally unique id (UUID4, hex with dashes)."""
    return str(uuid.uuid4())


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string (what every record stores)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Record(BaseModel):
    """Base of every contract record: immutable, strict about unknown keys and non-finite numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Task(Record):
    """One task an environment can be reset to.

    ``spec`` is what the environment needs to run the task and may show the student; ``oracle`` holds what
    only the oracle teacher and the verifier may see (reference patch, mutation metadata, hidden simulator
    parameters). Policies never receive a ``Task``: they receive observations.
    """

    schema_version: int = SCHEMA_VERSION
    task_id: str = Field(min_length=1, description="Unique id of the task within its task set.")
    environment: str = Field(
        pattern=r"^[a-z][a-z0-9_-]*$", description="Environment family: shell, browser, orchestrator, ..."
    )
    family: str = Field(min_length=1, description="Task family used by comparators, e.g. failing_tests.")
    split: Split = Field(description="train or holdout; holdout tasks are never trained or tuned on.")
    prompt: str = Field(description="The text the student sees at reset.")
    spec: dict[str, Any] = Field(default_factory=dict, description="Environment-specific payload.")
    oracle: dict[str, Any] = Field(
        default_factory=dict, description="Ground truth for the oracle teacher and verifier only."
    )
    seed: int = Field(default=0, description="Seed that makes the task's episodes reproducible.")


class Observation(Record):
    """What the student sees at one step."""

    text: str = Field(description="Observation text (prompt, last output, latest test summary, ...).")
    candidates: list[str] = Field(
        default_factory=list, description="Admissible actions for candidate-scoring students."
    )
    candidate_features: list[dict[str, float]] = Field(
        default_factory=list,
        description="Numeric features per candidate (same order as candidates), derived from observations only.",
    )
    features: dict[str, float] = Field(default_factory=dict, description="Numeric observation features.")
    state_key: str | None = Field(
        default=None,
        description="Opaque id of the environment state shown, equal for equal states whatever the step counter "
        "or last-action text (the shell: working copy and latest test results). Groups steps into GiGPO anchor "
        "states for step-level credit; never a student input. None: the observation itself identifies the state.",
    )


class DecodingRegime(Record):
    """Sampling settings a rollout (or a RAIL branch) runs under."""

    name: str = Field(default="default", description="Short label, e.g. default, hot, cool.")
    temperature: float = Field(default=1.0, gt=0.0, description="Softmax temperature.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")


class Step(Record):
    """One transition of a trajectory."""

    observation: Observation
    action: str = Field(description="The action text the policy chose.")
    logprob: float = Field(description="Log-probability of the action under the acting policy.")
    entropy: float = Field(ge=0.0, description="Entropy of the acting policy's action distribution.")
    token_ids: list[int] | None = Field(default=None, description="LM policies: generated token ids.")
    token_logprobs: list[float] | None = Field(default=None, description="LM policies: per-token logprobs.")
    loss_mask: list[int] | None = Field(default=None, description="LM policies: 1 where tokens are trained.")
    reward: float = Field(default=0.0, description="Environment reward of this step.")
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = Field(default=0.0, ge=0.0)


class BranchRef(Record):
    """Where a RAIL branch forked from: the parent episode and the step index it restored."""

    episode_id: str
    step: int = Field(ge=0)


class Verification(Record):
    """Objective evidence from the environment's verifier (e.g. a test run)."""

    completed: bool = Field(description="The verifier ran to completion (tests executed, state read).")
    outcome: Outcome
    evidence: dict[str, Any] = Field(
        default_factory=dict, description="Environment-specific facts the comparators read."
    )


class TeacherSignal(Record):
    """One teacher's normalised answer about an episode."""

    schema_version: int = SCHEMA_VERSION
    status: TeacherStatus
    backend: str
    critique: str = ""
    reference_actions: list[str] = Field(default_factory=list)
    step_reference_actions: list[list[str]] = Field(
        default_factory=list,
        description="Per visited state, in trajectory order, the reference actions at that state (from a "
        "teacher that follows the episode's files, such as the oracle); empty: reference_actions apply at "
        "every state.",
    )
    shaping: float = Field(default=0.0, ge=-1.0, le=1.0)
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    boundary: bool = Field(default=False, description="The teacher thinks this is a borderline case.")
    latency_s: float = Field(default=0.0, ge=0.0)
    cost_usd: float | None = Field(default=None, ge=0.0)
    error: str | None = Field(default=None, description="Why the teacher failed, when it did.")


class Comparison(Record):
    """A matched comparison of one task under the candidate and the reference checkpoint."""

    schema_version: int = SCHEMA_VERSION
    status: ComparisonStatus
    relative_outcome: RelativeOutcome | None = None
    candidate_checkpoint: str | None = None
    reference_checkpoint: str | None = None
    primary_evidence: dict[str, Any] = Field(default_factory=dict)
    secondary_evidence: dict[str, Any] = Field(default_factory=dict)
    attempts: int = Field(default=1, ge=1)
    reason: str = ""


class RewardComponents(Record):
    """The parts the fused reward was built from."""

    terminal: float
    shaping: float = 0.0
    step_penalty: float = 0.0
    total: float


class Episode(Record):
    """One trajectory of one task, with its outcome, reward and evidence: the unit everything exchanges."""

    schema_version: int = SCHEMA_VERSION
    episode_id: str = Field(default_factory=new_id, min_length=1)
    environment: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    task_id: str = Field(min_length=1)
    split: Split = "train"
    trajectory: list[Step]
    outcome: Outcome
    reward: float = Field(description="Fused reward (environment terminal + teacher shaping).")
    env_reward: float = Field(description="Environment reward before fusion.")
    reward_components: RewardComponents | None = None
    teacher_signal: TeacherSignal | None = None
    comparison: Comparison | None = None
    policy_version: str = Field(description="Checkpoint id that produced this episode.")
    decoding_regime: DecodingRegime = Field(default_factory=DecodingRegime)
    branch_of: BranchRef | None = None
    verification: Verification | None = None
    admission_status: AdmissionStatus = "pending"
    admission_reason: str = ""
    seed: int = 0
    started_at: str = Field(default_factory=utc_now)
    finished_at: str = Field(default_factory=utc_now)
    duration_s: float = Field(default=0.0, ge=0.0)


class StepResult(Record):
    """What ``Env.step`` returns (Gymnasium-shaped, text observations)."""

    observation: Observation
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)

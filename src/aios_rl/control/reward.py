"""Reward fusion: the environment's terminal reward plus bounded teacher shaping, minus step penalties.

ARCHITECTURE §5: terminal reward by outcome (``success`` +1, ``partial`` +0.25, ``blocked`` 0, ``failure``
−1), plus teacher shaping scaled to at most ±``shaping_weight``, never flipping the sign of a non-zero
terminal reward, minus a configurable per-step penalty and a penalty per invalid action. The fused total and each component are stored on
the episode (:class:`~aios_rl.contracts.episode.RewardComponents`), and the components always add up:
``total == terminal + shaping - step_penalty`` with the *effective* (post-clamp) shaping and penalty.

Sign rule (the original's ``fuseReward`` floors, reference §6.2, generalised to step penalties): for a
non-zero terminal reward the total keeps the terminal's sign with a margin of at least ``sign_margin``
(0.05 by default), so a success with harsh teacher criticism is still a (small) success and a failure
with praise is still a failure. A terminal of 0 (``blocked``) has no sign to protect: shaping applies
freely within ±``shaping_weight`` and the step penalty applies in full.
"""

from __future__ import annotations

import logging

from pydantic import Field, model_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Outcome, RewardComponents, TeacherSignal, TeacherStatus
from aios_rl.contracts.errors import ConfigError, ContractError

__all__ = ["RewardConfig", "terminal_reward", "shaping_term", "fuse_reward"]

logger = logging.getLogger(__name__)


class RewardConfig(ConfigModel):
    """Terminal rewards per outcome, teacher shaping scale and step penalty (defaults: ARCHITECTURE §5)."""

    success_reward: float = Field(default=1.0, description="Terminal reward of a successful episode.")
    partial_reward: float = Field(default=0.25, description="Terminal reward of a partially solved episode.")
    blocked_reward: float = Field(default=0.0, description="Terminal reward of a blocked episode.")
    failure_reward: float = Field(default=-1.0, description="Terminal reward of a failed episode.")
    shaping_weight: float = Field(
        default=0.2, ge=0.0, description="Largest magnitude of the teacher shaping term (weight x shaping)."
    )
    step_penalty: float = Field(default=0.0, ge=0.0, description="Reward subtracted per trajectory step.")
    invalid_action_penalty: float = Field(
        default=0.1, ge=0.0, description="Reward subtracted per step the environment flagged "
        "info['invalid_action'] (an unparseable or refused action, e.g. an LM's answer with no JSON action).",
    )
    sign_margin: float = Field(
        default=0.05,
        gt=0.0,
        description="Smallest |total| kept for a non-zero terminal so shaping/penalties never flip its sign.",
    )
    use_teacher_statuses: tuple[TeacherStatus, ...] = Field(
        default=("complete", "fallback_complete"),
        description="Teacher statuses whose shaping is used; other teacher signals contribute nothing.",
    )

    @model_validator(mode="after")
    def _check(self) -> RewardConfig:
        order = (self.success_reward, self.partial_reward, self.blocked_reward, self.failure_reward)
        if list(order) != sorted(order, reverse=True):
            raise ConfigError(
                "reward: terminal rewards must satisfy success >= partial >= blocked >= failure, got "
                f"success={self.success_reward}, partial={self.partial_reward}, "
                f"blocked={self.blocked_reward}, failure={self.failure_reward}; reorder them"
            )
        # A margin larger than a non-zero terminal would *force* shaping towards that terminal's sign.
        nonzero = [abs(r) for r in order if r != 0.0]
        if nonzero and self.sign_margin > min(nonzero):
            raise ConfigError(
                f"reward.sign_margin={self.sign_margin} exceeds the smallest non-zero terminal reward "
                f"magnitude {min(nonzero)}; set sign_margin <= {min(nonzero)}"
            )
        return self


def terminal_reward(outcome: Outcome, config: RewardConfig) -> float:
    """The terminal environment reward of ``outcome`` under ``config``."""
    return {
        "success": config.success_reward,
        "partial": config.partial_reward,
        "blocked": config.blocked_reward,
        "failure": config.failure_reward,
    }[outcome]


def shaping_term(teacher: TeacherSignal | None, config: RewardConfig) -> float:
    """The teacher's shaping contribution before sign protection: ``weight * shaping`` clipped to ±weight.

    Returns 0.0 when there is no teacher signal or its status is not in ``config.use_teacher_statuses``
    (a failed or invalid teacher answer must not move the reward).
    """
    if teacher is None or teacher.status not in config.use_teacher_statuses:
        return 0.0
    weight = config.shaping_weight
    return min(weight, max(-weight, weight * teacher.shaping))


def fuse_reward(
    outcome: Outcome,
    teacher: TeacherSignal | None,
    n_steps: int,
    config: RewardConfig | None = None,
    n_invalid: int = 0,
) -> RewardComponents:
    """Fuse the terminal reward, the teacher's shaping and the step penalty into one reward.

    Rules, in order:

    1. ``terminal`` from the outcome; ``shaping = weight * teacher.shaping`` clipped to ±weight when the
       teacher's status is usable, else 0; ``penalty = step_penalty * n_steps + invalid_action_penalty *
       n_invalid``.
    2. terminal > 0: shaping is raised to at least ``sign_margin - terminal``, then the penalty is capped at
       ``terminal + shaping - sign_margin``, so ``total >= sign_margin``.
    3. terminal < 0: shaping is lowered to at most ``-sign_margin - terminal``, so ``total <= -sign_margin``;
       the penalty only pushes the total further below zero and is applied in full.
    4. terminal == 0 (``blocked`` by default): shaping applies freely within ±weight and the penalty in
       full, so the total may have either sign.

    Shaping is clamped before the penalty because it is bounded while the penalty grows with episode
    length; when both compete for the margin, a long success keeps its small positive reward instead of
    looking like a failure. The returned components are the effective ones, so they always sum to total.

    Args:
        outcome: the episode outcome.
        teacher: the teacher's signal about the episode, or None when no teacher ran.
        n_steps: number of steps in the trajectory (>= 0).
        n_invalid: how many of them the environment flagged as invalid actions (0 <= n_invalid <= n_steps).
        config: reward settings; defaults to :class:`RewardConfig` ().

    Returns:
        ``RewardComponents(terminal, shaping, step_penalty, total)`` where ``step_penalty >= 0`` is the
        amount subtracted and ``total == terminal + shaping - step_penalty``.

    Raises:
        ContractError: ``n_steps`` is negative, or ``n_invalid`` is outside [0, n_steps].

    Example:
        >>> fuse_reward("success", TeacherSignal(status="complete", backend="oracle", shaping=-1.0), 3).total
        0.8
    """
    if n_steps < 0:
        raise ContractError(f"fuse_reward: n_steps must be >= 0, got {n_steps}")
    if not 0 <= n_invalid <= n_steps:
        raise ContractError(f"fuse_reward: n_invalid must be in [0, n_steps={n_steps}], got {n_invalid}")
    config = config if config is not None else RewardConfig()
    terminal = terminal_reward(outcome, config)
    raw_shaping = shaping = shaping_term(teacher, config)
    raw_penalty = penalty = config.step_penalty * n_steps + config.invalid_action_penalty * n_invalid
    margin = config.sign_margin
    if terminal > 0:
        shaping = max(shaping, margin - terminal)
        # max(0, ...) guards the float round-off of terminal + (margin - terminal) - margin.
        penalty = max(0.0, min(penalty, terminal + shaping - margin))
    elif terminal < 0:
        shaping = min(shaping, -margin - terminal)
    total = terminal + shaping - penalty
    if shaping != raw_shaping or penalty != raw_penalty:
        logger.debug(
            "reward: clamped shaping/penalty to keep the sign of terminal %s (outcome %s)", terminal, outcome
        )
    return RewardComponents(terminal=terminal, shaping=shaping, step_penalty=penalty, total=total)

"""Reward fusion: hand-computed table, sign protection, config validation and a sign-never-flips property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aios_rl.contracts.config import load_config
from aios_rl.contracts.episode import TeacherSignal
from aios_rl.contracts.errors import ConfigError, ContractError
from aios_rl.control.reward import RewardConfig, fuse_reward, shaping_term, terminal_reward

STATUSES = ("complete", "fallback_complete", "invalid_response", "failed_all_backends")


def teacher(shaping: float, status: str = "complete") -> TeacherSignal:
    return TeacherSignal(status=status, backend="oracle", shaping=shaping)


# (outcome, shaping, expected total) with default config and usable status; hand-computed.
USABLE_TABLE = [
    ("success", -1.0, 0.8),
    ("success", -0.5, 0.9),
    ("success", 0.0, 1.0),
    ("success", 1.0, 1.2),
    ("partial", -1.0, 0.05),
    ("partial", 0.0, 0.25),
    ("partial", 1.0, 0.45),
    ("blocked", -1.0, -0.2),
    ("blocked", 0.0, 0.0),
    ("blocked", 1.0, 0.2),
    ("failure", -1.0, -1.2),
    ("failure", 0.0, -1.0),
    ("failure", 0.5, -0.9),
    ("failure", 1.0, -0.8),
]
TERMINAL = {"success": 1.0, "partial": 0.25, "blocked": 0.0, "failure": -1.0}


@pytest.mark.parametrize("status", ["complete", "fallback_complete"])
@pytest.mark.parametrize(("outcome", "shaping", "expected"), USABLE_TABLE)
def test_usable_teacher_table(outcome: str, shaping: float, expected: float, status: str) -> None:
    r = fuse_reward(outcome, teacher(shaping, status), n_steps=5)
    assert r.terminal == TERMINAL[outcome]
    assert r.total == pytest.approx(expected)
    assert r.shaping == pytest.approx(expected - TERMINAL[outcome])
    assert r.step_penalty == 0.0


@pytest.mark.parametrize("status", ["invalid_response", "failed_all_backends"])
@pytest.mark.parametrize(("outcome", "shaping", "_"), USABLE_TABLE)
def test_unusable_teacher_contributes_nothing(outcome: str, shaping: float, _: float, status: str) -> None:
    r = fuse_reward(outcome, teacher(shaping, status), n_steps=5)
    assert (r.shaping, r.total) == (0.0, TERMINAL[outcome])


@pytest.mark.parametrize("outcome", list(TERMINAL))
def test_no_teacher_is_terminal_only(outcome: str) -> None:
    r = fuse_reward(outcome, None, n_steps=0)
    t = TERMINAL[outcome]
    assert (r.terminal, r.shaping, r.step_penalty, r.total) == (t, 0.0, 0.0, t)


def test_original_test_vectors() -> None:
    # reference §6.2: (1,-1) -> 0.8; (0, max) -> 0.2; (-1, 1) -> -0.8; failed teacher -> -1.
    assert fuse_reward("success", teacher(-1.0), 1).total == pytest.approx(0.8)
    assert fuse_reward("blocked", teacher(1.0), 1).total == pytest.approx(0.2)
    assert fuse_reward("failure", teacher(1.0), 1).total == pytest.approx(-0.8)
    assert fuse_reward("failure", teacher(1.0, "failed_all_backends"), 1).total == -1.0


def test_use_teacher_statuses_is_respected() -> None:
    only_complete = RewardConfig(use_teacher_statuses=("complete",))
    assert fuse_reward("success", teacher(-1.0, "fallback_complete"), 1, only_complete).total == 1.0
    assert fuse_reward("success", teacher(-1.0, "complete"), 1, only_complete).total == pytest.approx(0.8)


def test_shaping_clamped_so_sign_never_flips() -> None:
    strong = RewardConfig(shaping_weight=1.0)
    r = fuse_reward("success", teacher(-1.0), 0, strong)
    assert r.shaping == pytest.approx(-0.95) and r.total == pytest.approx(0.05)
    r = fuse_reward("failure", teacher(1.0), 0, strong)
    assert r.shaping == pytest.approx(0.95) and r.total == pytest.approx(-0.05)
    # Terminal 0 has no sign to protect: full weight either way.
    assert fuse_reward("blocked", teacher(-1.0), 0, strong).total == pytest.approx(-1.0)
    assert fuse_reward("blocked", teacher(1.0), 0, strong).total == pytest.approx(1.0)


def test_step_penalty_never_flips_sign() -> None:
    cfg = RewardConfig(step_penalty=0.1)
    # Short success: penalty in full. 1.0 - 0.3.
    r = fuse_reward("success", None, 3, cfg)
    assert (r.step_penalty, r.total) == (pytest.approx(0.3), pytest.approx(0.7))
    # Long success: 2.0 of penalty is capped at 1.0 - 0.05.
    r = fuse_reward("success", None, 20, cfg)
    assert r.step_penalty == pytest.approx(0.95) and r.total == pytest.approx(0.05)
    # Shaping is clamped first, the penalty takes what remains: 0.25 - 0.2 leaves only the margin.
    r = fuse_reward("partial", teacher(-1.0), 3, cfg)
    assert r.shaping == pytest.approx(-0.2) and r.step_penalty == pytest.approx(0.0)
    assert r.total > 0
    # Failure: the penalty only pushes further down, in full.
    r = fuse_reward("failure", teacher(1.0), 3, cfg)
    assert r.total == pytest.approx(-1.0 + 0.2 - 0.3)
    # Blocked: penalty applies in full, so a long blocked episode is mildly negative.
    r = fuse_reward("blocked", teacher(-1.0), 3, cfg)
    assert r.total == pytest.approx(-0.5)


def test_invalid_actions_are_penalised_per_step_under_the_sign_rule() -> None:
    cfg = RewardConfig(step_penalty=0.0, invalid_action_penalty=0.1)
    assert fuse_reward("failure", None, 5, cfg, n_invalid=3).total == pytest.approx(-1.3)
    assert fuse_reward("blocked", None, 5, cfg, n_invalid=2).step_penalty == pytest.approx(0.2)
    r = fuse_reward("success", None, 12, cfg, n_invalid=12)  # capped: a success stays a success
    assert r.step_penalty == pytest.approx(0.95) and r.total == pytest.approx(0.05)
    both = fuse_reward("failure", None, 4, RewardConfig(step_penalty=0.05), n_invalid=1)
    assert both.step_penalty == pytest.approx(0.05 * 4 + 0.1)  # default invalid-action penalty 0.1
    assert fuse_reward("failure", None, 4, cfg).total == -1.0  # none flagged: nothing taken


def test_negative_steps_rejected() -> None:
    with pytest.raises(ContractError, match="n_steps"):
        fuse_reward("success", None, -1)
    with pytest.raises(ContractError, match="n_invalid"):
        fuse_reward("success", None, 2, n_invalid=3)


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="success >= partial"):
        RewardConfig(success_reward=-1.0, failure_reward=1.0)
    with pytest.raises(ConfigError, match="sign_margin"):
        RewardConfig(sign_margin=0.3)  # larger than partial's 0.25
    with pytest.raises(ConfigError, match="did you mean 'shaping_weight'"):
        load_config(RewardConfig, overrides={"shaping_weigth": 0.1})
    with pytest.raises(ConfigError):
        load_config(RewardConfig, overrides={"step_penalty": -0.1})
    cfg = load_config(RewardConfig, overrides={"shaping_weight": 0.5})
    assert shaping_term(teacher(-1.0), cfg) == -0.5
    assert terminal_reward("partial", RewardConfig()) == 0.25


def test_every_field_has_a_description() -> None:
    assert all(f.description for f in RewardConfig.model_fields.values())


@settings(max_examples=400, deadline=None)
@given(
    outcome=st.sampled_from(list(TERMINAL)),
    shaping=st.floats(-1.0, 1.0),
    status=st.sampled_from(STATUSES),
    n_steps=st.integers(0, 500),
    step_penalty=st.floats(0.0, 0.5),
    weight=st.floats(0.0, 2.0),
    margin=st.floats(0.001, 0.25),
)
def test_sign_never_flips_property(
    outcome: str, shaping: float, status: str, n_steps: int, step_penalty: float, weight: float, margin: float
) -> None:
    cfg = RewardConfig(shaping_weight=weight, step_penalty=step_penalty, sign_margin=margin, invalid_action_penalty=0.0)
    r = fuse_reward(outcome, teacher(shaping, status), n_steps, cfg)
    assert math.isclose(r.total, r.terminal + r.shaping - r.step_penalty, abs_tol=1e-12)
    assert abs(r.shaping) <= weight + 1e-12
    assert 0.0 <= r.step_penalty <= step_penalty * n_steps + 1e-12
    if status not in cfg.use_teacher_statuses:
        assert r.shaping == 0.0
    if r.terminal > 0:
        assert r.total > 0 and r.total >= margin - 1e-9
    elif r.terminal < 0:
        assert r.total < 0 and r.total <= -margin + 1e-9
        assert r.step_penalty == pytest.approx(step_penalty * n_steps)
    else:  # blocked: nothing clamped
        expected_shaping = weight * shaping if status in cfg.use_teacher_statuses else 0.0
        assert r.shaping == pytest.approx(expected_shaping)
        assert r.step_penalty == pytest.approx(step_penalty * n_steps)

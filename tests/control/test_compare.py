"""Matched comparison: shell rules, registry, retry, sign-test verdicts and the mixture guard."""

from __future__ import annotations

from collections.abc import Callable
from math import comb
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aios_rl.contracts.config import load_config
from aios_rl.contracts.episode import Verification
from aios_rl.contracts.errors import ConfigError, ContractError, EnvError, SandboxError
from aios_rl.control import compare
from aios_rl.control.compare import (
    CompareConfig,
    ShellComparator,
    compare_matched,
    compare_verifications,
    get_comparator,
    mixture_verdict,
    register_comparator,
    verdict,
)

SHELL = ShellComparator()


def v(outcome: str = "failure", completed: bool = True, **evidence: Any) -> Verification:
    return Verification(completed=completed, outcome=outcome, evidence=evidence)


def shell(tu: int, nf: int, npg: int = 0, unrel: int = 0, steps: int = 5) -> Verification:
    return v(
        "failure",
        target_unresolved=tu,
        new_failures=nf,
        no_progress_steps=npg,
        unrelated_files_modified=unrel,
        steps=steps,
        tests_failed=tu + nf,
        tests_passed=10,
    )


# (candidate, reference, expected outcome, deciding rule)
SHELL_TABLE = [
    (shell(0, 0), shell(2, 0), "better", "target_unresolved"),
    (shell(2, 0), shell(0, 0), "worse", "target_unresolved"),
    (shell(1, 0), shell(1, 1), "better", "new_failures"),
    (shell(1, 2), shell(1, 0), "worse", "new_failures"),
    # Lexicographic: resolving more targets wins even with more new failures (documented choice).
    (shell(0, 3), shell(1, 0), "better", "target_unresolved"),
    (shell(1, 0, npg=1), shell(1, 0, npg=3), "better", "no_progress_steps"),
    (shell(1, 0, npg=2, unrel=2), shell(1, 0, npg=2, unrel=0), "worse", "unrelated_files_modified"),
    (shell(1, 0, steps=5), shell(1, 0, steps=7), "better", "steps"),
    (shell(1, 0, steps=9), shell(1, 0, steps=7), "worse", "steps"),
    (shell(1, 0), shell(1, 0), "same", "tie"),
    # A secondary advantage never overrides a primary loss.
    (shell(2, 0, npg=0, steps=1), shell(1, 0, npg=5, steps=12), "worse", "target_unresolved"),
    # Missing primary evidence: outcome rank success > partial > failure > blocked.
    (v("success"), v("failure"), "better", "outcome_rank"),
    (v("partial"), v("success"), "worse", "outcome_rank"),
    (v("failure"), v("blocked"), "better", "outcome_rank"),
    (v("blocked"), v("partial"), "worse", "outcome_rank"),
    # One side lacking a primary key makes both fall back, even though the other side has counts.
    (
        v("success", target_unresolved=3, new_failures=0),
        v("failure", target_unresolved=0),
        "better",
        "outcome_rank",
    ),
    # Fallback tie goes on to the secondary rules.
    (v("failure", steps=3), v("failure", steps=5), "better", "steps"),
    # A secondary key missing on one side is skipped; the next one decides.
    (v("failure", no_progress_steps=0, steps=9), v("failure", steps=4), "worse", "steps"),
    (v("partial"), v("partial"), "same", "tie"),
]


@pytest.mark.parametrize(("cand", "ref", "expected", "rule"), SHELL_TABLE)
def test_shell_comparator_table(cand: Verification, ref: Verification, expected: str, rule: str) -> None:
    verdict_ = SHELL.compare(cand, ref)
    assert (verdict_.relative_outcome, verdict_.decided_by) == (expected, rule)


def test_shell_records_evidence() -> None:
    r = SHELL.compare(shell(1, 0, npg=1), shell(1, 0, npg=3))
    assert r.primary_evidence == {
        "target_unresolved": {"candidate": 1, "reference": 1},
        "new_failures": {"candidate": 0, "reference": 0},
    }
    assert r.secondary_evidence == {"no_progress_steps": {"candidate": 1, "reference": 3}}
    fallback = SHELL.compare(v("success"), v("failure"))
    assert fallback.primary_evidence == {"outcome_rank": {"candidate": "success", "reference": "failure"}}


@pytest.mark.parametrize("bad", ["3", -1, True, 1.5])
def test_shell_rejects_malformed_evidence(bad: Any) -> None:
    with pytest.raises(ContractError, match="target_unresolved"):
        SHELL.compare(v(target_unresolved=bad, new_failures=0), shell(0, 0))


def test_shell_rejects_incomplete_verification() -> None:
    with pytest.raises(ContractError, match="completed"):
        SHELL.compare(v(completed=False), shell(0, 0))


def test_registry_lookup_and_did_you_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "COMPARATORS", dict(compare.COMPARATORS))
    assert isinstance(get_comparator("shell"), ShellComparator)
    with pytest.raises(ConfigError, match="did you mean 'shell'"):
        get_comparator("shel")
    custom = ShellComparator()
    register_comparator("browser", custom)
    assert get_comparator("browser") is custom
    with pytest.raises(ConfigError, match="already registered"):
        register_comparator("browser", ShellComparator())
    register_comparator("browser", SHELL, replace=True)
    assert get_comparator("browser") is SHELL
    with pytest.raises(ConfigError, match="must match"):
        register_comparator("Bad Name", SHELL)


def test_compare_verifications_records_everything() -> None:
    c = compare_verifications(
        shell(0, 0), shell(2, 0), SHELL, candidate_checkpoint="ck-new", reference_checkpoint="ck-old"
    )
    assert (c.status, c.relative_outcome, c.attempts) == ("completed", "better", 1)
    assert (c.candidate_checkpoint, c.reference_checkpoint) == ("ck-new", "ck-old")
    assert c.primary_evidence["target_unresolved"] == {"candidate": 0, "reference": 2}
    assert "target_unresolved" in c.reason


@pytest.mark.parametrize(
    ("cand_ok", "ref_ok", "side"),
    [(False, True, "candidate"), (True, False, "reference"), (False, False, "and")],
)
def test_compare_verifications_incomplete_is_failed(cand_ok: bool, ref_ok: bool, side: str) -> None:
    c = compare_verifications(v(completed=cand_ok), v(completed=ref_ok), SHELL)
    assert (c.status, c.relative_outcome) == ("comparison_failed", None)
    assert side in c.reason


class Runs:
    """Scripted run callables: each call pops the next result (a Verification or an exception)."""

    def __init__(self, *results: Verification | Exception) -> None:
        self.results = list(results)
        self.calls = 0

    def __call__(self) -> Verification:
        self.calls += 1
        result = self.results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result


def test_matched_first_attempt_succeeds() -> None:
    cand, ref = Runs(shell(0, 0)), Runs(shell(1, 0))
    c = compare_matched(cand, ref, SHELL, candidate_checkpoint="a", reference_checkpoint="b")
    assert (c.status, c.relative_outcome, c.attempts) == ("completed", "better", 1)
    assert (cand.calls, ref.calls) == (1, 1)
    assert (c.candidate_checkpoint, c.reference_checkpoint) == ("a", "b")


def test_matched_candidate_raises_then_succeeds() -> None:
    cand, ref = Runs(SandboxError("bwrap died"), shell(1, 0)), Runs(shell(0, 0))
    c = compare_matched(cand, ref, SHELL)
    assert (c.status, c.relative_outcome, c.attempts) == ("completed", "worse", 2)
    # The reference is not run for a discarded attempt.
    assert (cand.calls, ref.calls) == (2, 1)


def test_matched_reference_incomplete_reruns_both_sides() -> None:
    cand, ref = Runs(shell(0, 0), shell(0, 0)), Runs(v(completed=False), shell(0, 0))
    c = compare_matched(cand, ref, SHELL)
    assert (c.status, c.relative_outcome, c.attempts) == ("completed", "same", 2)
    assert (cand.calls, ref.calls) == (2, 2)


def test_matched_two_failures_is_comparison_failed() -> None:
    cand = Runs(EnvError("timeout"), shell(0, 0))
    ref = Runs(v(completed=False))
    c = compare_matched(cand, ref, SHELL)
    assert (c.status, c.relative_outcome, c.attempts) == ("comparison_failed", None, 2)
    assert "attempt 1: candidate run raised EnvError: timeout" in c.reason
    assert "attempt 2: reference verification did not complete" in c.reason


def test_matched_bug_propagates_and_attempts_validated() -> None:
    with pytest.raises(RuntimeError):
        compare_matched(Runs(RuntimeError("bug")), Runs(), SHELL)
    with pytest.raises(ConfigError, match="max_attempts"):
        compare_matched(Runs(), Runs(), SHELL, max_attempts=0)
    failing: Callable[[], Verification] = Runs(EnvError("x"), EnvError("y"), shell(0, 0))
    c = compare_matched(failing, Runs(shell(1, 0)), SHELL, max_attempts=3)
    assert (c.status, c.relative_outcome, c.attempts) == ("completed", "better", 3)


# Sign test hand cases: (better, worse, same, failed, expected, p).
VERDICT_TABLE = [
    (8, 0, 0, 0, "better", 2 / 2**8),
    (0, 8, 3, 1, "worse", 2 / 2**8),
    (3, 2, 0, 0, "same", 1.0),
    (6, 0, 0, 0, "better", 2 / 2**6),
    (5, 0, 0, 0, "same", 2 / 2**5),
    (4, 0, 0, 0, "same", 2 / 2**4),
    (0, 0, 7, 2, "same", 1.0),
    (9, 1, 0, 0, "better", 2 * 11 / 2**10),
]


@pytest.mark.parametrize(("better", "worse", "same", "failed", "expected", "p"), VERDICT_TABLE)
def test_verdict_hand_cases(better: int, worse: int, same: int, failed: int, expected: str, p: float) -> None:
    outcomes = ["better"] * better + ["worse"] * worse + ["same"] * same + [None] * failed
    result = verdict(outcomes)
    assert result.relative_outcome == expected
    assert result.p_value == pytest.approx(p)
    assert (result.better, result.worse, result.same, result.failed) == (better, worse, same, failed)


def test_verdict_alpha_and_validation() -> None:
    assert verdict(["better"] * 5, alpha=0.1).relative_outcome == "better"
    assert verdict([]).relative_outcome == "same"
    with pytest.raises(ConfigError, match="alpha"):
        verdict(["better"], alpha=0.0)
    with pytest.raises(ContractError):
        verdict(["great"])  # type: ignore[list-item]


def _sign_test_loop(better: int, worse: int) -> float:
    n, k = better + worse, min(better, worse)
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["better", "same", "worse", None]), max_size=60), st.floats(0.001, 0.5))
def test_verdict_matches_plain_loop_sign_test(outcomes: list[str | None], alpha: float) -> None:
    result = verdict(outcomes, alpha)
    b, w = outcomes.count("better"), outcomes.count("worse")
    p = _sign_test_loop(b, w)
    assert result.p_value == pytest.approx(p, rel=1e-9, abs=1e-12)
    expected = ("better" if b > w else "worse") if p <= alpha and b != w else "same"
    if abs(p - alpha) > 1e-9:  # skip the knife edge where round-off decides
        assert result.relative_outcome == expected


def test_mixture_guard_names_regressed_environment() -> None:
    # browser: 2 worse / 10 completed = 0.2 > 0.1, hidden by shell's gains in the pooled count.
    result = mixture_verdict({"shell": ["better"] * 8, "browser": ["worse"] * 2 + ["same"] * 8})
    assert result.relative_outcome == "worse"
    assert result.regressed == ["browser"]
    assert "browser" in result.reason and "shell" not in result.reason
    assert result.overall.better == 8 and result.overall.worse == 2
    assert result.per_environment["browser"].worse == 2


def test_mixture_without_regression_uses_pooled_verdict() -> None:
    result = mixture_verdict({"shell": ["better"] * 8, "browser": ["better", "worse"] + ["same"] * 8})
    assert (result.relative_outcome, result.regressed) == ("better", [])
    assert result.overall.p_value == pytest.approx(2 * 11 / 2**10)


def test_mixture_tolerance_is_strict_and_failures_excluded() -> None:
    # 1 worse out of 10 completed = 0.1 exactly: not above tolerance; failed pairs are not in the share.
    outcomes = {"shell": ["worse"] + ["same"] * 9 + [None] * 5}
    assert mixture_verdict(outcomes, tolerance=0.1).relative_outcome == "same"
    assert mixture_verdict(outcomes, tolerance=0.05).regressed == ["shell"]


def test_mixture_own_test_worse_trips_guard_even_at_full_tolerance() -> None:
    result = mixture_verdict({"orchestrator": ["worse"] * 6, "shell": ["better"] * 20}, tolerance=1.0)
    assert (result.relative_outcome, result.regressed) == ("worse", ["orchestrator"])
    with pytest.raises(ConfigError, match="tolerance"):
        mixture_verdict({}, tolerance=1.5)


def test_compare_config() -> None:
    cfg = CompareConfig()
    assert (cfg.max_attempts, cfg.alpha, cfg.mixture_tolerance) == (2, 0.05, 0.1)
    assert all(f.description for f in CompareConfig.model_fields.values())
    with pytest.raises(ConfigError):
        load_config(CompareConfig, overrides={"max_attempts": 0})
    with pytest.raises(ConfigError, match="did you mean 'alpha'"):
        load_config(CompareConfig, overrides={"alpah": 0.1})

"""Matched comparison: the same task under the candidate and the reference checkpoint, and its statistics.

ARCHITECTURE §5. One task (same seed) runs under the candidate (``active``) and under the reference
(``pre_update_ref``); an environment :class:`Comparator` turns the two verifications into ``better`` /
``same`` / ``worse`` with primary rules and, only on a primary tie, secondary rules. A failed run on either
side is retried once with a fresh pair of runs; two failed attempts give ``comparison_failed`` (never
counted as better). Batches and epochs aggregate paired outcomes with an exact two-sided sign test, and a
mixture verdict also guards each environment against a regression hidden by the others.

Comparators are looked up by environment name in :data:`COMPARATORS`; browser and orchestrator register
theirs with :func:`register_comparator`.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import Field
from scipy.stats import binomtest

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Comparison, Outcome, Record, RelativeOutcome, Verification
from aios_rl.contracts.errors import AiosRlError, ConfigError, ContractError

__all__ = [
    "CompareConfig",
    "RuleVerdict",
    "Comparator",
    "ShellComparator",
    "COMPARATORS",
    "register_comparator",
    "get_comparator",
    "compare_verifications",
    "compare_matched",
    "Verdict",
    "MixtureVerdict",
    "verdict",
    "mixture_verdict",
]

logger = logging.getLogger(__name__)


class CompareConfig(ConfigModel):
    """Matched-comparison and verdict settings (defaults: ARCHITECTURE §5, reference §4.4)."""

    max_attempts: int = Field(default=2, ge=1, description="Comparison attempts before comparison_failed.")
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="Significance level of the sign test.")
    mixture_tolerance: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Largest (worse - better) / completed share one environment of a mixture may show.",
    )


class RuleVerdict(Record):
    """What a comparator decided about one candidate/reference pair, and from which evidence."""

    relative_outcome: RelativeOutcome
    decided_by: str = Field(description="Name of the rule that decided, or 'tie' when every rule tied.")
    primary_evidence: dict[str, Any] = Field(default_factory=dict)
    secondary_evidence: dict[str, Any] = Field(default_factory=dict)


class Comparator(Protocol):
    """Per-environment rules that rank a candidate run against a reference run of the same task.

    Callers pass only completed verifications (``completed=True``); :func:`compare_verifications` turns
    an incomplete one into ``comparison_failed`` before a comparator sees it.
    """

    def compare(self, candidate: Verification, reference: Verification) -> RuleVerdict:
        """Rank ``candidate`` against ``reference``: primary rules first, secondary rules on a tie."""
        ...


# Used when the verifier reported no structured evidence. ``blocked`` ranks below ``failure``: a blocked
# run produced nothing verifiable, a failed one at least ran to a verdict.
OUTCOME_RANK: dict[Outcome, int] = {"success": 3, "partial": 2, "failure": 1, "blocked": 0}


def _lower_is_better(value: int, reference: int) -> RelativeOutcome:
    return "better" if value < reference else "worse" if value > reference else "same"


def _count(evidence: Mapping[str, Any], key: str) -> int | None:
    """An evidence count, None when absent; a present value that is not a non-negative int is an error."""
    if key not in evidence:
        return None
    value = evidence[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContractError(f"comparison evidence '{key}' must be a non-negative int, got {value!r}")
    return value


class ShellComparator:
    """Shell (``failing_tests`` family) rules, from reference §4.3.

    Primary, lexicographic:
      1. fewer ``target_unresolved`` (target failing tests still failing) is better;
      2. on equal counts, fewer ``new_failures`` (tests that passed at reset and fail now) is better.
    Both keys must be present on both sides; otherwise the primary rule falls back to the outcome rank
    success > partial > failure > blocked (a verifier that reported no counts still reported an outcome).

    Secondary, only when the primary rule ties, each compared only when present on both sides and in this
    order: fewer ``no_progress_steps``, fewer ``unrelated_files_modified``, fewer ``steps``. A secondary
    rule may decide either way; it never overrides a primary decision. Every rule tying gives ``same``.

    Raises (from :meth:`compare`):
        ContractError: a verification is incomplete, or an evidence count is present but not an int >= 0.
    """

    primary_keys: tuple[str, ...] = ("target_unresolved", "new_failures")
    secondary_keys: tuple[str, ...] = ("no_progress_steps", "unrelated_files_modified", "steps")

    def compare(self, candidate: Verification, reference: Verification) -> RuleVerdict:
        """Rank ``candidate`` against ``reference`` (see the class docstring for the rules)."""
        if not (candidate.completed and reference.completed):
            raise ContractError("ShellComparator.compare needs completed verifications on both sides")
        primary: dict[str, Any] = {}
        decided = self._primary(candidate, reference, primary)
        if decided is not None:
            return RuleVerdict(relative_outcome=decided[1], decided_by=decided[0], primary_evidence=primary)
        secondary: dict[str, Any] = {}
        for key in self.secondary_keys:
            cand, ref = _count(candidate.evidence, key), _count(reference.evidence, key)
            if cand is None or ref is None:
                continue
            secondary[key] = {"candidate": cand, "reference": ref}
            outcome = _lower_is_better(cand, ref)
            if outcome != "same":
                return RuleVerdict(
                    relative_outcome=outcome,
                    decided_by=key,
                    primary_evidence=primary,
                    secondary_evidence=secondary,
                )
        return RuleVerdict(
            relative_outcome="same", decided_by="tie", primary_evidence=primary, secondary_evidence=secondary
        )

    def _primary(
        self, candidate: Verification, reference: Verification, evidence: dict[str, Any]
    ) -> tuple[str, RelativeOutcome] | None:
        """The deciding primary rule and its outcome, or None on a primary tie; fills ``evidence``."""
        counts = {
            key: (_count(candidate.evidence, key), _count(reference.evidence, key))
            for key in self.primary_keys
        }
        if any(value is None for pair in counts.values() for value in pair):
            cand, ref = OUTCOME_RANK[candidate.outcome], OUTCOME_RANK[reference.outcome]
            evidence["outcome_rank"] = {"candidate": candidate.outcome, "reference": reference.outcome}
            # Higher rank is better, so compare negated ranks with the lower-is-better helper.
            outcome = _lower_is_better(-cand, -ref)
            return ("outcome_rank", outcome) if outcome != "same" else None
        for key, (cand, ref) in counts.items():
            assert cand is not None and ref is not None  # checked just above
            evidence[key] = {"candidate": cand, "reference": ref}
            outcome = _lower_is_better(cand, ref)
            if outcome != "same":
                return key, outcome
        return None


COMPARATORS: dict[str, Comparator] = {"shell": ShellComparator()}

_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def register_comparator(name: str, comparator: Comparator, *, replace: bool = False) -> None:
    """Register ``comparator`` for environment ``name`` in :data:`COMPARATORS`.

    Raises:
        ConfigError: the name is not a valid environment name, or is taken and ``replace`` is False.
    """
    if not _NAME.match(name):
        raise ConfigError(f"comparator name {name!r} must match {_NAME.pattern} (an environment name)")
    if name in COMPARATORS and not replace:
        raise ConfigError(f"a comparator for '{name}' is already registered; pass replace=True to replace it")
    COMPARATORS[name] = comparator


def get_comparator(name: str) -> Comparator:
    """The comparator registered for environment ``name``.

    Raises:
        ConfigError: no comparator is registered under that name (with the closest registered name).
    """
    if name in COMPARATORS:
        return COMPARATORS[name]
    close = difflib.get_close_matches(name, list(COMPARATORS), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ConfigError(
        f"no comparator registered for environment '{name}'{hint} "
        f"(registered: {', '.join(sorted(COMPARATORS))})"
    )


def compare_verifications(
    candidate: Verification,
    reference: Verification,
    comparator: Comparator,
    *,
    attempts: int = 1,
    candidate_checkpoint: str | None = None,
    reference_checkpoint: str | None = None,
) -> Comparison:
    """One comparison attempt from two verifications (pure).

    An incomplete verification on either side makes this attempt ``comparison_failed`` with the side
    named in ``reason``; otherwise the comparator's verdict and evidence are recorded.

    Args:
        candidate: verification of the task run under the candidate checkpoint.
        reference: verification of the same task (same seed) under the reference checkpoint.
        comparator: the environment's rules.
        attempts: the attempt number to record (``compare_matched`` passes its count).
        candidate_checkpoint: candidate checkpoint id, recorded on the result.
        reference_checkpoint: reference checkpoint id, recorded on the result.
    """
    ids = {"candidate_checkpoint": candidate_checkpoint, "reference_checkpoint": reference_checkpoint}
    failed = [side for side, v in (("candidate", candidate), ("reference", reference)) if not v.completed]
    if failed:
        return Comparison(
            status="comparison_failed",
            attempts=attempts,
            reason=" and ".join(failed) + " verification did not complete",
            **ids,
        )
    rule = comparator.compare(candidate, reference)
    return Comparison(
        status="completed",
        relative_outcome=rule.relative_outcome,
        primary_evidence=rule.primary_evidence,
        secondary_evidence=rule.secondary_evidence,
        attempts=attempts,
        reason=f"decided by {rule.decided_by}",
        **ids,
    )


def _run_side(run: Callable[[], Verification], side: str) -> tuple[Verification | None, str]:
    """Run one side; a raised AiosRlError or an incomplete verification is a failed run (with why)."""
    try:
        result = run()
    except AiosRlError as exc:  # sandbox/env boundary: recorded on the comparison, not swallowed
        return None, f"{side} run raised {type(exc).__name__}: {exc}"
    if not result.completed:
        return None, f"{side} verification did not complete"
    return result, ""


def compare_matched(
    run_candidate: Callable[[], Verification],
    run_reference: Callable[[], Verification],
    comparator: Comparator,
    *,
    max_attempts: int = 2,
    candidate_checkpoint: str | None = None,
    reference_checkpoint: str | None = None,
) -> Comparison:
    """Run a matched comparison, retrying a failed attempt with a fresh pair of runs.

    Each attempt calls ``run_candidate()`` and then ``run_reference()``; each must run the task afresh
    (new sandbox, same task and seed). A side fails when it raises an :class:`AiosRlError` or returns
    ``completed=False``; other exceptions are bugs and propagate. When the candidate fails the reference is
    not run for that attempt (the attempt is discarded anyway). Both sides re-run on the next attempt.

    Returns:
        ``completed`` with ``attempts`` = the attempt that succeeded, or after ``max_attempts`` failed
        attempts ``comparison_failed`` with ``relative_outcome=None`` and every attempt's failure in
        ``reason``.

    Raises:
        ConfigError: ``max_attempts < 1``.
    """
    if max_attempts < 1:
        raise ConfigError(f"compare_matched: max_attempts must be >= 1, got {max_attempts}")
    failures: list[str] = []
    for attempt in range(1, max_attempts + 1):
        candidate, why = _run_side(run_candidate, "candidate")
        reference = None
        if candidate is not None:
            reference, why = _run_side(run_reference, "reference")
        if candidate is not None and reference is not None:
            return compare_verifications(
                candidate,
                reference,
                comparator,
                attempts=attempt,
                candidate_checkpoint=candidate_checkpoint,
                reference_checkpoint=reference_checkpoint,
            )
        logger.warning("matched comparison attempt %d/%d failed: %s", attempt, max_attempts, why)
        failures.append(f"attempt {attempt}: {why}")
    return Comparison(
        status="comparison_failed",
        attempts=max_attempts,
        reason="; ".join(failures),
        candidate_checkpoint=candidate_checkpoint,
        reference_checkpoint=reference_checkpoint,
    )


class Verdict(Record):
    """A batch or epoch verdict from paired outcomes (sign test)."""

    relative_outcome: RelativeOutcome
    better: int = Field(ge=0)
    same: int = Field(ge=0)
    worse: int = Field(ge=0)
    failed: int = Field(ge=0, description="comparison_failed pairs (None outcomes), excluded from the test.")
    p_value: float = Field(ge=0.0, le=1.0, description="Exact two-sided sign-test p-value; 1 without pairs.")
    alpha: float


class MixtureVerdict(Record):
    """A mixture verdict: the pooled verdict, each environment's, and the environments that regressed."""

    relative_outcome: RelativeOutcome
    overall: Verdict
    per_environment: dict[str, Verdict]
    regressed: list[str] = Field(default_factory=list, description="Environments that tripped the guard.")
    reason: str = ""


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha}")


def verdict(outcomes: Sequence[RelativeOutcome | None], alpha: float = 0.05) -> Verdict:
    """Aggregate paired outcomes with an exact two-sided sign test.

    ``better`` and ``worse`` pairs are the decisive ones (ties and failed comparisons carry no sign).
    Under H0 a decisive pair is better with probability 1/2; ``p = binomtest(better, better + worse)``.
    If ``p <= alpha`` the verdict is ``better`` or ``worse`` by the majority; otherwise (including no
    decisive pairs at all) it is ``same``: inconclusive is treated as no change. ``None`` entries are
    ``comparison_failed`` pairs, counted in ``failed`` only.

    Note that with alpha = 0.05 at least 6 decisive pairs, all in one direction, are needed (6-0 gives
    p = 0.031; 5-0 gives 0.0625), so a micro-batch of 4 alone is always ``same``.

    Example:
        >>> verdict(["better"] * 8).relative_outcome
        'better'
        >>> verdict(["better"] * 3 + ["worse"] * 2).relative_outcome
        'same'

    Raises:
        ConfigError: ``alpha`` not in (0, 1).
    """
    _check_alpha(alpha)
    better = sum(o == "better" for o in outcomes)
    worse = sum(o == "worse" for o in outcomes)
    same = sum(o == "same" for o in outcomes)
    failed = sum(o is None for o in outcomes)
    if better + worse + same + failed != len(outcomes):
        raise ContractError(f"verdict: outcomes must be better/same/worse/None, got {list(outcomes)!r}")
    if outcomes and failed == len(outcomes):
        logger.warning("verdict: all %d comparisons failed; verdict is 'same' by default", failed)
    p_value = float(binomtest(better, better + worse, 0.5).pvalue) if better + worse else 1.0
    p_value = min(1.0, p_value)  # binomtest can return 1 + round-off
    result: RelativeOutcome = "same"
    if p_value <= alpha and better != worse:
        result = "better" if better > worse else "worse"
    return Verdict(
        relative_outcome=result,
        better=better,
        same=same,
        worse=worse,
        failed=failed,
        p_value=p_value,
        alpha=alpha,
    )


def _regression_share(v: Verdict) -> float:
    completed = v.better + v.same + v.worse
    return (v.worse - v.better) / completed if completed else 0.0


def mixture_verdict(
    outcomes_by_env: Mapping[str, Sequence[RelativeOutcome | None]],
    tolerance: float = 0.1,
    alpha: float = 0.05,
) -> MixtureVerdict:
    """Verdict of a mixture of environments, with a per-environment regression guard.

    1. ``overall`` is :func:`verdict` on all pairs pooled across environments.
    2. Each environment gets its own :func:`verdict`. An environment *regresses* when its own verdict is
       ``worse`` or its regression share ``(worse - better) / (better + same + worse)`` is strictly greater
       than ``tolerance`` (failed comparisons are not in the share; an environment without completed pairs
       has share 0).
    3. If any environment regresses, the mixture verdict is ``worse`` and ``regressed`` names them
       (sorted); otherwise it is the overall verdict. So a gain in one environment never hides a loss in
       another.

    Raises:
        ConfigError: ``tolerance`` not in [0, 1] or ``alpha`` not in (0, 1).
    """
    _check_alpha(alpha)
    if not 0.0 <= tolerance <= 1.0:
        raise ConfigError(f"mixture tolerance must be in [0, 1], got {tolerance}")
    per_env = {env: verdict(outs, alpha) for env, outs in sorted(outcomes_by_env.items())}
    overall = verdict([o for outs in outcomes_by_env.values() for o in outs], alpha)
    regressed = [
        env for env, v in per_env.items() if v.relative_outcome == "worse" or _regression_share(v) > tolerance
    ]
    if regressed:
        shares = {env: _regression_share(per_env[env]) for env in regressed}
        detail = ", ".join(f"{env} (worse-better share {share:.2f})" for env, share in shares.items())
        logger.warning("mixture verdict: regression in %s", detail)
        return MixtureVerdict(
            relative_outcome="worse",
            overall=overall,
            per_environment=per_env,
            regressed=regressed,
            reason=f"per-environment guard (tolerance {tolerance}): {detail}",
        )
    return MixtureVerdict(
        relative_outcome=overall.relative_outcome,
        overall=overall,
        per_environment=per_env,
        reason=f"pooled sign test: {overall.better} better, {overall.worse} worse, p={overall.p_value:.3g}",
    )

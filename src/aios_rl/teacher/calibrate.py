"""Judge governance: calibrate an LLM teacher against the oracle, and watch it during training.

An LLM judge earns the right to shape rewards by agreeing with objective evidence. Two tools:

:func:`calibrate` runs the teacher and the oracle on a gold set of (task, episode) pairs and reports

- ``agreement``: the fraction of scored episodes where the sign of the teacher's shaping matches the
  objective outcome (success/partial = positive, failure = negative; ``blocked`` episodes have no sign and
  are not scored). Zero shaping on a decided outcome counts as a disagreement: abstaining is not agreeing.
- ``pearson``: the correlation of the teacher's shaping with the oracle's shaping (None when fewer than two
  pairs or either side is constant).
- ``boundary_rate``: the fraction of valid teacher answers flagged ``boundary``.
- ``n``, ``n_valid`` (teacher answered validly), ``n_scored``, status counts, disagreeing episode ids,
  and ``passed`` against :class:`CalibrationThresholds`.

The objective outcome of an episode is its verification's outcome when the verifier completed, else the
episode's ``outcome``. Only ``complete``/``fallback_complete`` teacher answers are scored; the others
are counted in ``teacher_statuses``.

:class:`DisagreementMonitor` applies the same sign rule online over a rolling window of training episodes
and raises an alarm when the disagreement rate exceeds the threshold (default 0.3): a warning in the log,
the metric ``teacher/disagreement_rate``, and a :class:`DisagreementAlarm` record the caller writes to the
ledger as an event. The alarm is edge-triggered: it fires when the rate crosses the threshold and re-arms
when the rate falls back to or below it, so a bad stretch produces one event, not one per episode. A resumed
run restores the window (and that edge state) with :meth:`DisagreementMonitor.restore` from the episodes
it stored, so a run continued in many short invocations is watched as one.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Episode, Outcome, Task, TeacherSignal
from aios_rl.contracts.errors import ConfigError
from aios_rl.contracts.protocols import Teacher

__all__ = [
    "CalibrationReport",
    "CalibrationThresholds",
    "DisagreementAlarm",
    "DisagreementMonitor",
    "MonitorConfig",
    "agrees",
    "calibrate",
    "objective_outcome",
    "pearson",
]

logger = logging.getLogger(__name__)

VALID_STATUSES = ("complete", "fallback_complete")
_OUTCOME_SIGN: dict[str, int] = {"success": 1, "partial": 1, "failure": -1, "blocked": 0}
_MAX_LISTED = 50


def objective_outcome(episode: Episode) -> Outcome:
    """The verifier's outcome when it completed, else the episode's recorded outcome."""
    v = episode.verification
    return v.outcome if v is not None and v.completed else episode.outcome


def agrees(signal: TeacherSignal | None, episode: Episode) -> bool | None:
    """Whether the sign of the teacher's shaping matches the objective outcome.

    Returns None when there is nothing to score: no usable teacher answer, or an outcome without a sign
    (``blocked``).
    """
    if signal is None or signal.status not in VALID_STATUSES:
        return None
    truth = _OUTCOME_SIGN[objective_outcome(episode)]
    if truth == 0:
        return None
    said = (signal.shaping > 0) - (signal.shaping < 0)
    return said == truth


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation of two equal-length samples; None for fewer than 2 pairs or a constant side."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    r = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / math.sqrt(sxx * syy)
    return max(-1.0, min(1.0, r))


class CalibrationThresholds(ConfigModel):
    """What a teacher must reach on the gold set to be trusted with reward shaping."""

    min_agreement: float = Field(
        default=0.7, ge=0.0, le=1.0, description="Smallest sign agreement with outcomes."
    )
    min_correlation: float = Field(
        default=0.3, ge=-1.0, le=1.0, description="Smallest Pearson correlation with the oracle's shaping."
    )
    min_scored: int = Field(default=5, ge=1, description="Fewest scored episodes for a verdict.")


class CalibrationReport(BaseModel):
    """The result of :func:`calibrate` (stored as JSON by ``aios-rl teacher calibrate``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = Field(description="The calibrated teacher (its primary backend).")
    n: int = Field(description="Gold episodes.")
    n_valid: int = Field(description="Episodes the teacher answered validly (complete or fallback_complete).")
    n_scored: int = Field(description="Valid answers on episodes whose outcome has a sign.")
    agreement: float | None = Field(description="Fraction of scored episodes where the shaping sign matches.")
    pearson: float | None = Field(description="Correlation of teacher shaping with the oracle's shaping.")
    n_correlated: int = Field(description="Pairs (valid teacher, valid oracle) the correlation used.")
    boundary_rate: float | None = Field(description="Fraction of valid answers flagged boundary.")
    teacher_statuses: dict[str, int] = Field(description="Teacher signal statuses, counted.")
    oracle_failures: int = Field(description="Episodes where the oracle gave no usable signal.")
    disagreements: list[str] = Field(
        description=f"Episode ids where the signs disagree (first {_MAX_LISTED})."
    )
    passed: bool = Field(description="All thresholds met.")
    reasons: list[str] = Field(description="Why it did not pass (empty when it did).")
    thresholds: dict[str, Any] = Field(description="The thresholds applied.")


def calibrate(
    teacher: Teacher,
    oracle: Teacher,
    items: Iterable[tuple[Task, Episode]],
    thresholds: CalibrationThresholds | None = None,
) -> CalibrationReport:
    """Score ``teacher`` against objective outcomes and the ``oracle`` on a gold set (module docstring).

    Args:
        teacher: the judge under test, usually a :class:`~aios_rl.teacher.gateway.TeacherGateway`; its
            ``signal_many`` is used when present so calls run concurrently.
        oracle: the reference teacher (e.g. ``ShellOracle``, or recorded oracle signals).
        items: the gold set.
        thresholds: pass/fail limits; defaults to :class:`CalibrationThresholds` ().
    """
    thresholds = thresholds or CalibrationThresholds()
    pairs = list(items)
    many = getattr(teacher, "signal_many", None)
    said = list(many(pairs)) if callable(many) else [teacher.signal(t, e) for t, e in pairs]
    truth = [oracle.signal(t, e) for t, e in pairs]
    valid = [s.status in VALID_STATUSES for s in said]
    scored = [(e, agrees(s, e)) for (_, e), s in zip(pairs, said, strict=True)]
    verdicts = [a for _, a in scored if a is not None]
    both = [(s.shaping, o.shaping) for s, o in zip(said, truth, strict=True)
            if s.status in VALID_STATUSES and o.status in VALID_STATUSES]
    r = pearson([x for x, _ in both], [y for _, y in both])
    n_valid = sum(valid)
    agreement = sum(verdicts) / len(verdicts) if verdicts else None
    reasons = _reasons(agreement, r, len(verdicts), thresholds)
    return CalibrationReport(
        backend=str(getattr(teacher, "backend", type(teacher).__name__)),
        n=len(pairs),
        n_valid=n_valid,
        n_scored=len(verdicts),
        agreement=agreement,
        pearson=r,
        n_correlated=len(both),
        boundary_rate=sum(s.boundary for s, ok in zip(said, valid, strict=True) if ok) / n_valid
        if n_valid
        else None,
        teacher_statuses=dict(Counter(s.status for s in said)),
        oracle_failures=sum(o.status not in VALID_STATUSES for o in truth),
        disagreements=[e.episode_id for e, a in scored if a is False][:_MAX_LISTED],
        passed=not reasons,
        reasons=reasons,
        thresholds=thresholds.model_dump(),
    )


def _reasons(
    agreement: float | None, r: float | None, scored: int, limits: CalibrationThresholds
) -> list[str]:
    reasons = []
    if scored < limits.min_scored:
        reasons.append(f"only {scored} scored episodes; need at least {limits.min_scored}")
    if agreement is None or agreement < limits.min_agreement:
        shown = "undefined" if agreement is None else f"{agreement:.2f}"
        reasons.append(f"agreement {shown} is below {limits.min_agreement}")
    if r is None or r < limits.min_correlation:
        shown = "undefined (too few pairs or a constant side)" if r is None else f"{r:.2f}"
        reasons.append(f"correlation with the oracle {shown} is below {limits.min_correlation}")
    return reasons


class MonitorConfig(ConfigModel):
    """Rolling teacher-vs-verification disagreement alarm."""

    window: int = Field(default=100, ge=1, description="Scored episodes in the rolling window.")
    threshold: float = Field(
        default=0.3, ge=0.0, le=1.0, description="Disagreement rate above which the alarm fires."
    )
    min_samples: int = Field(
        default=20, ge=1, description="Scored episodes needed before the alarm can fire (<= window)."
    )

    @model_validator(mode="after")
    def _reachable(self) -> MonitorConfig:
        # The window holds at most `window` samples: a larger min_samples would switch the alarm off.
        if self.min_samples > self.window:
            raise ConfigError(
                f"monitor: min_samples={self.min_samples} exceeds window={self.window}, so the alarm could "
                f"never fire; set min_samples <= {self.window} or window >= {self.min_samples}"
            )
        return self


@dataclass(frozen=True)
class DisagreementAlarm:
    """One alarm: the caller writes it to the ledger as event ``kind`` with :meth:`payload`."""

    rate: float
    threshold: float
    samples: int
    window: int
    backend: str
    kind: str = "teacher.disagreement_alarm"

    def payload(self) -> dict[str, Any]:
        """The event payload (JSON-ready)."""
        return {
            "rate": self.rate,
            "threshold": self.threshold,
            "samples": self.samples,
            "window": self.window,
            "backend": self.backend,
        }


class DisagreementMonitor:
    """Tracks teacher-vs-verification sign disagreement during training (module docstring).

    Thread-safe: rollout workers may call :meth:`observe` concurrently.

    Example:
        >>> monitor = DisagreementMonitor(MonitorConfig(window=50, threshold=0.3, min_samples=10))
        >>> alarm = monitor.observe(episode)  # doctest: +SKIP
        >>> if alarm: plane.record_event(alarm.kind, alarm.payload())  # doctest: +SKIP
    """

    METRIC = "teacher/disagreement_rate"

    def __init__(self, config: MonitorConfig | None = None) -> None:
        self.config = config or MonitorConfig()
        self._window: deque[bool] = deque(maxlen=self.config.window)
        self._alarmed = False
        self._alarms = 0
        self._lock = threading.Lock()

    @property
    def rate(self) -> float:
        """The disagreement rate over the current window (0.0 when empty)."""
        with self._lock:
            return self._rate()

    def _rate(self) -> float:
        return sum(not a for a in self._window) / len(self._window) if self._window else 0.0

    def observe(self, episode: Episode, signal: TeacherSignal | None = None) -> DisagreementAlarm | None:
        """Add one episode (its own ``teacher_signal`` unless ``signal`` is given).

        Returns:
            An alarm when this episode pushed the rate above the threshold (edge-triggered), else None.
            Unscorable episodes (no valid teacher answer, ``blocked`` outcome) are ignored.
        """
        signal = signal if signal is not None else episode.teacher_signal
        verdict = agrees(signal, episode)
        if verdict is None:
            return None
        with self._lock:
            fired = self._add(verdict)
            rate, samples = self._rate(), len(self._window)
        if not fired:
            return None
        backend = signal.backend if signal is not None else "?"
        logger.warning(
            "teacher %s disagrees with verification on %.0f%% of the last %d episodes (threshold %.0f%%)",
            backend, 100 * rate, samples, 100 * self.config.threshold,
        )
        return DisagreementAlarm(rate=rate, threshold=self.config.threshold, samples=samples,
                                 window=self.config.window, backend=backend)

    def restore(self, episodes: Iterable[Episode], alarms: int = 0) -> None:
        """Observe again, oldest first, episodes an earlier process observed (a resumed run's), so the
        window and the alarm's edge state go on where they were. The alarms they raised were recorded
        then: none is returned or logged again, and the count of alarms raised so far is ``alarms`` (the
        run's recorded ones), not what fired during the replay."""
        with self._lock:
            for episode in episodes:
                verdict = agrees(episode.teacher_signal, episode)
                if verdict is not None:
                    self._add(verdict)
            self._alarms = alarms

    def _add(self, verdict: bool) -> bool:
        """Push one verdict (lock held); whether the alarm fires on it."""
        self._window.append(verdict)
        if self._rate() <= self.config.threshold:
            self._alarmed = False
            return False
        if self._alarmed or len(self._window) < self.config.min_samples:
            return False
        self._alarmed = True
        self._alarms += 1
        return True

    def metrics(self) -> dict[str, float]:
        """``teacher/disagreement_rate``, the window's sample count and the alarms raised so far."""
        with self._lock:
            return {self.METRIC: self._rate(), "teacher/disagreement_samples": float(len(self._window)),
                    "teacher/disagreement_alarms": float(self._alarms)}

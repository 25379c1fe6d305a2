"""The teacher gateway: one ``signal(task, episode)`` over a primary backend and ordered fallbacks.

For each episode the gateway builds the environment's prompt (:mod:`aios_rl.teacher.prompts`) and asks the
backends in order ``[backend, *fallbacks]`` until one gives a valid teacher answer
(:mod:`aios_rl.teacher.parse`). Per backend: a cached reply is used without a call; otherwise the call runs
under a concurrency limit (a semaphore shared by every thread using this gateway), with the configured
timeout, and a retryable failure (timeout, connection error, HTTP 429/5xx, non-zero exit) is retried up to
``retries`` times with exponential backoff. Invalid replies are not retried: the same prompt tends to get
the same confused answer, so the next backend is a better bet.

Statuses (``TeacherSignal.status``), following the original gateway (reference §7):

- ``complete``: the primary answered validly; ``fallback_complete``: a fallback did (``backend`` names it).
- ``invalid_response``: no valid answer, and at least one backend answered with something that is not a
  valid teacher object; attributed to the **last** such backend.
- ``failed_all_backends``: every backend errored or timed out; attributed to the primary.

Failed signals carry shaping 0 and confidence 0, and ``error`` lists each backend's reason, so reward fusion
ignores them (``RewardConfig.use_teacher_statuses``). A signal's ``cost_usd`` is what every call behind it
cost where the backend reports it: invalid replies, failed and retried calls included. ``signal`` never
raises for a backend failure: the gateway is the process boundary of the CLI and HTTP teachers, and a crash
inside a third-party backend object is logged with its traceback, counted and recorded as that backend's
failure.

The ``oracle`` backend is any object with ``signal(task, episode) -> TeacherSignal`` passed as ``oracle=``
(e.g. ``ShellOracle``); its answer is adopted as is, re-labelled by position. It is never cached.

The per-call timeout is enforced by the built-in backends (process-group kill, socket deadline); a custom
backend passed in ``backends=`` must honour the ``timeout_s`` it is given.
"""

from __future__ import annotations

import difflib
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Episode, Task, TeacherSignal
from aios_rl.contracts.errors import AiosRlError, ConfigError, StorageError
from aios_rl.contracts.protocols import Teacher
from aios_rl.storage.teacher_cache import TeacherCache, cache_key
from aios_rl.teacher.backend import BackendFailure, BackendReply, PromptBackend
from aios_rl.teacher.cli_backends import CLI_TOOLS, CliBackend, CliBackendConfig
from aios_rl.teacher.http_backend import OpenAIBackend, OpenAIBackendConfig
from aios_rl.teacher.parse import ReplyProblem, TeacherAnswer, parse_reply, utf8_text
from aios_rl.teacher.prompts import build_prompt

__all__ = [
    "BACKENDS",
    "TeacherConfig",
    "TeacherGateway",
    "canonical_teacher_spec",
    "checked_backends",
    "make_backend",
    "resolve_backend",
    "teacher_backends",
]

logger = logging.getLogger(__name__)

BACKENDS: tuple[str, ...] = (*CLI_TOOLS, "openai", "oracle")
# The original's normalised ids (reference §7), accepted so its configs keep working.
ALIASES: dict[str, str] = {"claude-code": "claude", "codex-cli": "codex", "gemini-cli": "gemini"}
_MAX_ERROR_CHARS = 1_000
_MAX_CALL_COST_USD = 1e12


def resolve_backend(name: str) -> str:
    """The canonical backend name for ``name`` (aliases accepted).

    Raises:
        ConfigError: unknown name, with the closest known names.
    """
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key in BACKENDS:
        return key
    close = difflib.get_close_matches(key, [*BACKENDS, *ALIASES], n=2, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else f"known: {', '.join(BACKENDS)}"
    raise ConfigError(f"unknown teacher backend {name!r}; {hint}")


def teacher_backends(spec: str) -> list[str]:
    """``"claude,oracle"`` → ``["claude", "oracle"]``; ``"none"`` → ``[]``."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if names == ["none"]:
        return []
    if not names or "none" in names:
        raise ConfigError(
            f"--teacher must be 'none' or backends like 'oracle' or 'claude,oracle', got {spec!r}"
        )
    return names


def canonical_teacher_spec(spec: str) -> str:
    """A ``--teacher`` spec with every known backend written canonically: ``"Oracle"`` → ``"oracle"``,
    ``"claude-code, ORACLE"`` → ``"claude,oracle"``, ``"None"`` → ``"none"``.

    The configuration stores this form, so every place that asks "is the oracle first?" reads the same
    answer whatever the spelling. Names that are not backends are kept as written (and a malformed spec
    as given), so the check before a run starts (:func:`checked_backends`) names them as the user typed
    them.
    """
    names = [n.strip() for n in spec.split(",")]
    if [n.lower() for n in names] == ["none"]:
        return "none"
    if not all(names):
        return spec
    canonical = []
    for name in names:
        try:
            canonical.append(resolve_backend(name))
        except ConfigError:
            canonical.append(name)
    return ",".join(canonical)


def checked_backends(spec: str) -> list[str]:
    """The backends of a ``--teacher`` spec (:func:`teacher_backends`), each checked to be a known backend.

    The names are returned as written; the configurations store :func:`canonical_teacher_spec`'s form,
    so what reaches here from them is already canonical.

    Raises:
        ConfigError: a malformed spec, an unknown backend (with the closest known names), or a backend
            named twice (as :class:`TeacherConfig` refuses it).
    """
    names = teacher_backends(spec)
    resolved = [resolve_backend(name) for name in names]
    repeated = sorted({n for n in resolved if resolved.count(n) > 1})
    if repeated:
        raise ConfigError(f"--teacher {spec!r} names {', '.join(repeated)} more than once; list each "
                          "backend once")
    return names


class TeacherConfig(ConfigModel):
    """Which teacher backends to ask, in what order, and how patiently."""

    backend: str = Field(
        default="claude", description="Primary backend: claude, codex, gemini, opencode, openai or oracle."
    )
    fallbacks: tuple[str, ...] = Field(
        default=(), description="Backends tried in order when the primary gives no valid answer."
    )
    timeout_s: float = Field(
        default=120.0, gt=0.0, le=86_400.0, description="Wall-clock limit of one backend call, in seconds."
    )
    retries: int = Field(
        default=1, ge=0, le=10, description="Extra attempts per backend after a retryable failure."
    )
    backoff_s: float = Field(
        default=1.0, ge=0.0, le=86_400.0,
        description="Sleep before the first retry; times backoff_factor after each.",
    )
    backoff_factor: float = Field(
        default=2.0, ge=1.0, description="Growth of the retry sleep (exponential backoff)."
    )
    max_backoff_s: float = Field(
        default=30.0, ge=0.0, le=86_400.0, description="Upper bound of one retry sleep, in seconds."
    )
    max_concurrency: int = Field(
        default=4, ge=1, le=256, description="Backend calls in flight at once, over all threads."
    )
    cache: bool = Field(
        default=True, description="Reuse valid replies for an identical (backend, model, prompt)."
    )
    cache_path: str | None = Field(
        default=None, description="SQLite file of the reply cache; None keeps it in memory."
    )
    prompt_chars: int = Field(
        default=12_000, ge=1_000, le=100_000, description="Character budget of one prompt."
    )
    claude: CliBackendConfig = Field(
        default_factory=CliBackendConfig, description="Claude Code CLI settings."
    )
    codex: CliBackendConfig = Field(default_factory=CliBackendConfig, description="Codex CLI settings.")
    gemini: CliBackendConfig = Field(default_factory=CliBackendConfig, description="Gemini CLI settings.")
    opencode: CliBackendConfig = Field(default_factory=CliBackendConfig, description="opencode CLI settings.")
    openai: OpenAIBackendConfig = Field(
        default_factory=OpenAIBackendConfig, description="OpenAI-compatible HTTP settings."
    )

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        return resolve_backend(name)

    @field_validator("fallbacks")
    @classmethod
    def _known_fallbacks(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(resolve_backend(n) for n in names if n)

    @model_validator(mode="after")
    def _no_repeats(self) -> TeacherConfig:
        order = [self.backend, *self.fallbacks]
        repeated = sorted({n for n in order if order.count(n) > 1})
        if repeated:
            raise ConfigError(
                f"teacher: backend order {order} names {', '.join(repeated)} more than once; "
                "list each backend once"
            )
        return self


def with_api_key_of(config: TeacherConfig, source: TeacherConfig) -> TeacherConfig:
    """``config`` (read back from a run's store, where the API key is never kept) with ``source``'s key: a
    resumed run compares and runs with the key given now."""
    openai = config.openai.model_copy(update={"api_key": source.openai.api_key})
    return config.model_copy(update={"openai": openai})


def make_backend(name: str, config: TeacherConfig) -> PromptBackend:
    """The built-in prompt backend ``name`` (not ``oracle``, which is an object the caller passes)."""
    name = resolve_backend(name)
    if name in CLI_TOOLS:
        return CliBackend(name, getattr(config, name))
    if name == "openai":
        return OpenAIBackend(config.openai)
    raise ConfigError(
        f"teacher backend {name!r} is not built from config; pass it to TeacherGateway(oracle=...)"
    )


@dataclass(frozen=True)
class _Attempt:
    """What one backend gave: a valid answer, an invalid reply, or a failure (exactly one is set)."""

    backend: str
    answer: TeacherAnswer | None = None
    invalid: str | None = None
    failure: str | None = None
    cost_usd: float | None = None


def _cost(value: Any) -> float | None:
    """A call's reported cost, or None when it is no cost we can record: not a number, negative, or absurd
    (``_MAX_CALL_COST_USD`` or more, like the CLI readers' bound), which summed over attempts and signals
    could overflow to inf, a value no TeacherSignal or metric accepts."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range is no cost we can record
        return None
    return number if math.isfinite(number) and 0 <= number < _MAX_CALL_COST_USD else None


def _as_text(value: Any) -> str | None:
    """Reply text as a str that SQLite and JSON accept (invalid UTF-8 and lone surrogates replaced)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        return utf8_text(value)
    return None


class TeacherGateway:
    """A :class:`~aios_rl.contracts.protocols.Teacher` over LLM backends with fallbacks (module docstring).

    Args:
        config: backend order, timeouts, retries, concurrency and cache settings.
        oracle: the object used for the ``oracle`` backend (any ``signal(task, episode)``); required when
            ``oracle`` is in the backend order.
        backends: prompt backends to use instead of the built-in ones, by backend name (tests, custom
            clients).
        cache: the reply cache; default: a :class:`~aios_rl.storage.teacher_cache.TeacherCache` at
            ``config.cache_path`` (in memory when None), or none when ``config.cache`` is false.

    Example:
        >>> gateway = TeacherGateway(TeacherConfig(backend="claude", fallbacks=("openai",)))  # doctest: +SKIP
        >>> gateway.signal(task, episode).status  # doctest: +SKIP
        'complete'
    """

    def __init__(
        self,
        config: TeacherConfig | None = None,
        *,
        oracle: Teacher | None = None,
        backends: Mapping[str, PromptBackend] | None = None,
        cache: TeacherCache | None = None,
    ) -> None:
        self.config = config or TeacherConfig()
        self.order: tuple[str, ...] = (self.config.backend, *self.config.fallbacks)
        if "oracle" in self.order and oracle is None:
            raise ConfigError(
                "teacher backend 'oracle' needs an oracle object: pass TeacherGateway(oracle=...)"
            )
        self._oracle = oracle
        given = {resolve_backend(k): v for k, v in (backends or {}).items()}
        self._backends: dict[str, PromptBackend] = {
            name: given[name] if name in given else make_backend(name, self.config)
            for name in self.order
            if name != "oracle"
        }
        if cache is None and self.config.cache:
            cache = TeacherCache(Path(self.config.cache_path) if self.config.cache_path else None)
        self._cache = cache if self.config.cache else None
        self._slots = threading.Semaphore(self.config.max_concurrency)
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._sums = dict.fromkeys(
            ("teacher/call_latency_s_sum", "teacher/call_latency_s_max", "teacher/cost_usd"), 0.0
        )

    @property
    def backend(self) -> str:
        """The primary backend's name (recorded on checkpoints as the teacher backend)."""
        return self.order[0]

    # -- the Teacher protocol -------------------------------------------------------------------------

    def signal(self, task: Task, episode: Episode) -> TeacherSignal:
        """Ask the backends in order about ``episode`` of ``task``. Never raises for backend failures."""
        start = time.monotonic()
        prompt: str | None = None
        attempts: list[_Attempt] = []
        for position, name in enumerate(self.order):
            if name == "oracle":
                attempt = self._ask_oracle(task, episode)
            else:
                if prompt is None:  # a lone surrogate (from a JSON escape) is text no argv or UTF-8 can carry
                    prompt = utf8_text(build_prompt(task, episode, budget_chars=self.config.prompt_chars))
                attempt = self._ask(name, prompt)
            attempts.append(attempt)
            if attempt.answer is not None:
                return self._record(self._answered(attempt, position, attempts, start))
            logger.info("teacher %s gave no valid answer for %s: %s", name, episode.episode_id,
                        attempt.invalid or attempt.failure)
        return self._record(self._unanswered(attempts, start))

    def signal_many(self, items: Iterable[tuple[Task, Episode]]) -> list[TeacherSignal]:
        """``signal`` for many episodes, ``max_concurrency`` at a time; results in input order.

        A batch in which no episode got a valid answer is an alarm (the teacher is down, not unsure):
        logged as a warning and counted in ``teacher/batch_all_failed``.
        """
        pairs = list(items)
        if not pairs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.config.max_concurrency, len(pairs))) as pool:
            signals = list(pool.map(lambda pair: self.signal(*pair), pairs))
        if not any(s.status in ("complete", "fallback_complete") for s in signals):
            self._count("teacher/batch_all_failed")
            logger.warning(
                "teacher: no valid answer for a whole batch of %d episodes (backends %s); first error: %s",
                len(signals), ", ".join(self.order), signals[0].error,
            )
        return signals

    def metrics(self) -> dict[str, float]:
        """The gateway's counters so far, as metric keys.

        ``teacher/signals``, ``teacher/status/<status>``, ``teacher/calls`` (and ``teacher/calls/<backend>``),
        ``teacher/cache_hits``, ``teacher/cache_misses``, ``teacher/cache_errors``, ``teacher/retries``,
        ``teacher/failures/<reason>``, ``teacher/invalid/<kind>``, ``teacher/batch_all_failed``,
        ``teacher/call_latency_s_{sum,max,mean}`` and ``teacher/cost_usd``. Keys of events that never
        happened are absent (read them with a default).
        """
        with self._lock:
            out = {key: float(value) for key, value in self._counts.items()} | self._sums
            calls = self._counts["teacher/calls"]
        out["teacher/call_latency_s_mean"] = out["teacher/call_latency_s_sum"] / calls if calls else 0.0
        return out

    def close(self) -> None:
        """Close the reply cache."""
        if self._cache is not None:
            self._cache.close()

    # -- one backend ------------------------------------------------------------------------------------

    def _ask(self, name: str, prompt: str) -> _Attempt:
        backend = self._backends[name]
        identity = getattr(backend, "cache_identity", None) or str(getattr(backend, "model", ""))
        key = cache_key(name, identity, prompt)
        if self._cache is not None:
            hit = self._cache_call(self._cache.get, key)
            if hit is not None and isinstance(answer := parse_reply(hit.reply), TeacherAnswer):
                self._count("teacher/cache_hits")
                return _Attempt(name, answer=answer, cost_usd=0.0)
            self._count("teacher/cache_misses")
        delay = self.config.backoff_s
        spent: float | None = None  # what failed calls to this backend cost (their money is spent too)
        for attempt in range(self.config.retries + 1):
            try:
                reply = self._call(name, backend, prompt)
            except BackendFailure as exc:
                self._count(f"teacher/failures/{exc.reason}")
                spent = _add_cost(spent, _cost(exc.cost_usd))
                if not exc.retryable or attempt == self.config.retries:
                    return _Attempt(name, failure=str(exc), cost_usd=spent)
                self._count("teacher/retries")
                time.sleep(min(delay, self.config.max_backoff_s))
                delay *= self.config.backoff_factor
                continue
            except Exception as exc:  # a third-party backend's bug must not stop a training run
                logger.exception("teacher backend %s crashed", name)
                self._count("teacher/failures/crashed")
                return _Attempt(name, failure=f"crashed: {type(exc).__name__}: {exc}"[:300], cost_usd=spent)
            judged = self._judge(name, key, backend, reply)
            return replace(judged, cost_usd=_add_cost(spent, judged.cost_usd))
        raise AssertionError("unreachable: the retry loop always returns")

    def _call(self, name: str, backend: PromptBackend, prompt: str) -> Any:
        with self._slots:
            self._count("teacher/calls", f"teacher/calls/{name}")
            start = time.monotonic()
            try:
                return backend.complete(prompt, self.config.timeout_s)
            finally:
                self._add_latency(time.monotonic() - start)

    def _add_latency(self, elapsed: float) -> None:
        """Add one call's duration to the latency metrics (every call counted in ``teacher/calls``)."""
        with self._lock:
            self._sums["teacher/call_latency_s_sum"] += elapsed
            self._sums["teacher/call_latency_s_max"] = max(self._sums["teacher/call_latency_s_max"], elapsed)

    def _judge(self, name: str, key: str, backend: PromptBackend, reply: Any) -> _Attempt:
        raw = reply.text if isinstance(reply, BackendReply) else reply
        cost = _cost(reply.cost_usd) if isinstance(reply, BackendReply) else None
        text = _as_text(raw)
        if text is None:
            self._count("teacher/invalid/not_text")
            return _Attempt(name, invalid=f"backend returned {type(raw).__name__}, not text", cost_usd=cost)
        parsed = parse_reply(text)
        if isinstance(parsed, ReplyProblem):
            self._count(f"teacher/invalid/{parsed.kind}")
            return _Attempt(name, invalid=f"{parsed.kind}: {parsed.reason}", cost_usd=cost)
        if self._cache is not None:
            self._cache_call(self._cache.put, key, name, str(getattr(backend, "model", "")), text, cost)
        return _Attempt(name, answer=parsed, cost_usd=cost)

    def _cache_call(self, method: Callable[..., Any], *args: Any) -> Any:
        """A cache read or write; a cache that fails (disk full, locked) is skipped, never the answer."""
        try:
            return method(*args)
        except StorageError as exc:
            logger.warning("teacher cache skipped: %s", exc)
            self._count("teacher/cache_errors")
            return None

    def _ask_oracle(self, task: Task, episode: Episode) -> _Attempt:
        try:
            with self._slots:
                self._count("teacher/calls", "teacher/calls/oracle")
                start = time.monotonic()
                try:
                    signal = self._oracle.signal(task, episode)  # type: ignore[union-attr]
                finally:
                    self._add_latency(time.monotonic() - start)
        except AiosRlError as exc:
            self._count("teacher/failures/oracle_error")
            return _Attempt("oracle", failure=f"oracle_error: {exc}"[:300])
        except Exception as exc:  # the oracle is caller code; its bug is recorded, not propagated
            logger.exception("teacher oracle crashed")
            self._count("teacher/failures/crashed")
            return _Attempt("oracle", failure=f"crashed: {type(exc).__name__}: {exc}"[:300])
        if not isinstance(signal, TeacherSignal):
            self._count("teacher/invalid/not_a_signal")
            return _Attempt("oracle", invalid=f"oracle returned {type(signal).__name__}, not a TeacherSignal")
        if signal.status == "failed_all_backends":
            return _Attempt("oracle", failure=f"oracle failed: {signal.error or 'no reason given'}")
        if signal.status == "invalid_response":
            return _Attempt("oracle", invalid=f"oracle: {signal.error or 'invalid response'}")
        answer = TeacherAnswer(critique=signal.critique, reference_actions=list(signal.reference_actions),
                               shaping=signal.shaping, confidence=signal.confidence, boundary=signal.boundary,
                               step_reference_actions=[list(s) for s in signal.step_reference_actions])
        return _Attempt("oracle", answer=answer, cost_usd=signal.cost_usd)

    # -- results ----------------------------------------------------------------------------------------

    def _answered(
        self, attempt: _Attempt, position: int, attempts: list[_Attempt], start: float
    ) -> TeacherSignal:
        answer = attempt.answer
        assert answer is not None
        return TeacherSignal(
            status="complete" if position == 0 else "fallback_complete",
            backend=attempt.backend,
            critique=answer.critique,
            reference_actions=list(answer.reference_actions),
            step_reference_actions=[list(s) for s in answer.step_reference_actions],
            shaping=answer.shaping,
            confidence=answer.confidence,
            boundary=answer.boundary,
            latency_s=time.monotonic() - start,
            cost_usd=_total_cost(attempts),
            error=_errors(attempts[:-1]) or None,
        )

    def _unanswered(self, attempts: list[_Attempt], start: float) -> TeacherSignal:
        invalid = [a for a in attempts if a.invalid is not None]
        return TeacherSignal(
            status="invalid_response" if invalid else "failed_all_backends",
            backend=invalid[-1].backend if invalid else self.order[0],
            latency_s=time.monotonic() - start,
            cost_usd=_total_cost(attempts),
            error=_errors(attempts),
        )

    def _record(self, signal: TeacherSignal) -> TeacherSignal:
        self._count("teacher/signals", f"teacher/status/{signal.status}")
        if signal.cost_usd:
            with self._lock:
                self._sums["teacher/cost_usd"] += signal.cost_usd
        return signal

    def _count(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._counts[key] += 1


def _add_cost(a: float | None, b: float | None) -> float | None:
    """The sum of two costs, either of which may be unknown (None); None when both are."""
    return b if a is None else a if b is None else a + b


def _total_cost(attempts: list[_Attempt]) -> float | None:
    """Money spent over every attempt (failed answers cost too); None when no backend reported a cost."""
    costs = [a.cost_usd for a in attempts if a.cost_usd is not None]
    return sum(costs) if costs else None


def _errors(attempts: list[_Attempt]) -> str:
    """Each unanswered attempt's reason, as text the episode store can encode (a reason may quote a JSON
    error body whose ``\\ud800``-style escape decoded to a lone surrogate)."""
    text = "; ".join(f"{a.backend}: {a.invalid or a.failure}" for a in attempts if a.answer is None)
    return utf8_text(text[:_MAX_ERROR_CHARS])

"""The gateway's routing, retries, concurrency limit, oracle adoption, metrics and robustness."""

from __future__ import annotations

import json
import logging
import math
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from teacher_fakes import VALID, VALID_REPLY, make_episode, make_task

from aios_rl.contracts.episode import Episode, Task, TeacherSignal
from aios_rl.contracts.errors import ConfigError
from aios_rl.teacher.backend import BackendFailure, BackendReply
from aios_rl.teacher.gateway import TeacherConfig, TeacherGateway, resolve_backend


class Scripted:
    """A prompt backend that returns or raises what it is told, and records its calls."""

    def __init__(self, *results: object, model: str = "m", delay_s: float = 0.0) -> None:
        self.results = list(results)
        self.model = model
        self.delay_s = delay_s
        self.calls: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def complete(self, prompt: str, timeout_s: float) -> BackendReply:
        with self._lock:
            self.calls.append(time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            result = self.results[min(len(self.calls), len(self.results)) - 1]
        try:
            time.sleep(self.delay_s)
            if isinstance(result, BaseException):
                raise result
            return result  # type: ignore[return-value]
        finally:
            with self._lock:
                self.in_flight -= 1


def ok(reply: str = VALID_REPLY, cost: float | None = None) -> BackendReply:
    return BackendReply(reply, cost)


def gw(backends: dict[str, object], order: tuple[str, ...], **cfg: object) -> TeacherGateway:
    config = TeacherConfig(backend=order[0], fallbacks=order[1:], backoff_s=0.0, retries=0, **cfg)
    return TeacherGateway(config, backends=backends)  # type: ignore[arg-type]


TASK = make_task()
EPISODE = make_episode(TASK)


def test_primary_valid_is_complete_and_fallbacks_untouched() -> None:
    a, b = Scripted(ok(cost=0.5)), Scripted(ok())
    signal = gw({"claude": a, "openai": b}, ("claude", "openai")).signal(TASK, EPISODE)
    assert (signal.status, signal.backend, signal.cost_usd) == ("complete", "claude", 0.5)
    assert len(a.calls) == 1 and not b.calls


def test_failed_all_backends_is_attributed_to_the_primary() -> None:
    a = Scripted(BackendFailure("timeout", retryable=True))
    b = Scripted(BackendFailure("http_500", retryable=True))
    signal = gw({"gemini": a, "openai": b}, ("gemini", "openai")).signal(TASK, EPISODE)
    assert (signal.status, signal.backend) == ("failed_all_backends", "gemini")
    assert signal.error == "gemini: timeout; openai: http_500"
    assert (signal.shaping, signal.confidence, signal.reference_actions) == (0.0, 0.0, [])


def test_invalid_response_is_attributed_to_the_last_invalid_backend() -> None:
    backends = {"claude": Scripted(ok("no json")), "codex": Scripted(ok('{"shaping": 3, "confidence": 1}')),
                "gemini": Scripted(BackendFailure("empty_output"))}
    signal = gw(backends, ("claude", "codex", "gemini")).signal(TASK, EPISODE)
    assert (signal.status, signal.backend) == ("invalid_response", "codex")
    assert "shaping: got 3" in (signal.error or "")


def test_costs_of_failed_attempts_are_summed() -> None:
    backends = {"claude": Scripted(ok("no json", cost=0.25)), "openai": Scripted(ok(cost=0.5))}
    signal = gw(backends, ("claude", "openai")).signal(TASK, EPISODE)
    assert (signal.status, signal.backend, signal.cost_usd) == ("fallback_complete", "openai", 0.75)


def test_crashing_backend_is_recorded_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    backends = {"claude": Scripted(ZeroDivisionError("bug in a client")), "openai": Scripted(ok())}
    g = gw(backends, ("claude", "openai"))
    with caplog.at_level(logging.ERROR):
        signal = g.signal(TASK, EPISODE)
    assert (signal.status, signal.backend) == ("fallback_complete", "openai")
    assert "crashed: ZeroDivisionError" in (signal.error or "")
    assert any("crashed" in r.getMessage() and r.exc_info for r in caplog.records)
    assert g.metrics()["teacher/failures/crashed"] == 1


def test_non_text_reply_is_invalid() -> None:
    signal = gw({"claude": Scripted(42)}, ("claude",)).signal(TASK, EPISODE)
    assert signal.status == "invalid_response" and "not text" in (signal.error or "")


def test_retries_back_off_exponentially() -> None:
    flaky = Scripted(BackendFailure("timeout", retryable=True))
    config = TeacherConfig(backend="claude", retries=3, backoff_s=0.04, backoff_factor=2.0)
    signal = TeacherGateway(config, backends={"claude": flaky}).signal(TASK, EPISODE)
    assert signal.status == "failed_all_backends" and len(flaky.calls) == 4
    gaps = [b - a for a, b in zip(flaky.calls, flaky.calls[1:], strict=False)]
    assert gaps[0] >= 0.04 and gaps[1] >= 0.08 and gaps[2] >= 0.16


def test_backoff_is_capped() -> None:
    flaky = Scripted(BackendFailure("timeout", retryable=True))
    config = TeacherConfig(
        backend="claude", retries=2, backoff_s=0.05, backoff_factor=20.0, max_backoff_s=0.06
    )
    TeacherGateway(config, backends={"claude": flaky}).signal(TASK, EPISODE)
    gaps = [b - a for a, b in zip(flaky.calls, flaky.calls[1:], strict=False)]
    assert gaps[1] >= 0.06 and gaps[1] < 0.6  # uncapped it would be 1.0 s


def test_non_retryable_failure_is_not_retried() -> None:
    broken = Scripted(BackendFailure("malformed_envelope"))
    config = TeacherConfig(backend="claude", retries=3, backoff_s=0.0)
    TeacherGateway(config, backends={"claude": broken}).signal(TASK, EPISODE)
    assert len(broken.calls) == 1


def test_concurrency_limit_is_honoured_across_threads() -> None:
    slow = Scripted(ok(), delay_s=0.15)
    g = gw({"claude": slow}, ("claude",), max_concurrency=3, cache=False)
    episodes = [make_episode(TASK, episode_id=f"e{i}") for i in range(12)]
    threads = [threading.Thread(target=g.signal, args=(TASK, e)) for e in episodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(slow.calls) == 12
    assert slow.max_in_flight == 3  # never more, and the limit does allow real parallelism


def test_signal_many_keeps_order_and_limit() -> None:
    slow = Scripted(ok(), delay_s=0.05)
    g = gw({"claude": slow}, ("claude",), max_concurrency=2, cache=False)
    outcomes = ["success", "failure"] * 3
    episodes = [make_episode(TASK, episode_id=f"e{i}", outcome=o) for i, o in enumerate(outcomes)]
    signals = g.signal_many([(TASK, e) for e in episodes])
    assert len(signals) == 6 and all(s.status == "complete" for s in signals)
    assert slow.max_in_flight == 2


def test_whole_batch_failing_is_an_alarm(caplog: pytest.LogCaptureFixture) -> None:
    g = gw({"claude": Scripted(BackendFailure("not_found"))}, ("claude",))
    with caplog.at_level(logging.WARNING):
        signals = g.signal_many([(TASK, make_episode(TASK, episode_id=f"e{i}")) for i in range(3)])
    assert all(s.status == "failed_all_backends" for s in signals)
    assert g.metrics()["teacher/batch_all_failed"] == 1
    assert any("whole batch of 3" in r.getMessage() for r in caplog.records)


def test_metrics_count_calls_statuses_and_latency() -> None:
    g = gw({"claude": Scripted(ok(), BackendFailure("timeout", retryable=True), delay_s=0.01)}, ("claude",))
    g.signal(TASK, EPISODE)
    g.signal(TASK, EPISODE)  # cache hit
    g.signal(TASK, make_episode(TASK, outcome="failure"))  # miss -> timeout
    m = g.metrics()
    assert m["teacher/calls"] == 2 and m["teacher/calls/claude"] == 2
    assert m["teacher/cache_hits"] == 1 and m["teacher/cache_misses"] == 2
    assert m["teacher/status/complete"] == 2 and m["teacher/status/failed_all_backends"] == 1
    assert m["teacher/failures/timeout"] == 1 and m["teacher/signals"] == 3
    assert 0.01 <= m["teacher/call_latency_s_mean"] <= m["teacher/call_latency_s_max"]


# -- oracle backend -----------------------------------------------------------------------------------


class FakeOracle:
    def __init__(self, signal: object) -> None:
        self.result = signal
        self.calls = 0

    def signal(self, task: Task, episode: Episode) -> TeacherSignal:
        self.calls += 1
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result  # type: ignore[return-value]


def test_oracle_backend_is_adopted_and_relabelled_by_position() -> None:
    oracle = FakeOracle(TeacherSignal(status="complete", backend="oracle", shaping=1.0, confidence=1.0,
                                      reference_actions=["patch\n..."], critique="fixed",
                                      step_reference_actions=[["stop done"]]))
    config = TeacherConfig(backend="claude", fallbacks=("oracle",), retries=0)
    g = TeacherGateway(config, oracle=oracle, backends={"claude": Scripted(BackendFailure("timeout"))})
    signal = g.signal(TASK, EPISODE)
    assert (signal.status, signal.backend, signal.shaping, signal.reference_actions) == (
        "fallback_complete", "oracle", 1.0, ["patch\n..."])
    assert signal.step_reference_actions == [["stop done"]]  # the oracle's per-state targets pass through
    g.signal(TASK, EPISODE)
    assert oracle.calls == 2  # the oracle is never cached


def test_oracle_invalid_or_crashing_falls_through() -> None:
    bad = FakeOracle(TeacherSignal(status="invalid_response", backend="oracle", error="patch does not apply"))
    g = TeacherGateway(TeacherConfig(backend="oracle", fallbacks=("openai",)), oracle=bad,
                       backends={"openai": Scripted(ok())})
    signal = g.signal(TASK, EPISODE)
    assert (signal.status, signal.backend) == ("fallback_complete", "openai")
    assert "patch does not apply" in (signal.error or "")
    crash = TeacherGateway(TeacherConfig(backend="oracle"), oracle=FakeOracle(KeyError("x")))
    assert crash.signal(TASK, EPISODE).status == "failed_all_backends"
    junk = TeacherGateway(TeacherConfig(backend="oracle"), oracle=FakeOracle("not a signal"))
    assert junk.signal(TASK, EPISODE).status == "invalid_response"


def test_oracle_backend_needs_an_oracle_object() -> None:
    with pytest.raises(ConfigError, match="oracle"):
        TeacherGateway(TeacherConfig(backend="oracle"))


# -- config -------------------------------------------------------------------------------------------


def test_backend_names_resolve_with_did_you_mean() -> None:
    assert resolve_backend("claude-code") == "claude" and resolve_backend("Codex-CLI") == "codex"
    with pytest.raises(ConfigError, match="did you mean 'gemini'"):
        TeacherConfig(backend="gemni")
    with pytest.raises(ConfigError, match="known: claude, codex, gemini, opencode, openai, oracle"):
        TeacherConfig(backend="zzzzzz")
    with pytest.raises(ConfigError, match="more than once"):
        TeacherConfig(backend="claude", fallbacks=("openai", "claude-code"))


def test_a_call_timeout_beyond_a_day_is_refused() -> None:
    # threading.Timer cannot wait 1e12 s (OverflowError in its thread): the deadline would go unenforced
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="timeout_s"):
        TeacherConfig(backend="claude", timeout_s=1e12)
    assert TeacherConfig(backend="claude", timeout_s=86_400).timeout_s == 86_400


# -- robustness ---------------------------------------------------------------------------------------

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(
    data=st.binary(max_size=2000),
    cost=st.one_of(st.none(), st.floats(), st.integers(), st.just(10**400)),
)
def test_arbitrary_bytes_never_raise_out_of_the_gateway(data: bytes, cost: float | None) -> None:
    g = gw({"claude": Scripted(BackendReply(data, cost))}, ("claude",), cache=False)
    signal = g.signal(TASK, EPISODE)
    assert signal.status in ("complete", "invalid_response")
    assert -1.0 <= signal.shaping <= 1.0 and 0.0 <= signal.confidence <= 1.0
    assert signal.cost_usd is None or (math.isfinite(signal.cost_usd) and signal.cost_usd >= 0)


teacher_like = st.fixed_dictionaries(
    {},
    optional={
        "critique": st.one_of(st.text(max_size=30), st.integers(), st.none()),
        "reference_actions": st.one_of(
            st.lists(st.text(max_size=10), max_size=12), st.text(max_size=5), st.none()
        ),
        "shaping": st.one_of(st.floats(-2, 2), st.booleans(), st.text(max_size=3), st.integers(-3, 3)),
        "confidence": st.one_of(st.floats(-1, 2), st.none()),
        "boundary": st.one_of(st.booleans(), st.integers(0, 1)),
        "extra": st.text(max_size=5),
    },
)


@FAST
@given(obj=teacher_like, prefix=st.text(max_size=40), suffix=st.text(max_size=40), fenced=st.booleans())
def test_teacher_shaped_objects_in_noise_never_raise_and_stay_in_range(
    obj: dict[str, object], prefix: str, suffix: str, fenced: bool
) -> None:
    body = json.dumps(obj)
    reply = f"{prefix}\n```json\n{body}\n```\n{suffix}" if fenced else f"{prefix} {body} {suffix}"
    g = gw({"claude": Scripted(ok(reply))}, ("claude",), cache=True)
    signal = g.signal(TASK, EPISODE)
    assert signal.status in ("complete", "invalid_response")
    if signal.status == "complete":
        assert -1.0 <= signal.shaping <= 1.0 and 0.0 <= signal.confidence <= 1.0
        assert isinstance(obj.get("shaping"), float | int) and not isinstance(obj.get("shaping"), bool)


def test_valid_reference_reply_round_trips() -> None:
    signal = gw({"claude": Scripted(ok())}, ("claude",)).signal(TASK, EPISODE)
    assert (signal.critique, signal.boundary) == (VALID["critique"], VALID["boundary"])


def test_a_failing_cache_is_skipped_and_the_answer_kept(caplog: pytest.LogCaptureFixture) -> None:
    from aios_rl.storage.teacher_cache import TeacherCache

    cache = TeacherCache(None)
    pages = cache._conn.execute("PRAGMA page_count").fetchone()[0]
    cache._conn.execute(f"PRAGMA max_page_count={pages}")  # the cache's disk is full: nothing more fits
    backend = Scripted(ok(json.dumps(VALID | {"critique": "x" * 9000})))
    config = TeacherConfig(backend="claude", backoff_s=0.0, retries=0)
    gateway = TeacherGateway(config, backends={"claude": backend}, cache=cache)  # type: ignore[dict-item]
    with caplog.at_level(logging.WARNING):
        signal = gateway.signal(TASK, EPISODE)
    assert signal.status == "complete" and len(backend.calls) == 1
    assert gateway.metrics()["teacher/cache_errors"] == 1 and "teacher cache skipped" in caplog.text


def test_a_prompt_with_a_lone_surrogate_still_has_a_cache_key() -> None:
    from aios_rl.storage.teacher_cache import cache_key

    assert cache_key("claude", "m", "bad \ud800 text") != cache_key("claude", "m", "bad \ud801 text")
    assert cache_key("claude", "m", "é") == cache_key("claude", "m", "é")


class SlowOracle(FakeOracle):
    def signal(self, task: Task, episode: Episode) -> TeacherSignal:
        time.sleep(0.05)
        return super().signal(task, episode)


def test_oracle_calls_count_in_the_latency_metrics() -> None:
    # Oracle calls count in teacher/calls, so their time must count in the latency sum it divides.
    oracle = SlowOracle(TeacherSignal(status="complete", backend="oracle", shaping=0.5, confidence=1.0))
    g = TeacherGateway(TeacherConfig(backend="oracle"), oracle=oracle)
    g.signal(TASK, EPISODE)
    m = g.metrics()
    assert m["teacher/calls"] == 1
    assert 0.05 <= m["teacher/call_latency_s_mean"] <= m["teacher/call_latency_s_max"]


def test_failure_reasons_with_lone_surrogates_leave_a_storable_signal() -> None:
    # A JSON error body such as {"error": "\ud800"} decodes to a lone surrogate, which ended up in
    # TeacherSignal.error and made the episode unserialisable (model_dump_json raised).
    g = gw({"claude": Scripted(BackendFailure("error_reported", "openai: bad \ud800")),
            "codex": Scripted(ok('{"shaping": 0.1, "confidence": 2, "critique": "x"}'))}, ("claude", "codex"))
    signal = g.signal(TASK, EPISODE)
    assert signal.status == "invalid_response" and "bad " in (signal.error or "")
    signal.model_dump_json()
    g2 = gw({"claude": Scripted(BackendFailure("error_reported", "bad \udcff")),
             "codex": Scripted(ok())}, ("claude", "codex"))
    answered = g2.signal(TASK, EPISODE)
    assert answered.status == "fallback_complete"
    answered.model_dump_json()


def test_checked_backends_keeps_the_names_as_written_and_refuses_unknown_ones() -> None:
    from aios_rl.teacher.gateway import checked_backends

    assert checked_backends("none") == []
    assert checked_backends(" Oracle ") == ["Oracle"]  # accepted, as written (callers compare the spelling)
    assert checked_backends("claude-code,oracle") == ["claude-code", "oracle"]
    with pytest.raises(ConfigError, match="did you mean 'codex'"):
        checked_backends("oracle,codx")
    with pytest.raises(ConfigError, match="--teacher must be 'none'"):
        checked_backends("none,oracle")


def test_checked_backends_refuses_a_backend_named_twice() -> None:
    """The gateway refuses a repeated backend; the check before a run starts must refuse it too, or the run
    directory is created (with the spec stored) before the gateway is built and fails."""
    from aios_rl.teacher.gateway import checked_backends

    with pytest.raises(ConfigError, match=r"--teacher 'oracle,oracle' names oracle more than once"):
        checked_backends("oracle,oracle")
    with pytest.raises(ConfigError, match="names claude more than once; list each backend once"):
        checked_backends("claude,oracle,claude-code")


def test_the_cost_of_failed_calls_is_counted_retried_or_not() -> None:
    flaky = Scripted(BackendFailure("nonzero_exit", retryable=True, cost_usd=0.25), ok(cost=0.5))
    config = TeacherConfig(backend="claude", retries=1, backoff_s=0.0)
    signal = TeacherGateway(config, backends={"claude": flaky}).signal(TASK, EPISODE)  # type: ignore[dict-item]
    assert (signal.status, signal.cost_usd) == ("complete", 0.75)
    down = Scripted(BackendFailure("error_reported", cost_usd=0.125))
    teacher = gw({"claude": down, "openai": Scripted(BackendFailure("timeout"))}, ("claude", "openai"))
    signal = teacher.signal(TASK, EPISODE)
    assert (signal.status, signal.cost_usd) == ("failed_all_backends", 0.125)
    assert teacher.metrics()["teacher/cost_usd"] == 0.125


def test_absurd_costs_never_overflow_into_an_exception_or_an_infinite_metric() -> None:
    # Two finite but absurd costs summed to inf: TeacherSignal refused it with a raw pydantic
    # ValidationError out of signal(), which must never raise for a backend's answer.
    backends = {"claude": Scripted(ok("no json", cost=1e308)), "openai": Scripted(ok(cost=1e308))}
    teacher = gw(backends, ("claude", "openai"), cache=False)
    signal = teacher.signal(TASK, EPISODE)
    assert signal.status == "fallback_complete" and signal.cost_usd is None
    teacher.signal(TASK, EPISODE)
    assert math.isfinite(teacher.metrics()["teacher/cost_usd"])


def test_per_token_prices_are_bounded() -> None:
    from pydantic import ValidationError

    from aios_rl.teacher.http_backend import OpenAIBackendConfig

    with pytest.raises(ValidationError, match="price_per_input_token_usd"):
        OpenAIBackendConfig(price_per_input_token_usd=1e300, price_per_output_token_usd=0.0)


def test_retry_sleeps_are_bounded_in_the_config() -> None:
    # backoff_s/max_backoff_s had no upper bound: 1e300 reached time.sleep, whose OverflowError escaped
    # signal() on the first retry (after the timeout the retry was meant to absorb).
    from aios_rl.contracts.config import load_config

    for key in ("backoff_s", "max_backoff_s"):
        with pytest.raises(ConfigError, match=key):
            load_config(TeacherConfig, None, {key: 1e300})
    assert TeacherConfig(backoff_s=86_400, max_backoff_s=86_400).max_backoff_s == 86_400

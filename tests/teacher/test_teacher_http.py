"""The OpenAI-compatible backend against a real http.server on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from teacher_fakes import VALID, VALID_REPLY, FakeServer, make_episode, make_task, openai_server

from aios_rl.contracts.errors import ConfigError
from aios_rl.storage.teacher_cache import TeacherCache
from aios_rl.teacher.backend import BackendFailure
from aios_rl.teacher.gateway import TeacherConfig, TeacherGateway
from aios_rl.teacher.http_backend import OpenAIBackend, OpenAIBackendConfig


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with openai_server() as state:
        yield state


def gateway(
    server: FakeServer, *, timeout_s: float = 5.0, retries: int = 0, **openai: object
) -> TeacherGateway:
    config = TeacherConfig(
        backend="openai", timeout_s=timeout_s, retries=retries, backoff_s=0.01,
        openai=OpenAIBackendConfig(base_url=server.url, model="judge-1", **openai),
    )
    return TeacherGateway(config)


def test_valid_reply(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-test-123")
    task = make_task()
    signal = gateway(server, api_key_env="JUDGE_KEY", temperature=0.3).signal(task, make_episode(task))
    assert signal.status == "complete" and signal.backend == "openai"
    assert signal.shaping == VALID["shaping"] and signal.reference_actions == VALID["reference_actions"]
    assert signal.cost_usd is None  # no price configured
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test-123"
    body = request["body"]
    assert body["model"] == "judge-1" and body["temperature"] == 0.3
    assert body["messages"][-1]["role"] == "user" and task.prompt in body["messages"][-1]["content"]


def test_cost_from_usage_and_price(server: FakeServer) -> None:
    task = make_task()
    signal = gateway(server, price_per_input_token_usd=1e-6, price_per_output_token_usd=2e-6).signal(
        task, make_episode(task))
    assert signal.cost_usd == pytest.approx(1000 * 1e-6 + 100 * 2e-6)


def test_config_key_wins_and_is_never_dumped(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    config = OpenAIBackendConfig(base_url=server.url, api_key="from-config")
    OpenAIBackend(config).complete("p", 5)
    assert server.requests[0]["headers"]["Authorization"] == "Bearer from-config"
    assert "from-config" not in config.model_dump_json()


def test_no_key_sends_no_authorization(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    OpenAIBackend(OpenAIBackendConfig(base_url=server.url)).complete("p", 5)
    assert "Authorization" not in server.requests[0]["headers"]


def test_malformed_json_body(server: FakeServer) -> None:
    server.mode = "malformed"
    task = make_task()
    signal = gateway(server).signal(task, make_episode(task))
    assert signal.status == "failed_all_backends" and "malformed_envelope" in (signal.error or "")


def test_reply_without_teacher_json_is_invalid(server: FakeServer) -> None:
    server.reply = "The agent did fine overall."
    task = make_task()
    signal = gateway(server).signal(task, make_episode(task))
    assert signal.status == "invalid_response" and "no_json" in (signal.error or "")


def test_http_500_is_retried_then_fails(server: FakeServer) -> None:
    server.mode = "http500"
    task = make_task()
    g = gateway(server, retries=2)
    signal = g.signal(task, make_episode(task))
    assert signal.status == "failed_all_backends" and "http_500" in (signal.error or "")
    assert len(server.requests) == 3
    assert g.metrics()["teacher/failures/http_500"] == 3


def test_slow_reply_past_timeout(server: FakeServer) -> None:
    server.delay_s = 2.0
    task = make_task()
    start = time.monotonic()
    signal = gateway(server, timeout_s=0.5).signal(task, make_episode(task))
    assert time.monotonic() - start < 1.8
    assert signal.status == "failed_all_backends" and "timeout" in (signal.error or "")


def test_trickling_body_is_bounded_by_one_deadline(server: FakeServer) -> None:
    server.mode = "trickle"
    task = make_task()
    start = time.monotonic()
    signal = gateway(server, timeout_s=0.6).signal(task, make_episode(task))
    assert time.monotonic() - start < 2.0  # the whole body would take ~4 s
    assert signal.status == "failed_all_backends" and "timeout" in (signal.error or "")


def test_connection_refused_is_a_retryable_failure() -> None:
    with openai_server() as gone:
        url = gone.url
    with pytest.raises(BackendFailure) as info:
        OpenAIBackend(OpenAIBackendConfig(base_url=url)).complete("p", 2)
    assert info.value.reason == "connection_error" and info.value.retryable


def test_cache_hit_sends_no_request(server: FakeServer) -> None:
    task = make_task()
    episode = make_episode(task)
    shared = TeacherCache()

    def judge(model: str) -> TeacherGateway:
        config = TeacherConfig(backend="openai", openai=OpenAIBackendConfig(base_url=server.url, model=model))
        return TeacherGateway(config, cache=shared)

    assert judge("judge-1").signal(task, episode).status == "complete"
    assert judge("judge-1").signal(task, episode).status == "complete"
    assert len(server.requests) == 1
    server.reply = "changed"  # another model is another cache key: the server is asked again
    assert judge("judge-2").signal(task, episode).status == "invalid_response"
    assert len(server.requests) == 2


def test_trickling_headers_are_bounded_by_the_same_deadline() -> None:
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:  # the status line and headers one byte every 0.3 s: each read is within 1 s
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            try:
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 30 + b"\r\n":
                    conn.sendall(bytes([byte]))
                    time.sleep(0.3)
            except OSError:
                pass  # the client hung up

    threading.Thread(target=serve, daemon=True).start()
    backend = OpenAIBackend(OpenAIBackendConfig(base_url=f"http://127.0.0.1:{listener.getsockname()[1]}/v1"))
    start = time.monotonic()
    with pytest.raises(BackendFailure, match="no answer within 1s") as failure:
        backend.complete("hi", 1.0)
    assert failure.value.reason == "timeout" and time.monotonic() - start < 3.0
    listener.close()


def test_a_redirect_is_refused_and_the_key_stays_home(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen: list[str | None] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    elsewhere = HTTPServer(("127.0.0.1", 0), Elsewhere)

    class Api(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{elsewhere.server_port}/steal")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    api = HTTPServer(("127.0.0.1", 0), Api)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (elsewhere, api)]
    for thread in threads:
        thread.start()
    try:
        monkeypatch.setenv("JUDGE_KEY", "sk-secret")
        url = f"http://127.0.0.1:{api.server_port}/v1"
        config = OpenAIBackendConfig(base_url=url, api_key_env="JUDGE_KEY")
        with pytest.raises(BackendFailure) as failure:
            OpenAIBackend(config).complete("hi", 5.0)
        assert failure.value.reason == "http_302" and not failure.value.retryable
        assert seen == []
    finally:
        for server in (elsewhere, api):
            server.shutdown()
            server.server_close()


def test_a_body_that_stalls_after_its_first_bytes_is_bounded_by_the_deadline() -> None:
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:  # headers at once, a body byte every 0.3 s for 1.5 s, then silence
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            try:
                for _ in range(5):
                    conn.sendall(b"x")
                    time.sleep(0.3)
                time.sleep(5)
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    backend = OpenAIBackend(OpenAIBackendConfig(base_url=f"http://127.0.0.1:{listener.getsockname()[1]}/v1"))
    start = time.monotonic()
    with pytest.raises(BackendFailure) as failure:
        backend.complete("hi", 2.0)
    # cut at the deadline, not at the socket's own timeout after the last byte (about 3.5 s)
    assert failure.value.reason == "timeout" and time.monotonic() - start < 2.8
    listener.close()


def test_the_same_model_name_on_another_server_is_another_cache_entry(server: FakeServer) -> None:
    cache = TeacherCache(None)
    task = make_task()
    for base_url in (server.url, server.url.replace("127.0.0.1", "localhost")):
        openai = OpenAIBackendConfig(base_url=base_url, model="m")
        config = TeacherConfig(backend="openai", retries=0, openai=openai)
        assert TeacherGateway(config, cache=cache).signal(task, make_episode(task)).status == "complete"
    assert len(server.requests) == 2 and len(cache) == 2  # the second server was asked, not the first's reply


@pytest.mark.parametrize("url", ["localhost:8000/v1", "127.0.0.1:8000/v1", "http//localhost:8000/v1",
                                 "ftp://example.com/v1", "http://", "", "https://api.openai.com/v1 "])
def test_a_base_url_that_can_never_be_called_is_a_config_error(url: str) -> None:
    # Before: accepted, then every call failed as a *retryable* connection_error, so a typo silently turned
    # every teacher signal of a run into failed_all_backends (after retries and backoff sleeps).
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIBackendConfig(base_url=url)
    with pytest.raises(ConfigError, match="base_url"):
        TeacherConfig.model_validate({"backend": "openai", "openai": {"base_url": url}})


def test_http_and_https_base_urls_are_accepted() -> None:
    for url in ("http://127.0.0.1:8000/v1", "https://api.openai.com/v1/", "http://[::1]:8080"):
        assert OpenAIBackendConfig(base_url=url).base_url == url


def test_absurd_token_counts_cost_nothing_instead_of_crashing(monkeypatch: pytest.MonkeyPatch) -> None:
    # int * float raised OverflowError for a token count beyond float range: a valid reply became a
    # 'crashed' failure with a logged traceback instead of an answer of unknown cost.
    from aios_rl.teacher import http_backend

    usage = {"prompt_tokens": 10**400, "completion_tokens": 5}
    body = {"choices": [{"message": {"content": VALID_REPLY}}], "usage": usage}
    monkeypatch.setattr(http_backend, "_post", lambda *args: json.dumps(body).encode())
    config = OpenAIBackendConfig(price_per_input_token_usd=1e-6, price_per_output_token_usd=2e-6)
    reply = OpenAIBackend(config).complete("p", 5)
    assert reply.text == VALID_REPLY and reply.cost_usd is None

"""Teacher backend for any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp server, Ollama ...).

One call is ``POST {base_url}/chat/completions`` with ``{"model", "messages", "temperature"}`` (plus
``max_tokens`` when configured) and, when a key is available, ``Authorization: Bearer <key>``. The key
comes from ``api_key`` in the config, else from the environment variable named by ``api_key_env``
(``OPENAI_API_KEY``); a local server needs neither. The key is a ``SecretStr`` so the resolved config
stored with a run shows ``**********``, never the key.

The reply is ``choices[0].message.content``. Cost is computed from ``usage.prompt_tokens`` and
``usage.completion_tokens`` when per-token prices are configured, else None (None too for counts that are
not non-negative integers below 10**12).

Failure reasons: ``timeout`` (connect/read took longer than the call's timeout; the body is read in
chunks against one deadline, so a server trickling bytes cannot stretch it), ``connection_error``,
``http_<status>`` (429 and 5xx retryable), ``malformed_envelope`` (body not JSON or no string content),
``error_reported`` (a 200 body holding an ``error`` object).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.errors import ConfigError
from aios_rl.teacher.backend import BackendFailure, BackendReply

__all__ = ["OpenAIBackend", "OpenAIBackendConfig"]

SYSTEM_PROMPT = "You are a strict, calibrated judge of agent episodes. Reply with one JSON object only."
_MAX_BODY_BYTES = 4 * 1024 * 1024
_MAX_TOKENS = 10**12  # usage counts at or above this are not priced
MASKED_SECRET = "**********"  # how pydantic dumps a SecretStr in JSON mode


class OpenAIBackendConfig(ConfigModel):
    """Where and how to call an OpenAI-compatible chat completions endpoint."""

    base_url: str = Field(
        default="https://api.openai.com/v1", description="API root; /chat/completions is appended."
    )
    model: str = Field(default="gpt-4o-mini", description="Model name sent in the request.")
    temperature: float = Field(
        default=0.0, ge=0.0, le=2.0, description="Sampling temperature (0 for a stable judge)."
    )
    max_tokens: int | None = Field(
        default=None, gt=0, description="Cap on reply tokens; default: the server's."
    )
    api_key: SecretStr | None = Field(
        default=None, description="API key; default: read from api_key_env. Never stored with a run: a "
        "stored configuration holds it masked, which reads back as none.",
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY", description="Environment variable holding the API key."
    )
    price_per_input_token_usd: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Dollars per prompt token (at most 1), for cost accounting; None: cost unknown.",
    )
    price_per_output_token_usd: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Dollars per completion token (at most 1), for cost accounting; None: unknown.",
    )

    @field_validator("base_url")
    @classmethod
    def _callable_url(cls, url: str) -> str:
        # Checked here: a URL urllib cannot call fails every request as a retryable connection error, which
        # would quietly turn every teacher signal of a run into failed_all_backends.
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in url):
            raise ConfigError(
                f"teacher.openai.base_url={url!r} is not an http(s) URL with a host; "
                "write it like http://127.0.0.1:8000/v1 or https://api.openai.com/v1"
            )
        return url

    @field_validator("api_key", mode="before")
    @classmethod
    def _masked_is_none(cls, value: Any) -> Any:
        # What model_dump(mode="json") stored in place of the key: never send the mask as a key.
        return None if value == MASKED_SECRET else value


class OpenAIBackend:
    """An OpenAI-compatible endpoint as a :class:`~aios_rl.teacher.backend.PromptBackend`."""

    name = "openai"

    def __init__(self, config: OpenAIBackendConfig | None = None) -> None:
        self.config = config or OpenAIBackendConfig()
        self.model = self.config.model
        # What the reply cache keys on besides the prompt: the same model name on another server, or sampled
        # otherwise, is another judge.
        c = self.config
        self.cache_identity = json.dumps([c.base_url.rstrip("/"), c.model, c.temperature, c.max_tokens])

    def _key(self) -> str | None:
        if self.config.api_key is not None:
            return self.config.api_key.get_secret_value()
        return os.environ.get(self.config.api_key_env) or None

    def complete(self, prompt: str, timeout_s: float) -> BackendReply:
        """POST the prompt and return the reply.

        Raises:
            BackendFailure: for every way the call can fail (reasons in the module docstring).
        """
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
            "temperature": self.config.temperature,
        }
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        return self._reply(_post(url, json.dumps(body).encode(), headers, timeout_s))

    def _reply(self, raw: bytes) -> BackendReply:
        try:
            obj = json.loads(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            raise BackendFailure("malformed_envelope", f"openai: body is not JSON: {raw[:120]!r}") from None
        if not isinstance(obj, dict):
            raise BackendFailure("malformed_envelope", "openai: body is not a JSON object")
        if obj.get("error") and not obj.get("choices"):
            raise BackendFailure("error_reported", f"openai: {str(obj['error'])[:200]}")
        try:
            content = obj["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise BackendFailure("malformed_envelope", "openai: no choices[0].message.content") from None
        if not isinstance(content, str):
            raise BackendFailure("malformed_envelope", "openai: choices[0].message.content is not a string")
        return BackendReply(content, self._cost(obj.get("usage")))

    def _cost(self, usage: Any) -> float | None:
        cfg = self.config
        if cfg.price_per_input_token_usd is None or cfg.price_per_output_token_usd is None:
            return None
        if not isinstance(usage, dict):
            return None
        tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
        counts = (tokens_in, tokens_out)
        # A count beyond any real call (one past float range made int * float raise) is no usage we can price.
        if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < _MAX_TOKENS for t in counts):
            return None
        return tokens_in * cfg.price_per_input_token_usd + tokens_out * cfg.price_per_output_token_usd


def _post(url: str, data: bytes, headers: dict[str, str], timeout_s: float) -> bytes:
    """POST ``data`` and read the answer against one deadline; map every failure to a BackendFailure.

    The deadline covers the whole exchange, headers included: a watchdog shuts the connection's socket when
    it passes, so a server that trickles its status line or headers cannot stretch the call (urllib's own
    timeout applies to each read). Redirects are refused, so the key never travels to another origin.
    """
    deadline = time.monotonic() + timeout_s
    watch = _Watch()
    opener = urllib.request.build_opener(_Tracked(watch), _TrackedTLS(watch), _NoRedirect)
    watchdog = threading.Timer(timeout_s, watch.cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        with opener.open(request, timeout=timeout_s) as response:
            chunks, size = [], 0
            # read1 returns what has arrived instead of waiting for 64 KiB, so the deadline is checked
            # between the server's writes (a plain read would block until the whole body came).
            while chunk := response.read1(65536):
                chunks.append(chunk)
                size += len(chunk)
                if time.monotonic() > deadline:
                    raise _timeout(timeout_s)
                if size > _MAX_BODY_BYTES:
                    detail = f"openai: body larger than {_MAX_BODY_BYTES} bytes"
                    raise BackendFailure("malformed_envelope", detail)
            if time.monotonic() >= deadline:  # the watchdog ended the body: what came is not all of it
                raise _timeout(timeout_s)
            return b"".join(chunks)
    except BackendFailure:
        raise
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode("utf-8", errors="replace") if exc.fp is not None else ""
        retryable = exc.code == 429 or exc.code >= 500
        reason = f"http_{exc.code}"
        raise BackendFailure(reason, f"openai: {exc.reason}: {detail}", retryable=retryable) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # resets, bad URLs, protocol errors
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError | socket.timeout) or time.monotonic() >= deadline:
            raise _timeout(timeout_s) from None  # a read timed out, or the watchdog cut the connection
        detail = f"openai: {type(exc).__name__}: {reason}"
        raise BackendFailure("connection_error", detail, retryable=True) from None
    finally:
        watchdog.cancel()


class _Watch:
    """The connections of one exchange, for the watchdog: :meth:`cut` shuts every socket they opened (one
    still in its TLS handshake included), and any socket opened after it is shut as soon as it opens."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: list[http.client.HTTPConnection] = []
        self._sockets: list[socket.socket] = []
        self._cut = False

    def connecting(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._connections.append(connection)

    def opened(self, sock: socket.socket) -> None:  # kept: urllib drops connection.sock once headers are read
        with self._lock:
            self._sockets.append(sock)
            late = self._cut
        if late:
            _shut(sock)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            socks = [*self._sockets, *(c.sock for c in self._connections if c.sock is not None)]
        for sock in socks:
            _shut(sock)


class _Tracking:
    """Mixed into urllib's HTTP(S) handlers: tells a :class:`_Watch` about each connection they open."""

    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> Any:
        watch = self.watch

        def make(host: str, **options: Any) -> http.client.HTTPConnection:
            connection = http_class(host, **options)
            watch.connecting(connection)
            opened = connection.connect

            def connect() -> None:
                opened()
                watch.opened(connection.sock)

            connection.connect = connect  # type: ignore[method-assign]
            return connection

        return super().do_open(make, req, **kwargs)  # type: ignore[misc]


class _Tracked(_Tracking, urllib.request.HTTPHandler):
    pass


class _TrackedTLS(_Tracking, urllib.request.HTTPSHandler):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect becomes an HTTPError (``http_30x``, not retried) instead of a request elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _shut(sock: socket.socket) -> None:
    """Shut ``sock``: a read blocked on it returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


def _timeout(timeout_s: float) -> BackendFailure:
    return BackendFailure("timeout", f"openai: no answer within {timeout_s:g}s", retryable=True)

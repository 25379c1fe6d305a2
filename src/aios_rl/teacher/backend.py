"""What every prompt-answering teacher backend (CLI or HTTP) returns or raises.

A backend turns a prompt into the model's reply text. It either returns a :class:`BackendReply` or raises
:class:`BackendFailure` naming a short machine-readable ``reason`` (``timeout``, ``nonzero_exit``,
``empty_output``, ``malformed_envelope``, ``error_reported``, ``not_found``, ``spawn_failed``,
``http_<code>``, ``connection_error``) and whether trying again may help. The gateway is the process
boundary that catches these and records them on the TeacherSignal; backends never judge the reply text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from aios_rl.contracts.errors import TeacherError

__all__ = ["BackendFailure", "BackendReply", "PromptBackend"]


@dataclass(frozen=True)
class BackendReply:
    """The model's reply text and what it cost, when the backend reports or can compute it."""

    text: str | bytes
    cost_usd: float | None = None


class BackendFailure(TeacherError):
    """A backend could not produce a reply.

    Attributes:
        reason: short failure kind, used as a metric key (``teacher/failures/<reason>``).
        retryable: trying the same backend again may succeed (timeouts, connection errors, HTTP 429/5xx).
        cost_usd: what the failed call cost, when the backend reports it (a CLI tool's error envelope):
            the gateway counts it like the cost of an answer.
    """

    def __init__(
        self, reason: str, detail: str = "", *, retryable: bool = False, cost_usd: float | None = None
    ) -> None:
        self.reason = reason
        self.retryable = retryable
        self.cost_usd = cost_usd
        super().__init__(f"{reason}: {detail}" if detail else reason)


@runtime_checkable
class PromptBackend(Protocol):
    """A teacher backend that answers a prompt (see the module docstring for the failure contract)."""

    name: str
    model: str

    def complete(self, prompt: str, timeout_s: float) -> BackendReply: ...

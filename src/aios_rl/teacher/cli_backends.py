"""Teacher backends that run a coding-agent CLI once, non-interactively, and read its JSON output.

Each call runs ``<executable> <args> <prompt>`` with stdin closed, in a fresh empty working directory (a
judge has no business editing the repository it judges), in its own process group so a timeout kills the
tool *and* everything it spawned. The environment is inherited: the tools need their own credentials.

A prompt too long for one command-line argument (Linux caps one at 128 KiB of UTF-8, about 43,000
characters of non-ASCII text, within ``prompt_chars``' range) is written to the tool's stdin instead, with
the prompt argument left out (``codex`` is given ``-``, its "read the prompt from stdin"; ``gemini`` is run
without ``-p``): every tool reads a prompt piped to it when none is on its command line.

Exact invocations and the output formats parsed (``--model M`` is added when ``model`` is configured;
``extra_args`` go before the prompt):

``claude``  ``claude -p --output-format json [extra] PROMPT``
    One JSON object on stdout: ``result`` (the reply text), ``is_error`` (bool), ``total_cost_usd``.
    ``is_error: true`` → ``error_reported``. (If stdout holds several lines, the last JSON line is read.)
``codex``   ``codex exec --json [extra] PROMPT``
    JSONL events (``thread.started``, ``turn.started``, ``item.started``/``item.completed``,
    ``turn.completed``, ``turn.failed``, ``error``). The reply is ``item.text`` of the **last**
    ``item.completed`` event whose ``item.type`` is ``agent_message`` (older releases: ``item_type`` /
    ``assistant_message``, also accepted). No reply but ``error``/``turn.failed`` events →
    ``error_reported``. Codex reports tokens, not dollars, so cost is None. Outside a git repository
    ``codex exec`` may need ``--skip-git-repo-check`` in ``extra_args``.
``gemini``  ``gemini -p PROMPT --output-format json [extra]``
    One JSON object: ``response`` (the reply), ``stats``, optional ``error`` object. An ``error`` without
    a ``response`` → ``error_reported``. Cost is None (stats hold tokens only).
``opencode`` ``opencode run --format json [extra] PROMPT``
    JSONL events with ``type`` ``step_start``, ``text``, ``tool_use``, ``step_finish``, ``error``. The
    reply is the concatenation of ``part.text`` of every ``text`` event; cost is the sum of
    ``part.cost`` over ``step_finish`` events when present. ``error`` events and no text →
    ``error_reported``.

Failure reasons (:class:`~aios_rl.teacher.backend.BackendFailure`): ``not_found`` (executable not on
PATH), ``spawn_failed``, ``timeout`` (retryable; the process group is killed), ``nonzero_exit``
(retryable: API hiccups exit 1), ``empty_output`` (nothing on stdout), ``malformed_envelope`` (stdout is
not the documented format, or more than :data:`MAX_STDOUT_BYTES`: 4 MiB; the process group is killed at
once), ``error_reported`` (the tool says the request failed).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from aios_rl.contracts.config import ConfigModel
from aios_rl.teacher.backend import BackendFailure, BackendReply

__all__ = ["CLI_TOOLS", "MAX_STDOUT_BYTES", "CliBackend", "CliBackendConfig", "CliTool"]

_STDERR_TAIL = 400
# Linux's MAX_ARG_STRLEN: one argv element, its terminating NUL included, is at most 32 pages (128 KiB).
_MAX_ARG_BYTES = 128 * 1024 - 1
_POLL_S = 0.2  # how often a running tool is checked for having exited
_EXITED_GRACE_S = 2.0  # how long the pipes of a tool that has exited may stay open
_READ_BYTES = 65536
# A runaway tool (``codex exec --json`` prints every command's output as an event) fails past this much
# stdout, as an HTTP body past the HTTP backend's cap does; only the tail of stderr is ever shown.
MAX_STDOUT_BYTES = 4 * 1024 * 1024
_STDERR_KEPT_BYTES = 64 * 1024


class CliBackendConfig(ConfigModel):
    """How to run one CLI teacher tool."""

    executable: str | None = Field(
        default=None, description="Executable name or path; default: the tool's own name, looked up on PATH."
    )
    extra_args: tuple[str, ...] = Field(default=(), description="Extra arguments placed before the prompt.")
    model: str | None = Field(
        default=None, description="Model passed as --model; default: the tool's own default."
    )
    workdir: str | None = Field(
        default=None, description="Working directory of the tool; default: a fresh empty temporary directory."
    )


@dataclass(frozen=True)
class CliTool:
    """One supported CLI: how to build its argv and how to read its stdout."""

    name: str
    argv: Callable[[str, str, list[str]], list[str]]  # (executable, prompt, options) -> argv
    read: Callable[[str], BackendReply]
    stdin_argv: Callable[[str, list[str]], list[str]]  # (executable, options) -> argv; the prompt on stdin


def _fail(
    reason: str, detail: str, *, retryable: bool = False, cost_usd: float | None = None
) -> BackendFailure:
    return BackendFailure(reason, detail, retryable=retryable, cost_usd=cost_usd)


def _json_object(stdout: str) -> dict[str, Any] | None:
    """stdout as one JSON object, else its last line that is one."""
    for text in (stdout, *reversed(stdout.strip().splitlines())):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _json_lines(stdout: str) -> list[dict[str, Any]]:
    events = []
    for line in stdout.splitlines():
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue  # progress noise between events is tolerated; no event at all is not
        if isinstance(value, dict):
            events.append(value)
    return events


def _cost(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e12
    return float(value) if ok else None


def _message(value: Any) -> str:
    """The human message of an error event payload (``message`` or ``data.message``), shortened."""
    if isinstance(value, dict):
        data = value.get("data")
        inner = value.get("message") or (data.get("message") if isinstance(data, dict) else None)
        return str(inner)[:200] if inner else json.dumps(value, default=str)[:200]
    return str(value)[:200]


def claude_reply(stdout: str) -> BackendReply:
    """Read ``claude -p --output-format json`` output (see the module docstring)."""
    obj = _json_object(stdout)
    if obj is None:
        raise _fail("malformed_envelope", "claude: stdout is not a JSON object")
    if obj.get("is_error") is True:
        detail = f"claude: {str(obj.get('result', obj.get('subtype', '')))[:200]}"
        raise _fail("error_reported", detail, cost_usd=_cost(obj.get("total_cost_usd")))
    if not isinstance(obj.get("result"), str):
        raise _fail("malformed_envelope", "claude: no string 'result' in the JSON output")
    return BackendReply(obj["result"], _cost(obj.get("total_cost_usd")))


def codex_reply(stdout: str) -> BackendReply:
    """Read ``codex exec --json`` JSONL events (see the module docstring)."""
    events = _json_lines(stdout)
    if not events:
        raise _fail("malformed_envelope", "codex: stdout holds no JSON event line")
    messages, errors = [], []
    for event in events:
        kind, item = event.get("type"), event.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            item_type = item.get("type", item.get("item_type"))
            if item_type in ("agent_message", "assistant_message") and isinstance(item.get("text"), str):
                messages.append(item["text"])
        elif kind == "error":
            errors.append(_message(event.get("message", event)))
        elif kind == "turn.failed":
            errors.append(_message(event.get("error", event)))
    if messages:
        return BackendReply(messages[-1])
    if errors:
        raise _fail("error_reported", f"codex: {'; '.join(errors)[:300]}")
    raise _fail("malformed_envelope", "codex: no completed agent_message item in the events")


def gemini_reply(stdout: str) -> BackendReply:
    """Read ``gemini -p ... --output-format json`` output (see the module docstring)."""
    obj = _json_object(stdout)
    if obj is None:
        raise _fail("malformed_envelope", "gemini: stdout is not a JSON object")
    response = obj.get("response")
    if not isinstance(response, str):
        if obj.get("error"):
            raise _fail("error_reported", f"gemini: {_message(obj['error'])}")
        raise _fail("malformed_envelope", "gemini: no string 'response' in the JSON output")
    return BackendReply(response)


def opencode_reply(stdout: str) -> BackendReply:
    """Read ``opencode run --format json`` JSONL events (see the module docstring)."""
    events = _json_lines(stdout)
    if not events:
        raise _fail("malformed_envelope", "opencode: stdout holds no JSON event line")
    texts, errors, costs = [], [], []
    for event in events:
        part = event.get("part") if isinstance(event.get("part"), dict) else {}
        if event.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif event.get("type") == "step_finish" and _cost(part.get("cost")) is not None:
            costs.append(float(part["cost"]))
        elif event.get("type") == "error":
            errors.append(_message(event.get("error", event)))
    spent = sum(costs) if costs else None
    if texts:
        return BackendReply("".join(texts), spent)
    if errors:
        raise _fail("error_reported", f"opencode: {'; '.join(errors)[:300]}", cost_usd=spent)
    raise _fail("malformed_envelope", "opencode: no text event in the output")


CLI_TOOLS: dict[str, CliTool] = {
    "claude": CliTool("claude", lambda x, p, o: [x, "-p", "--output-format", "json", *o, p], claude_reply,
                      lambda x, o: [x, "-p", "--output-format", "json", *o]),
    "codex": CliTool("codex", lambda x, p, o: [x, "exec", "--json", *o, p], codex_reply,
                     lambda x, o: [x, "exec", "--json", *o, "-"]),
    "gemini": CliTool("gemini", lambda x, p, o: [x, "-p", p, "--output-format", "json", *o], gemini_reply,
                      lambda x, o: [x, "--output-format", "json", *o]),
    "opencode": CliTool("opencode", lambda x, p, o: [x, "run", "--format", "json", *o, p], opencode_reply,
                        lambda x, o: [x, "run", "--format", "json", *o]),
}


class CliBackend:
    """A CLI teacher tool as a :class:`~aios_rl.teacher.backend.PromptBackend`.

    Args:
        tool: one of :data:`CLI_TOOLS` (``claude``, ``codex``, ``gemini``, ``opencode``).
        config: executable, extra arguments, model and working directory.
    """

    def __init__(self, tool: str, config: CliBackendConfig | None = None) -> None:
        self.tool = CLI_TOOLS[tool]
        self.config = config or CliBackendConfig()
        self.name = tool
        self.model = self.config.model or "default"
        # What the reply cache keys on besides the prompt (another executable or arguments: another judge).
        c = self.config
        self.cache_identity = json.dumps([c.executable, self.model, list(c.extra_args)])

    def complete(self, prompt: str, timeout_s: float) -> BackendReply:
        """Run the tool on ``prompt`` and return its reply.

        Raises:
            BackendFailure: for every way the run can fail (reasons in the module docstring).
        """
        wanted = self.config.executable or self.name
        executable = shutil.which(wanted)
        if executable is None:
            raise _fail("not_found", f"{wanted!r} is not an executable on PATH")
        # which() may answer a path relative to this process's directory; the tool runs in another one.
        executable = os.path.abspath(executable)
        options = [*(["--model", self.config.model] if self.config.model else []), *self.config.extra_args]
        data = prompt.encode("utf-8", errors="replace")
        # A prompt too long for one argument goes on stdin (module docstring); a shorter one stays in argv.
        stdin = data if len(data) > _MAX_ARG_BYTES else None
        argv = self.tool.argv(executable, prompt, options) if stdin is None else self.tool.stdin_argv(
            executable, options)
        if self.config.workdir is not None:
            code, out, err = _run(argv, timeout_s, self.config.workdir, stdin)
        else:
            with tempfile.TemporaryDirectory(prefix="aios-teacher-") as workdir:
                code, out, err = _run(argv, timeout_s, workdir, stdin)
        stderr = err.decode("utf-8", errors="replace").strip()[-_STDERR_TAIL:]
        stdout = out.decode("utf-8", errors="replace")
        if code != 0:
            detail = f"{self.name} exited with {code}: {stderr or 'no stderr'}"
            raise _fail("nonzero_exit", detail, retryable=True, cost_usd=self._spent(stdout))
        if not stdout.strip():
            raise _fail("empty_output", f"{self.name} wrote nothing on stdout (stderr: {stderr or 'empty'})")
        return self.tool.read(stdout)

    def _spent(self, stdout: str) -> float | None:
        """The cost the tool's output reports, whether or not it holds an answer (None when it says none)."""
        try:
            return self.tool.read(stdout).cost_usd if stdout.strip() else None
        except BackendFailure as exc:
            return exc.cost_usd


def _run(argv: list[str], timeout_s: float, cwd: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    """Run ``argv`` in its own process group with stdin closed (or reading ``stdin`` then end of file); the
    whole group is killed when the call ends, so nothing the tool started outlives it. Once the tool itself
    has exited, a leftover child that still holds its pipes is killed and the tool's answer read (not waited
    on until the timeout). At most :data:`MAX_STDOUT_BYTES` of stdout and the last
    ``_STDERR_KEPT_BYTES`` of stderr are kept: more stdout fails the call at once."""
    source: Any = subprocess.DEVNULL
    try:
        if stdin is not None:
            # A file, not a pipe: the tool reads it at its own pace and nothing here blocks writing to it.
            source = tempfile.TemporaryFile(prefix="aios-teacher-prompt-")
            source.write(stdin)
            source.seek(0)
        proc = subprocess.Popen(
            argv, stdin=source, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        raise _fail("spawn_failed", f"cannot start {argv[0]}: {exc}") from None
    finally:
        if source is not subprocess.DEVNULL:
            source.close()  # the tool has its own descriptor of the file
    try:
        out, err = _read_output(proc, os.path.basename(argv[0]), timeout_s)
    finally:
        if proc.returncode is None:
            _kill_group(proc)
        else:
            _signal_group(proc.pid)  # what the tool left running in its group
            _close_pipes(proc)
    return proc.returncode, out, err


def _read_output(proc: subprocess.Popen[bytes], tool: str, timeout_s: float) -> tuple[bytes, bytes]:
    """Read the tool's stdout and stderr until both are closed and it has exited (see :func:`_run`)."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    out, err = bytearray(), bytearray()
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        while selector.get_map() or proc.poll() is None:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:  # done; a child it left may hold the pipes
                exited_at = now
                _signal_group(proc.pid)
            if exited_at is not None and now - exited_at > _EXITED_GRACE_S:  # a descendant left the group
                raise _fail("timeout", f"{tool} exited but its output pipes stayed open", retryable=True)
            if now >= deadline:
                raise _fail("timeout", f"{tool} gave no answer within {timeout_s:g}s; its process group "
                            "was killed", retryable=True)
            wait_s = max(0.0, min(_POLL_S, deadline - now))
            if not selector.get_map():  # both pipes closed, the tool still running
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait_s)
                continue
            for key, _ in selector.select(timeout=wait_s):
                chunk = os.read(key.fd, _READ_BYTES)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.fileobj is proc.stdout:
                    out += chunk
                    if len(out) > MAX_STDOUT_BYTES:
                        raise _fail("malformed_envelope", f"{tool}: stdout larger than {MAX_STDOUT_BYTES} "
                                    "bytes; its process group was killed")
                else:
                    err += chunk
                    del err[:-_STDERR_KEPT_BYTES]
    return bytes(out), bytes(err)


def _signal_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left in the group


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the tool's group and reap the tool; what is still in its pipes is dropped, unread (a descendant
    that left the group and still writes gets a broken pipe)."""
    _signal_group(proc.pid)
    _close_pipes(proc)
    proc.wait(timeout=2.0)


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()

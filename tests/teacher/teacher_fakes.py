"""Test helpers for the teacher tests: tiny tasks/episodes, fake CLI tools on PATH, a fake HTTP server.

Fake CLI tools are real executables (Python scripts) named ``claude``, ``codex``, ``gemini`` and ``opencode``
written into a directory put first on PATH. Each reads its behaviour from ``<name>.mode`` next to it, so a
test can switch modes without rewriting it, and appends its argv, cwd and stdin to ``<name>.calls``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aios_rl.contracts.episode import Episode, Observation, Step, Task, Verification

VALID = {
    "critique": "It read the right file; {braces} and \"quotes\" in a string must not confuse the parser.",
    "reference_actions": ["read src/calc.py"],
    "shaping": 0.5,
    "confidence": 0.8,
    "boundary": False,
}
VALID_REPLY = "Here is my judgement.\n```json\n" + json.dumps(VALID) + "\n```\nHope this helps {not json}."
NO_JSON_REPLY = "I cannot judge this episode, sorry."
WRONG_SCHEMA_REPLY = '{"score": 7, "verdict": "good"}'
TOOLS = ("claude", "codex", "gemini", "opencode")


def make_task(task_id: str = "t1", environment: str = "shell", prompt: str = "Fix the failing test.") -> Task:
    return Task(
        task_id=task_id, environment=environment, family="failing_tests", split="train", prompt=prompt,
        oracle={"reference_patch": "SECRET-REFERENCE-PATCH"},
    )


def make_episode(
    task: Task,
    outcome: str = "success",
    steps: int = 2,
    episode_id: str | None = None,
    action_chars: int = 20,
) -> Episode:
    trajectory = [
        Step(
            observation=Observation(text=f"observation {i}"), action=f"read file_{i}.py" + "x" * action_chars,
            logprob=-1.0, entropy=0.5, info={"patch_applied": i == steps - 1},
        )
        for i in range(steps)
    ]
    extra = {"episode_id": episode_id} if episode_id else {}
    evidence = {"target_unresolved": 0 if outcome == "success" else 1, "tests_failed": 7}
    verification = Verification(completed=True, outcome=outcome, evidence=evidence)
    return Episode(environment=task.environment, task_id=task.task_id, trajectory=trajectory, outcome=outcome,
                   reward=0.0, env_reward=0.0, policy_version="ckpt-0", verification=verification, **extra)


# -- fake CLI tools -----------------------------------------------------------------------------------

_SCRIPT = r'''#!{python}
import json, os, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
NAME = {name!r}
REPLIES = {replies!r}
with open(os.path.join(HERE, NAME + ".mode")) as f:
    mode = f.read().strip()
stdin = sys.stdin.read() if not sys.stdin.closed else ""
with open(os.path.join(HERE, NAME + ".calls"), "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": stdin, "mode": mode}}) + "\n")
if mode == "hang":
    child = subprocess.Popen(["sleep", "30"])
    with open(os.path.join(HERE, NAME + ".child"), "w") as f:
        f.write(str(child.pid))
    time.sleep(30)
if mode == "escape":  # a descendant leaves the process group and keeps stdout open
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    with open(os.path.join(HERE, NAME + ".child"), "w") as f:
        f.write(str(child.pid))
    time.sleep(30)
if mode == "exit":
    sys.stderr.write("boom: quota exceeded\n")
    sys.exit(3)
if mode == "empty":
    sys.exit(0)
if mode == "malformed":
    sys.stdout.write("Traceback? <html>not the documented format {{")
    sys.exit(0)
if mode.startswith("sleep:"):
    time.sleep(float(mode.split(":")[1]))
    mode = "valid"
reply = REPLIES.get(mode, REPLIES["valid"])

def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")

if NAME == "claude":
    if mode == "error":
        out({{"type": "result", "subtype": "error_during_execution", "is_error": True,
             "result": "overloaded"}})
    else:
        out({{"type": "result", "subtype": "success", "is_error": False, "result": reply,
             "total_cost_usd": 0.012}})
elif NAME == "codex":
    out({{"type": "thread.started", "thread_id": "th_1"}})
    out({{"type": "turn.started"}})
    if mode == "error":
        out({{"type": "error", "message": "stream disconnected"}})
        out({{"type": "turn.failed", "error": {{"message": "stream disconnected"}}}})
    else:
        out({{"type": "item.completed", "item": {{"id": "i0", "type": "reasoning", "text": "{{thinking}}"}}}})
        out({{"type": "item.completed", "item": {{"id": "i1", "type": "agent_message", "text": "draft"}}}})
        out({{"type": "item.completed", "item": {{"id": "item_2", "type": "agent_message", "text": reply}}}})
        out({{"type": "turn.completed", "usage": {{"input_tokens": 10, "output_tokens": 5}}}})
elif NAME == "gemini":
    if mode == "error":
        out({{"error": {{"type": "ApiError", "message": "quota"}}}})
    else:
        out({{"response": reply, "stats": {{"models": {{}}}}}})
elif NAME == "opencode":
    out({{"type": "step_start", "part": {{"type": "step-start"}}}})
    if mode == "error":
        out({{"type": "error", "error": {{"name": "APIError", "data": {{"message": "bad key"}}}}}})
    else:
        half = len(reply) // 2
        out({{"type": "text", "part": {{"type": "text", "text": reply[:half]}}}})
        out({{"type": "text", "part": {{"type": "text", "text": reply[half:]}}}})
        out({{"type": "step_finish", "part": {{"type": "step-finish", "reason": "stop", "cost": 0.003}}}})
'''


class FakeTools:
    """The fake CLI tools; ``set(name, mode)`` switches behaviour, ``calls(name)`` counts runs."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        replies = {"valid": VALID_REPLY, "nojson": NO_JSON_REPLY, "wrongschema": WRONG_SCHEMA_REPLY}
        for name in TOOLS:
            path = bin_dir / name
            path.write_text(_SCRIPT.format(python=sys.executable, name=name, replies=replies))
            path.chmod(0o755)
            self.set(name, "valid")

    def set(self, name: str, mode: str) -> None:
        (self.bin_dir / f"{name}.mode").write_text(mode)

    def call_log(self, name: str) -> list[dict[str, Any]]:
        path = self.bin_dir / f"{name}.calls"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def calls(self, name: str) -> int:
        return len(self.call_log(name))

    def child_pid(self, name: str) -> int:
        return int((self.bin_dir / f"{name}.child").read_text())


# -- fake OpenAI-compatible server ----------------------------------------------------------------------


@dataclass
class FakeServer:
    """State of the fake chat-completions server: what to answer and what it received."""

    mode: str = "valid"
    reply: str = VALID_REPLY
    delay_s: float = 0.0
    judge: Callable[[str], str] | None = None  # prompt -> reply, when set (overrides ``reply``)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@contextmanager
def openai_server() -> Iterator[FakeServer]:
    """A real ``http.server`` on 127.0.0.1 (random port) serving ``POST /v1/chat/completions``."""
    state = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = {"path": self.path, "headers": dict(self.headers), "body": json.loads(body)}
            state.requests.append(request)
            if state.delay_s:
                time.sleep(state.delay_s)
            if self.path != "/v1/chat/completions":
                return self._send(404, b'{"error": "not found"}')
            if state.mode == "http500":
                return self._send(500, b'{"error": {"message": "internal"}}')
            if state.mode == "trickle":  # every write well within the socket timeout, the whole far past it
                data = json.dumps({"choices": [{"message": {"content": state.reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for i in range(0, len(data), 8):
                        self.wfile.write(data[i:i + 8])
                        self.wfile.flush()
                        time.sleep(0.1)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                return None
            if state.mode == "malformed":
                return self._send(200, b"<html>this is not json")
            body_json = state.requests[-1]["body"]
            reply = state.judge(body_json["messages"][-1]["content"]) if state.judge else state.reply
            payload = {"id": "c1", "object": "chat.completion",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
                       "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}
            return self._send(200, json.dumps(payload).encode())

        def _send(self, code: int, data: bytes) -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

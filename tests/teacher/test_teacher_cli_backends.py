"""CLI teacher backends against fake `claude`/`codex`/`gemini`/`opencode` executables first on PATH."""

from __future__ import annotations

import os
import signal as signal_module
import time
from pathlib import Path

import pytest
from teacher_fakes import TOOLS, VALID, FakeTools, make_episode, make_task

from aios_rl.teacher import cli_backends
from aios_rl.teacher.backend import BackendFailure
from aios_rl.teacher.cli_backends import CliBackend, CliBackendConfig
from aios_rl.teacher.gateway import TeacherConfig, TeacherGateway


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return FakeTools(bin_dir)


def gateway(
    backend: str, *fallbacks: str, timeout_s: float = 10.0, retries: int = 0, **extra: object
) -> TeacherGateway:
    config = TeacherConfig(backend=backend, fallbacks=fallbacks, timeout_s=timeout_s, retries=retries,
                           backoff_s=0.01, **extra)
    return TeacherGateway(config)


# (mode, expected status, expected reason in the error) for every tool.
CASES = [
    ("malformed", "failed_all_backends", "malformed_envelope"),
    ("nojson", "invalid_response", "no_json"),
    ("wrongschema", "invalid_response", "wrong_schema"),
    ("empty", "failed_all_backends", "empty_output"),
    ("exit", "failed_all_backends", "nonzero_exit"),
    ("error", "failed_all_backends", "error_reported"),
]


@pytest.mark.parametrize("tool", TOOLS)
def test_valid_answer_is_complete(tools: FakeTools, tool: str) -> None:
    task = make_task()
    signal = gateway(tool).signal(task, make_episode(task))
    assert signal.status == "complete"
    assert signal.backend == tool
    assert signal.shaping == VALID["shaping"] and signal.confidence == VALID["confidence"]
    assert signal.critique == VALID["critique"]
    assert signal.reference_actions == VALID["reference_actions"]
    assert signal.error is None
    expected_cost = {"claude": 0.012, "opencode": 0.003}.get(tool)
    assert signal.cost_usd == pytest.approx(expected_cost) if expected_cost else signal.cost_usd is None


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("mode", "status", "reason"), CASES)
def test_failure_modes_end_in_documented_status(
    tools: FakeTools, tool: str, mode: str, status: str, reason: str
) -> None:
    tools.set(tool, mode)
    task = make_task()
    signal = gateway(tool).signal(task, make_episode(task))
    assert signal.status == status
    assert signal.backend == tool
    assert reason in (signal.error or "")
    assert signal.shaping == 0.0 and signal.confidence == 0.0
    assert tools.calls(tool) == 1


@pytest.mark.parametrize("tool", TOOLS)
def test_hang_past_timeout_kills_the_process_group(tools: FakeTools, tool: str) -> None:
    tools.set(tool, "hang")
    task = make_task()
    start = time.monotonic()
    signal = gateway(tool, timeout_s=1.0).signal(task, make_episode(task))
    assert time.monotonic() - start < 5.0
    assert signal.status == "failed_all_backends"
    assert "timeout" in (signal.error or "")
    # The tool's own child (same process group) must be gone too, not left running for 30 s.
    pid = tools.child_pid(tool)
    deadline = time.monotonic() + 3.0
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), f"child {pid} of the timed-out {tool} is still running"


def test_descendant_that_escapes_the_group_cannot_hang_the_call(tools: FakeTools) -> None:
    tools.set("claude", "escape")
    task = make_task()
    start = time.monotonic()
    try:
        signal = gateway("claude", timeout_s=0.5).signal(task, make_episode(task))
        assert signal.status == "failed_all_backends" and "timeout" in (signal.error or "")
        assert time.monotonic() - start < 5.0  # 0.5 s timeout + at most 2 s draining the pipes
    finally:
        os.kill(tools.child_pid("claude"), signal_module.SIGKILL)  # the escapee is ours to clean up


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead: it was killed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_primary_hangs_fallback_answers(tools: FakeTools) -> None:
    tools.set("claude", "hang")
    tools.set("codex", "exit")
    task = make_task()
    signal = gateway("claude", "codex", "gemini", timeout_s=1.0).signal(task, make_episode(task))
    assert signal.status == "fallback_complete"
    assert signal.backend == "gemini"
    assert [tools.calls(t) for t in ("claude", "codex", "gemini", "opencode")] == [1, 1, 1, 0]
    assert "claude: timeout" in (signal.error or "") and "codex: nonzero_exit" in (signal.error or "")


def test_fallbacks_are_tried_in_the_configured_order(tools: FakeTools) -> None:
    for tool in TOOLS:
        tools.set(tool, "nojson")
    task = make_task()
    signal = gateway("opencode", "gemini", "claude").signal(task, make_episode(task))
    logged = [(t, tools.call_log(t)) for t in TOOLS]
    assert signal.status == "invalid_response"
    assert signal.backend == "claude"  # the last backend that answered invalidly
    error = signal.error or ""
    assert error.index("opencode") < error.index("gemini") < error.index("claude")
    assert dict((t, len(c)) for t, c in logged) == {"claude": 1, "codex": 0, "gemini": 1, "opencode": 1}


def test_invalid_then_failing_backends_report_invalid(tools: FakeTools) -> None:
    tools.set("claude", "wrongschema")
    tools.set("codex", "exit")
    task = make_task()
    signal = gateway("claude", "codex").signal(task, make_episode(task))
    assert signal.status == "invalid_response" and signal.backend == "claude"


def test_retryable_failure_is_retried_then_succeeds(tools: FakeTools) -> None:
    tools.set("claude", "exit")
    task = make_task()
    g = gateway("claude", retries=2)
    signal = g.signal(task, make_episode(task))
    assert signal.status == "failed_all_backends"
    assert tools.calls("claude") == 3  # 1 + 2 retries
    assert g.metrics()["teacher/retries"] == 2
    tools.set("claude", "nojson")  # invalid answers are not retried
    g.signal(task, make_episode(task))
    assert tools.calls("claude") == 4


def test_cache_hit_makes_no_call(tools: FakeTools) -> None:
    task = make_task()
    episode = make_episode(task)
    g = gateway("codex")
    first, second = g.signal(task, episode), g.signal(task, episode)
    assert tools.calls("codex") == 1
    assert second.status == "complete" and second.shaping == first.shaping and second.cost_usd == 0.0
    assert g.metrics()["teacher/cache_hits"] == 1
    g.signal(task, make_episode(task, outcome="failure"))  # a different prompt is a miss
    assert tools.calls("codex") == 2


def test_persistent_cache_survives_a_new_gateway(tools: FakeTools, tmp_path: Path) -> None:
    task = make_task()
    episode = make_episode(task)
    path = str(tmp_path / "run" / "teacher_cache.db")
    first = gateway("gemini", cache_path=path)
    first.signal(task, episode)
    first.close()
    second = gateway("gemini", cache_path=path)
    assert second.signal(task, episode).status == "complete"
    assert tools.calls("gemini") == 1


def test_invocation_model_extra_args_stdin_and_workdir(
    tools: FakeTools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    backend = CliBackend("claude", CliBackendConfig(model="opus", extra_args=("--max-turns", "1")))
    # Our own stdin becomes a pipe nobody closes: a tool that inherited it would block reading it.
    saved, (read_end, write_end) = os.dup(0), os.pipe()
    os.dup2(read_end, 0)
    try:
        backend.complete("PROMPT TEXT", timeout_s=5)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    call = tools.call_log("claude")[0]
    expected = ["-p", "--output-format", "json", "--model", "opus", "--max-turns", "1", "PROMPT TEXT"]
    assert call["argv"] == expected
    assert call["stdin"] == ""  # stdin is closed, so a tool waiting for input gets EOF at once
    assert Path(call["cwd"]) != tmp_path and "aios-teacher-" in call["cwd"]
    CliBackend("gemini").complete("P", 10)
    CliBackend("codex").complete("P", 10)
    CliBackend("opencode").complete("P", 10)
    assert tools.call_log("gemini")[0]["argv"] == ["-p", "P", "--output-format", "json"]
    assert tools.call_log("codex")[0]["argv"] == ["exec", "--json", "P"]
    assert tools.call_log("opencode")[0]["argv"] == ["run", "--format", "json", "P"]


def test_missing_executable_is_not_found(tools: FakeTools) -> None:
    backend = CliBackend("claude", CliBackendConfig(executable="no-such-teacher-tool"))
    with pytest.raises(BackendFailure) as info:
        backend.complete("p", 5)
    assert info.value.reason == "not_found" and not info.value.retryable


def test_a_tool_that_answers_and_leaves_a_child_running(tmp_path: Path) -> None:
    tool = tmp_path / "claude"
    marker = tmp_path / "child.pid"
    answer = '{"result": "{\\"shaping\\": 0.5, \\"confidence\\": 0.9}", "is_error": false}'
    # the helper inherits stdout, so reading until end of output would wait for it
    tool.write_text(f"#!/bin/sh\necho '{answer}'\nsleep 30 &\necho $! > {marker}\nexit 0\n")
    tool.chmod(0o755)
    start = time.monotonic()
    reply = CliBackend("claude", CliBackendConfig(executable=str(tool))).complete("hi", 10.0)
    assert '"shaping": 0.5' in reply.text and time.monotonic() - start < 5.0  # answered, not timed out
    pid = int(marker.read_text())
    deadline = time.monotonic() + 3.0
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the tool's leftover child outlived the call"


def test_a_relative_executable_path_is_run_from_where_it_was_found(
    tools: FakeTools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `executable: bin/claude` was found relative to the current directory, then spawned in the fresh
    # temporary working directory, where that relative path names nothing: every call was spawn_failed.
    monkeypatch.chdir(tmp_path)
    for executable in ("bin/claude", "./bin/claude"):
        reply = CliBackend("claude", CliBackendConfig(executable=executable)).complete("judge this", 10.0)
        assert isinstance(reply.text, str) and "shaping" in reply.text


@pytest.mark.parametrize("tool", TOOLS)
def test_a_prompt_too_long_for_one_argument_goes_on_stdin(tools: FakeTools, tool: str) -> None:
    # Linux caps one argv element at 128 KiB: 45,000 three-byte characters (within prompt_chars' 100,000)
    # failed every call as spawn_failed ("Argument list too long").
    prompt = "judge € this " + "€" * 45_000
    reply = CliBackend(tool).complete(prompt, 10.0)
    assert isinstance(reply.text, str) and "shaping" in reply.text
    call = tools.call_log(tool)[0]
    assert call["stdin"] == prompt and prompt not in call["argv"]
    expected = {"claude": ["-p", "--output-format", "json"], "codex": ["exec", "--json", "-"],
                "gemini": ["--output-format", "json"], "opencode": ["run", "--format", "json"]}
    assert call["argv"] == expected[tool]


def test_a_long_non_ascii_prompt_through_the_gateway_is_answered(tools: FakeTools) -> None:
    task = make_task(prompt="Coût du test en € qui échoue. " * 2_000)
    episode = make_episode(task, steps=60, action_chars=0)
    episode = episode.model_copy(update={"trajectory": [
        s.model_copy(update={"action": "€" * 1_000}) for s in episode.trajectory]})
    signal = gateway("claude", prompt_chars=100_000).signal(task, episode)
    assert signal.status == "complete", signal.error
    assert len(tools.call_log("claude")[0]["stdin"].encode()) > 128 * 1024


def test_the_cost_of_a_call_the_tool_reports_as_failed_is_counted(tmp_path: Path) -> None:
    # `claude -p` reports what an errored run (max turns, overload mid-run) cost in the same envelope; that
    # money was spent, so it belongs in the signal's cost and the gateway's teacher/cost_usd.
    tool = tmp_path / "claude"
    answer = '{"type": "result", "subtype": "error_max_turns", "is_error": true, "total_cost_usd": 0.02}'
    tool.write_text(f"#!/bin/sh\necho '{answer}'\n")
    tool.chmod(0o755)
    config = TeacherConfig(backend="claude", claude=CliBackendConfig(executable=str(tool)), retries=0)
    teacher = TeacherGateway(config)
    task = make_task()
    signal = teacher.signal(task, make_episode(task))
    assert signal.status == "failed_all_backends" and "error_reported" in (signal.error or "")
    assert signal.cost_usd == pytest.approx(0.02)
    assert teacher.metrics()["teacher/cost_usd"] == pytest.approx(0.02)
    tool.write_text(f"#!/bin/sh\necho '{answer}'\nexit 1\n")  # the same envelope with a failing exit code
    with pytest.raises(BackendFailure) as info:
        CliBackend("claude", CliBackendConfig(executable=str(tool))).complete("p", 10.0)
    assert info.value.reason == "nonzero_exit" and info.value.cost_usd == pytest.approx(0.02)


@pytest.mark.parametrize("tool", TOOLS)
def test_a_lone_surrogate_in_the_task_cannot_crash_every_call(tools: FakeTools, tool: str) -> None:
    # A task prompt read from JSON holding a "\ud83d" escape (half an emoji) holds a lone surrogate, which
    # no argv can carry: every CLI call crashed with UnicodeEncodeError (a logged traceback, 'crashed').
    task = make_task(prompt="Fix the bug \ud83d in calc.")
    signal = gateway(tool).signal(task, make_episode(task))
    assert signal.status == "complete", signal.error
    assert any("Fix the bug ? in calc." in arg for arg in tools.call_log(tool)[0]["argv"])


def test_a_runaway_tool_stdout_is_capped_and_fails_at_once(tmp_path: Path) -> None:
    # `codex exec --json` prints every command's output as an event: a runaway tool's stdout was all kept in
    # memory until it exited or timed out. Past the cap the call fails (like the HTTP body cap) and the
    # tool's process group is killed, without waiting for the timeout.
    tool = tmp_path / "codex"
    marker = tmp_path / "child.pid"
    tool.write_text(
        "#!/bin/sh\nsleep 30 &\necho $! > " + str(marker) + "\n"
        "head -c " + str(cli_backends.MAX_STDOUT_BYTES + 1_000_000) + " /dev/zero | tr '\\0' x\nsleep 30\n"
    )
    tool.chmod(0o755)
    start = time.monotonic()
    with pytest.raises(BackendFailure) as info:
        CliBackend("codex", CliBackendConfig(executable=str(tool))).complete("p", 20.0)
    assert time.monotonic() - start < 10.0, "the call waited for the timeout"
    assert info.value.reason == "malformed_envelope" and not info.value.retryable
    assert f"stdout larger than {cli_backends.MAX_STDOUT_BYTES} bytes" in str(info.value)
    pid = int(marker.read_text())
    deadline = time.monotonic() + 3.0
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the runaway tool's process group outlived the call"


def test_a_tool_chatty_on_stderr_keeps_only_its_tail(tmp_path: Path) -> None:
    # stderr is only ever shown as its last few hundred characters, yet all of it was kept in memory.
    tool = tmp_path / "claude"
    answer = '{"result": "ok", "is_error": false}'
    tool.write_text(f"#!/bin/sh\nhead -c 3000000 /dev/zero | tr '\\0' e >&2\necho '{answer}'\n")
    tool.chmod(0o755)
    code, out, err = cli_backends._run([str(tool)], 20.0, str(tmp_path))
    assert code == 0 and answer in out.decode()
    assert 0 < len(err) <= cli_backends._STDERR_KEPT_BYTES

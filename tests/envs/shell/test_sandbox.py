"""Tests of the bubblewrap sandbox, with real bwrap on temporary task copies.

The bombs (fork, memory, output) are bounded twice: by the sandbox limit under test, and by a cap inside
the bomb script itself, so a broken limit fails the test instead of taking the host down.
"""

from __future__ import annotations

import json
import os
import select
import socket
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from aios_rl.contracts.errors import ConfigError, EnvError, SandboxError
from aios_rl.envs.shell.sandbox import (
    Sandbox,
    SandboxConfig,
    SandboxResult,
    check_bubblewrap,
    run_unsandboxed,
)

_UID_RANGE = range(1_000_000_000, 1_000_000_000 + (1 << 24))  # the sandbox's private uids
_AS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig())


@pytest.fixture()
def task_copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "data.txt").write_text("seed data\n")
    return repo


def _run_json(sandbox: Sandbox, script: str, workdir: Path, timeout_s: float = 30) -> dict:
    result = sandbox.run(["python", "-c", script], workdir, timeout_s=timeout_s)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _names_under(paths: tuple[str, ...], parent: Path) -> set[str]:
    """First path components below ``parent`` of the read-only binds (what may legitimately show there)."""
    below = [Path(p) for p in paths if Path(p).is_relative_to(parent) and Path(p) != parent]
    return {p.relative_to(parent).parts[0] for p in below}


# --- running commands ---------------------------------------------------------------------------------


def test_command_runs_in_task_copy_and_its_writes_reach_the_host(sandbox: Sandbox, task_copy: Path) -> None:
    script = """
import os
print(os.getcwd())
print(open("data.txt").read().strip())
open("out.txt", "w").write("x")
"""
    result = sandbox.run(["python", "-c", script], task_copy)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{sandbox.config.workdir_mount}\nseed data\n"
    assert not result.stdout_truncated and not result.timed_out and result.term_signal is None
    assert (task_copy / "out.txt").read_text() == "x"
    assert SandboxResult.model_validate(result.model_dump()) == result  # storable as a record


def test_exit_status_stdin_and_stderr_pass_through(sandbox: Sandbox, task_copy: Path) -> None:
    result = sandbox.run(["sh", "-c", "cat; echo oops >&2; exit 7"], task_copy, stdin="line 1\nline 2\n")
    assert (result.returncode, result.stdout, result.stderr) == (7, "line 1\nline 2\n", "oops\n")
    missing = sandbox.run(["no-such-program-xyz"], task_copy)
    assert missing.returncode == 127  # a command error, not a SandboxError


def test_python_inside_has_pytest_and_runs_a_test_suite(sandbox: Sandbox, task_copy: Path) -> None:
    tests = "def test_ok():\n    assert True\n\n\ndef test_bad():\n    assert False\n"
    (task_copy / "test_demo.py").write_text(tests)
    assert sandbox.run(["python", "-c", "import pytest"], task_copy).returncode == 0
    result = sandbox.run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], task_copy, timeout_s=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout


def test_environment_is_cleared_to_the_minimal_set(
    sandbox: Sandbox, task_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOS_RL_HOST_SECRET", "do-not-leak")
    env = _run_json(sandbox, "import json, os; print(json.dumps(dict(os.environ)))", task_copy)
    assert set(env) <= {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PWD",
                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONHASHSEED"] == "0"
    assert env["HOME"] != str(Path.home())


def test_command_runs_unprivileged(sandbox: Sandbox, task_copy: Path) -> None:
    status = sandbox.run(["cat", "/proc/self/status"], task_copy).stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapPrm"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    fds = sandbox.run(["ls", "/proc/self/fd"], task_copy).stdout.split()
    assert sorted(fds) == ["0", "1", "2", "3"]  # stdio + ls's own listing: no host descriptor leaked in
    real_uid = int(fields["Uid"].split()[0])
    if _AS_ROOT:
        assert real_uid in _UID_RANGE


# --- isolation ----------------------------------------------------------------------------------------


def test_no_network_even_to_a_host_listener(sandbox: Sandbox, task_copy: Path) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_name = f"\0aios-rl-sandbox-test-{uuid.uuid4().hex}"
    abstract.bind(abstract_name)
    abstract.listen()
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # control: the listener works
        server.accept()[0].close()
        script = f"""
import json, socket
out = {{}}
for name, family, addr in (("loopback", socket.AF_INET, ("127.0.0.1", {port})),
                           ("internet", socket.AF_INET, ("1.1.1.1", 53)),
                           ("abstract", socket.AF_UNIX, {abstract_name!r})):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr)
        out[name] = "connected"
    except OSError as e:
        out[name] = type(e).__name__
    finally:
        s.close()
print(json.dumps(out))
"""
        outcome = _run_json(sandbox, script, task_copy)
        assert "connected" not in outcome.values(), outcome
        assert set(outcome) == {"loopback", "internet", "abstract"}
        for listener in (server, abstract):
            assert select.select([listener], [], [], 0.2)[0] == []  # nothing ever reached the host side
    finally:
        server.close()
        abstract.close()


def test_writes_outside_the_task_copy_fail_and_tmp_is_private(
    sandbox: Sandbox, task_copy: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("other_host_dir")
    name = f"aios-rl-probe-{uuid.uuid4().hex}"
    outside = [f"/usr/{name}", f"/etc/{name}", f"/{name}", str(other / name), f"/root/{name}",
               f"{sys.prefix}/{name}", f"/proc/sys/kernel/{name}"]
    inside = [f"/tmp/{name}", f"{sandbox.config.workdir_mount}/{name}"]
    script = f"""
import json
out = {{}}
for path in {outside + inside!r}:
    try:
        with open(path, "w") as f:
            f.write("x")
        out[path] = "ok"
    except OSError as e:
        out[path] = type(e).__name__
print(json.dumps(out))
"""
    outcome = _run_json(sandbox, script, task_copy)
    assert all(outcome[p] != "ok" for p in outside), outcome
    assert all(outcome[p] == "ok" for p in inside), outcome
    for path in [*outside, f"/tmp/{name}"]:
        assert not os.path.lexists(path), f"{path} appeared on the host"
    assert (task_copy / name).read_text() == "x"


def test_home_and_root_hold_nothing_of_the_host(sandbox: Sandbox, task_copy: Path) -> None:
    probe = Path.home() / f".aios-rl-sandbox-probe-{uuid.uuid4().hex}"
    probe.write_text("host secret")
    try:
        script = f"""
import json, os
out = {{"home": os.environ["HOME"], "home_list": os.listdir(os.environ["HOME"])}}
for d in ("/root", {str(Path.home())!r}):
    try:
        out[d] = sorted(os.listdir(d))
    except OSError as e:
        out[d] = type(e).__name__
try:
    out["probe"] = open({str(probe)!r}).read()
except OSError as e:
    out["probe"] = type(e).__name__
print(json.dumps(out))
"""
        outcome = _run_json(sandbox, script, task_copy)
    finally:
        probe.unlink()
    assert outcome["home_list"] == [] and outcome["home"] != str(Path.home())
    assert outcome["probe"] != "host secret"
    for host_dir in ("/root", str(Path.home())):
        seen = outcome[host_dir]
        if isinstance(seen, list):  # only the dirs leading to a read-only Python install may show
            assert set(seen) <= _names_under(sandbox.read_only_paths, Path(host_dir)), (host_dir, seen)


def test_nothing_of_the_host_repo_is_visible(sandbox: Sandbox, task_copy: Path) -> None:
    host_repo = Path(__file__).resolve().parents[3]
    this_file = Path(__file__).resolve()
    script = f"""
import json, os
out = {{"test_file": os.path.exists({str(this_file)!r}), "src": os.path.exists({str(host_repo / 'src')!r})}}
try:
    out["repo_list"] = os.listdir({str(host_repo)!r})
except OSError as e:
    out["repo_list"] = []
print(json.dumps(out))
"""
    outcome = _run_json(sandbox, script, task_copy)
    assert this_file.exists() and (host_repo / "src").exists()  # control: they exist on the host
    assert not outcome["test_file"] and not outcome["src"]
    assert set(outcome["repo_list"]) <= _names_under(sandbox.read_only_paths, host_repo)


def test_hard_and_symbolic_links_cannot_reach_host_files(sandbox: Sandbox, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("original\n")
    os.link(outside, repo / "hard.txt")
    (repo / "soft.txt").symlink_to(outside)
    result = sandbox.run(["sh", "-c", "echo changed > hard.txt; echo changed > soft.txt"], repo)
    assert outside.read_text() == "original\n"
    assert os.stat(outside).st_uid == os.geteuid()  # the chown of the copy did not follow either link
    assert (repo / "hard.txt").read_text() == "changed\n"  # the copy's own file, now unlinked from outside
    assert result.returncode != 0  # the symlink's target does not exist inside


# --- limits -------------------------------------------------------------------------------------------


class _UidWatcher:
    """Samples, every 20 ms, how many host processes each sandbox uid has (peak per uid)."""

    def __init__(self) -> None:
        self.peak: Counter[int] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _UidWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for uid, n in _sandbox_processes().items():
                self.peak[uid] = max(self.peak[uid], n)
            time.sleep(0.02)


def _sandbox_processes() -> Counter[int]:
    counts: Counter[int] = Counter()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except FileNotFoundError:
                continue
            if uid in _UID_RANGE:
                counts[uid] += 1
    return counts


def _forks_until_refused(sandbox: Sandbox, workdir: Path) -> int:
    """Children one process can fork before EAGAIN; the script itself stops at 1000, limit or not."""
    script = """
import os, time
children = 0
try:
    while children < 1000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError:
    pass
print(children)
"""
    result = sandbox.run(["python", "-c", script], workdir, timeout_s=30)
    assert result.returncode == 0, result.stderr[-500:]
    return int(result.stdout.strip())


def test_process_limit_stops_forking_at_max_processes(sandbox: Sandbox, task_copy: Path) -> None:
    limit = sandbox.config.max_processes
    assert limit // 2 < _forks_until_refused(sandbox, task_copy) < limit


@pytest.mark.slow
@pytest.mark.skipif(not _AS_ROOT, reason="the watcher finds bomb processes by the root-mode private uids")
def test_fork_bomb_is_contained_and_killed(sandbox: Sandbox, task_copy: Path) -> None:
    limit = sandbox.config.max_processes
    # The bounded experiment again, right here: never launch an unbounded bomb on a host without the limit.
    if _forks_until_refused(sandbox, task_copy) >= limit:
        pytest.fail("process limit not in force; refusing to run the real fork bomb")
    with _UidWatcher() as watcher:
        start = time.monotonic()
        result = sandbox.run(["bash", "-c", "id -u; :(){ :|:& };:; exec sleep 60"], task_copy, timeout_s=5)
        elapsed = time.monotonic() - start
        time.sleep(0.2)
    uid = int(result.stdout.split()[0])
    assert result.timed_out and result.limit_hit == "timeout"
    assert elapsed < 20
    assert limit // 2 <= watcher.peak[uid] <= limit  # it did bomb, and never past the limit
    deadline = time.monotonic() + 3
    while _sandbox_processes()[uid] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sandbox_processes()[uid] == 0, "bomb processes outlived the sandbox"
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


@pytest.mark.slow
def test_memory_bomb_is_stopped_by_the_address_space_limit(sandbox: Sandbox, task_copy: Path) -> None:
    # Pages are written (not just reserved), capped at 6 GiB in case the 2 GiB limit failed.
    script = """
chunks = []
try:
    while len(chunks) < 24:
        chunks.append(b"\\x01" * (256 << 20))
    print("allocated", len(chunks) * 256)
except MemoryError:
    print("MemoryError", len(chunks) * 256)
"""
    result = sandbox.run(["python", "-c", script], task_copy, timeout_s=60)
    verdict, mib = result.stdout.split()
    assert verdict == "MemoryError", result.stdout
    assert 256 <= int(mib) < sandbox.config.address_space_bytes >> 20


@pytest.mark.slow
def test_busy_loop_is_killed_at_the_wall_timeout(sandbox: Sandbox, task_copy: Path) -> None:
    start = time.monotonic()
    result = sandbox.run(["python", "-c", "while True: pass"], task_copy, timeout_s=1)
    elapsed = time.monotonic() - start
    assert result.timed_out and result.limit_hit == "timeout" and result.returncode == -9
    assert 1.0 <= elapsed < 3.0


def test_background_children_do_not_outlive_the_command(sandbox: Sandbox, task_copy: Path) -> None:
    start = time.monotonic()
    result = sandbox.run(["sh", "-c", "sleep 60 & echo started"], task_copy, timeout_s=20)
    assert time.monotonic() - start < 5  # no wait on the sleeper still holding stdout
    assert result.stdout == "started\n" and not result.timed_out


@pytest.mark.slow
def test_cpu_limit_sends_sigxcpu(task_copy: Path) -> None:
    # CPU seconds, not wall seconds: on a loaded 2-core machine 1 CPU-second can take several wall ones.
    sandbox = Sandbox(SandboxConfig(cpu_seconds=1))
    result = sandbox.run(["python", "-c", "while True: pass"], task_copy, timeout_s=30)
    assert not result.timed_out and result.limit_hit == "cpu", result


def test_file_size_and_open_file_limits(sandbox: Sandbox, task_copy: Path) -> None:
    cfg = sandbox.config
    big = sandbox.run(["sh", "-c", f"head -c {2 * cfg.file_size_bytes} /dev/zero > big.bin"], task_copy)
    assert big.limit_hit == "file_size", big
    assert (task_copy / "big.bin").stat().st_size <= cfg.file_size_bytes
    script = """
import os
fds = []
try:
    while len(fds) < 10000:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
print(len(fds))
"""
    opened = int(sandbox.run(["python", "-c", script], task_copy).stdout)
    assert cfg.open_files - 20 < opened < cfg.open_files


@pytest.mark.slow
def test_huge_output_is_capped_without_buffering_it(sandbox: Sandbox, task_copy: Path) -> None:
    script = """
import sys
chunk = b"x" * (1 << 20)
for _ in range(100):
    sys.stdout.buffer.write(chunk)
    sys.stderr.buffer.write(chunk)
"""
    tracemalloc.start()
    try:
        result = sandbox.run(["python", "-c", script], task_copy, timeout_s=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cap = sandbox.config.output_cap_bytes
    assert result.returncode == 0 and not result.timed_out
    assert len(result.stdout) == cap and len(result.stderr) == cap
    assert result.stdout_truncated and result.stderr_truncated
    assert peak < 16 * cap + (4 << 20), f"peak {peak} bytes: output was buffered, not discarded"


# --- setup errors and configuration -------------------------------------------------------------------


def test_missing_bubblewrap_raises_with_install_hint() -> None:
    config = SandboxConfig(bwrap_path="/nonexistent/bin/bwrap")
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        Sandbox(config)
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        check_bubblewrap(config)


def test_bubblewrap_without_namespaces_raises(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    expected = "No permissions to create new namespace.*apt-get install bubblewrap"
    with pytest.raises(SandboxError, match=expected):
        Sandbox(SandboxConfig(bwrap_path=str(fake)))


def test_bad_calls_raise_env_errors(sandbox: Sandbox, tmp_path: Path) -> None:
    with pytest.raises(EnvError, match="not a directory"):
        sandbox.run(["true"], tmp_path / "missing")
    with pytest.raises(EnvError, match="empty"):
        sandbox.run([], tmp_path)
    with pytest.raises(EnvError, match="timeout_s"):
        sandbox.run(["true"], tmp_path, timeout_s=0)
    ro = tmp_path / "toolchain"
    ro.mkdir()
    guarded = Sandbox(SandboxConfig(extra_ro_paths=(str(ro),)))
    with pytest.raises(EnvError, match="system or interpreter path"):
        guarded.run(["true"], tmp_path)  # the copy would contain a read-only bind
    assert os.stat(ro).st_uid == os.geteuid()  # refused before any chown


def test_config_is_validated() -> None:
    with pytest.raises(ValidationError):
        SandboxConfig(cpu_secs=3)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="cpu_seconds"):
        SandboxConfig(cpu_seconds=0)
    with pytest.raises(ConfigError, match="workdir_mount"):
        SandboxConfig(workdir_mount="/usr/src/repo")
    with pytest.raises(ValidationError):
        SandboxConfig().timeout_s = 5  # type: ignore[misc]


def test_run_unsandboxed_is_the_same_command_without_isolation(task_copy: Path) -> None:
    result = run_unsandboxed(["python", "-c", "import os; print(os.getcwd())"], task_copy)
    assert result.returncode == 0 and result.stdout.strip() == str(task_copy.resolve())

"""The bubblewrap sandbox every shell-environment command and test run goes through.

A command sees a read-only minimal system (``/usr``, a few ``/etc`` files, the framework's own Python
installation), the task copy as the only writable directory (at ``/aios-task/repo``, its cwd), fresh sized
tmpfs for ``/tmp``, ``/dev/shm`` and ``HOME``, no network, a cleared environment, and limits on CPU
seconds, address space, processes, file size and open files. A wall timeout kills the whole sandbox,
and stdout/stderr are each kept up to a cap (their beginning and end) while the rest is drained and discarded.

There is no unsandboxed fallback: when bubblewrap is missing or cannot build the sandbox, constructing
a :class:`Sandbox` raises :class:`SandboxError`. :func:`run_unsandboxed` exists only so the overhead
benchmark can time the same command without the sandbox; environments never call it.

Example:
    >>> sandbox = Sandbox(SandboxConfig(timeout_s=30))
    >>> result = sandbox.run(["python", "-m", "pytest", "-q"], workdir=task_copy)
    >>> result.returncode, result.timed_out, result.stdout[-300:]
"""

from __future__ import annotations

import logging
import os
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from aios_rl.contracts.errors import ConfigError, EnvError, SandboxError

logger = logging.getLogger(__name__)

_INSTALL_HINT = (
    "install bubblewrap with `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap`; "
    "commands never run without the sandbox"
)
_MIB = 1024 * 1024
_READ_CHUNK = 64 * 1024
_WRITE_CHUNK = 64 * 1024

# Commands run as a random uid from this range (root mode, see `_drop_args`). No account uses it;
# `secrets` rather than `random` so seeded workers do not all draw the same sequence of uids.
_UID_BASE = 1_000_000_000
_UID_SPAN = 1 << 24

_HOME = "/home/sandbox"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The only /etc pieces bound: the dynamic-linker cache (without it every exec searches the library dirs)
# and alternatives, where /usr/bin links such as awk point. Each bind is a mount that costs about a
# millisecond per command, and with no network nothing needs CA roots; no localtime keeps clocks in UTC.
_ETC_ENTRIES = ("ld.so.cache", "alternatives")
# Host trees that can never be a task copy: as root the task copy is chowned to the sandbox uid.
_NEVER_WORKDIRS = ("/etc", "/boot", "/dev", "/proc", "/sys", "/run", *_SYSTEM_DIRS)
_PYTHON_SHIM_DIR = "/opt/aios-rl/bin"
# Paths the sandbox itself mounts; a task copy mounted on (or above) them would hide them.
_RESERVED_MOUNTS = ("/tmp", "/dev", "/proc", "/etc", _HOME, _PYTHON_SHIM_DIR, *_SYSTEM_DIRS)


class SandboxConfig(BaseModel):
    """Limits and layout of the sandbox. Every field has a default; unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bwrap_path: str = Field(default="bwrap", description="bubblewrap executable: a name on PATH or a path.")
    timeout_s: float = Field(default=60.0, description="Default wall-clock limit per command, in seconds.")
    cpu_seconds: int = Field(default=30, description="RLIMIT_CPU per process: SIGXCPU, SIGKILL 1 s later.")
    address_space_bytes: int = Field(default=2048 * _MIB, description="RLIMIT_AS per process (virtual).")
    max_processes: int = Field(default=128, description="Processes + threads alive at once in one sandbox.")
    file_size_bytes: int = Field(default=64 * _MIB, description="RLIMIT_FSIZE: largest file written.")
    open_files: int = Field(default=256, description="RLIMIT_NOFILE: open file descriptors per process.")
    output_cap_bytes: int = Field(default=64 * 1024, description="Bytes kept of stdout and of stderr, each.")
    tmpfs_size_bytes: int = Field(default=256 * _MIB, description="Size of each tmpfs: /tmp, /dev/shm, HOME.")
    workdir_mount: str = Field(default="/aios-task/repo", description="The task copy's path inside (the cwd).")
    python_hash_seed: int = Field(default=0, description="PYTHONHASHSEED inside, so hash orders repeat.")
    env: tuple[tuple[str, str], ...] = Field(
        # Plugin autoload costs ~0.5 s per pytest start (hypothesis alone) and task repos need core pytest
        # only; a task that needs a plugin can set this to () or load it explicitly with `-p NAME`.
        default=(("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1"),),
        description="Extra environment variables set inside (the environment is otherwise cleared).",
    )
    extra_ro_paths: tuple[str, ...] = Field(
        default=(), description="More host paths bound read-only at the same path (e.g. a toolchain in /opt)."
    )

    @model_validator(mode="after")
    def _check(self) -> SandboxConfig:
        positive = ("timeout_s", "cpu_seconds", "address_space_bytes", "max_processes", "file_size_bytes",
                    "open_files", "tmpfs_size_bytes")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"sandbox.{name} must be > 0, got {getattr(self, name)!r}")
        if self.output_cap_bytes < 0:
            raise ConfigError(f"sandbox.output_cap_bytes must be >= 0, got {self.output_cap_bytes!r}")
        if not 0 <= self.python_hash_seed <= 4294967295:
            raise ConfigError(
                f"sandbox.python_hash_seed must be in [0, 4294967295], got {self.python_hash_seed!r}"
            )
        mount = os.path.normpath(self.workdir_mount)
        if not os.path.isabs(mount) or mount == "/" or any(_overlaps(mount, p) for p in _RESERVED_MOUNTS):
            raise ConfigError(
                f"sandbox.workdir_mount must be an absolute path outside {', '.join(_RESERVED_MOUNTS)}, "
                f"got {self.workdir_mount!r}; use e.g. '/aios-task/repo'"
            )
        for path in self.extra_ro_paths:
            if not os.path.isabs(path):
                raise ConfigError(f"sandbox.extra_ro_paths entries must be absolute paths, got {path!r}")
        return self


class SandboxResult(BaseModel):
    """What one command did inside the sandbox.

    Attributes:
        argv: the command as given (not the bubblewrap wrapper around it).
        returncode: exit status; 128+N when the command died of signal N (bubblewrap's convention); -9
            when the sandbox was killed at the wall timeout.
        stdout: decoded stdout (UTF-8, bad bytes replaced), at most ``output_cap_bytes`` bytes of it: when
            there was more, its first and last halves (the end of a run, e.g. pytest's verdict, is kept).
        stderr: decoded stderr, likewise capped.
        stdout_truncated: more stdout was produced than the cap; the middle was read and discarded.
        stderr_truncated: likewise for stderr.
        timed_out: the wall timeout killed the sandbox.
        term_signal: the signal that ended the command, or None. Decoded from 128+N, so a command that
            itself exits with 129..192 reads the same.
        duration_s: wall time from spawn to exit, sandbox setup included.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    term_signal: int | None
    duration_s: float

    @property
    def limit_hit(self) -> str | None:
        """The limit that ended the command: ``"timeout"``, ``"cpu"``, ``"file_size"`` or None.

        Memory, process and open-file limits do not kill: allocation, fork or open fails inside the
        command (MemoryError, EAGAIN, EMFILE) and the command reports it itself. Python ignores
        SIGXFSZ, so a Python writer sees ``OSError(EFBIG)`` instead of ``"file_size"`` here. A plain
        property, not a field, so results still round-trip through ``model_dump``/``model_validate``.
        """
        if self.timed_out:
            return "timeout"
        names = {int(signal.SIGXCPU): "cpu", int(signal.SIGXFSZ): "file_size"}
        return names.get(self.term_signal) if self.term_signal is not None else None


class _Raw(NamedTuple):
    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    duration_s: float


class Sandbox:
    """Runs commands in a bubblewrap sandbox on a task copy.

    Construction finds bubblewrap, prlimit and setpriv and runs ``python -c pass`` inside once, so a
    sandbox that cannot work fails here with :class:`SandboxError` rather than on the first action.

    Args:
        config: limits and layout; defaults to ``SandboxConfig()``.

    Raises:
        SandboxError: bubblewrap (or util-linux's prlimit/setpriv) is missing, or cannot build the sandbox.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._as_root = os.geteuid() == 0
        missing_bwrap = f"bubblewrap not found at {self.config.bwrap_path!r}; {_INSTALL_HINT}"
        bwrap = _find_tool(self.config.bwrap_path, missing_bwrap)
        prlimit = _find_system_tool("prlimit")
        self._setpriv = _find_system_tool("setpriv") if self._as_root else ""
        python_dir, python_mounts = _python_layout()
        self.read_only_paths: tuple[str, ...] = tuple(python_mounts) + tuple(
            os.path.normpath(p) for p in self.config.extra_ro_paths
        )
        """Host paths bound read-only at the same path, besides the system dirs and /etc pieces."""
        self._mount = os.path.normpath(self.config.workdir_mount)
        for path in self.read_only_paths:
            if _overlaps(path, self._mount):
                raise SandboxError(f"read-only path {path} overlaps workdir_mount {self._mount}; change one")
        self._search_path = f"{python_dir}:/usr/local/bin:/usr/bin:/bin"
        self._prefix = [bwrap, *self._namespace_args(), *self._mount_args(python_dir), *self._env_args()]
        self._limits = self._limit_args(prlimit)
        self._probe()

    def run(
        self, argv: list[str], workdir: Path, timeout_s: float | None = None, stdin: str | None = None,
        output_cap_bytes: int | None = None,
    ) -> SandboxResult:
        """Runs ``argv`` in the sandbox with the task copy ``workdir`` as its cwd.

        As root the task copy is first chowned, recursively, to this run's private uid, so pass only a
        disposable copy (never a source tree) and do not run two commands on one copy at once.

        Args:
            argv: program and arguments; the program is looked up on the sandbox PATH, where ``python``
                is the interpreter running aios-rl (with its installed packages, e.g. pytest).
            workdir: the host task copy; it is the only writable host path inside.
            timeout_s: wall-clock limit; defaults to ``config.timeout_s``.
            stdin: text fed to the command; None gives it /dev/null.
            output_cap_bytes: bytes kept of stdout and of stderr for this command; defaults to
                ``config.output_cap_bytes``.

        Returns:
            The exit status, capped outputs and which limit (if any) ended the command.

        Raises:
            EnvError: ``argv`` is empty, ``workdir`` is not a usable task copy, or ``timeout_s`` <= 0.
            SandboxError: bubblewrap failed to set the sandbox up (the command never started).
        """
        argv, timeout = _check_call(argv, timeout_s, self.config)
        host_dir = _check_workdir(workdir, self.read_only_paths)
        uid = _UID_BASE + secrets.randbelow(_UID_SPAN)
        if self._as_root:
            _give_tree_to(host_dir, uid)
        status_r, status_w = os.pipe()
        try:
            command = [
                *self._prefix, "--bind", str(host_dir), self._mount, "--chdir", self._mount,
                "--json-status-fd", str(status_w), "--", *self._limits, *self._drop_args(uid), *argv,
            ]
            cap = self.config.output_cap_bytes if output_cap_bytes is None else max(0, output_cap_bytes)
            raw = _execute(command, None, {}, stdin, cap, timeout, status_w)
            status = _read_available(status_r)
        finally:
            os.close(status_r)
        # bwrap writes an "exit-code" record only once the command itself ran to completion; without one
        # (and without our timeout kill) bwrap died during setup and the "exit status" is its own.
        if not raw.timed_out and b'"exit-code"' not in status:
            err = raw.stderr.decode(errors="replace").strip()
            raise SandboxError(
                f"bubblewrap could not set up the sandbox (exit {raw.returncode}): {err}; it needs root or "
                f"unprivileged user namespaces; {_INSTALL_HINT}"
            )
        result = _to_result(argv, raw)
        logger.debug("sandbox %s -> rc=%s timed_out=%s in %.3fs", argv[:3], result.returncode,
                     result.timed_out, result.duration_s)
        return result

    def _namespace_args(self) -> list[str]:
        # As root, bwrap needs no user namespace, and must not make one: it would map only uid 0, so the
        # command could not switch to the private uid that makes RLIMIT_NPROC count (see `_drop_args`).
        # Hence --unshare-all minus the user namespace, with every capability dropped but those setpriv
        # needs to switch uid and empty the bounding set, and DAC_READ_SEARCH for bwrap to chdir into a
        # 0700 task copy that already belongs to the private uid; setpriv drops all before the command.
        common = ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if not self._as_root:
            return ["--unshare-all", *common]
        caps = ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH"):
            caps += ["--cap-add", cap]
        unshare = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        return [*unshare, "--unshare-cgroup-try", *common, *caps]

    def _mount_args(self, python_dir: str) -> list[str]:
        # Order matters: bwrap applies mounts in argv order, so /tmp is mounted before a venv under /tmp
        # is bound into it. Parent dirs are created explicitly as 0755: bwrap makes implicit ones 0700,
        # which the unprivileged uid could not traverse.
        size = str(self.config.tmpfs_size_bytes)
        args = ["--ro-bind", "/usr", "/usr"]
        for top in _SYSTEM_DIRS[1:]:
            if os.path.islink(top):  # merged-/usr systems: /bin -> usr/bin
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        args += ["--perms", "0755", "--dir", "/etc"]
        for name in _ETC_ENTRIES:
            if os.path.lexists(f"/etc/{name}"):
                args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]  # --dev's own is root-only
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        made = {"/", "/tmp", "/etc", "/dev", "/proc", *_SYSTEM_DIRS}
        targets = [*self.read_only_paths, _HOME, self._mount]
        if python_dir == _PYTHON_SHIM_DIR:
            targets.append(_PYTHON_SHIM_DIR)
        for target in targets:
            for parent in reversed(Path(target).parents):
                if str(parent) not in made:
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
            if target == _HOME:
                args += ["--perms", "0777", "--size", size, "--tmpfs", _HOME]
            elif target == _PYTHON_SHIM_DIR:  # a `python` for interpreters that have none beside them
                args += ["--perms", "0755", "--dir", target]
                args += ["--symlink", sys.executable, f"{target}/python"]
            elif target in self.read_only_paths:
                args += ["--ro-bind", target, target]
        return args

    def _env_args(self) -> list[str]:
        env = {
            "PATH": self._search_path,
            "HOME": _HOME,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": str(self.config.python_hash_seed),
            **dict(self.config.env),
        }
        args = ["--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args

    def _limit_args(self, prlimit: str) -> list[str]:
        c = self.config
        # Soft CPU limit one second below the hard one, so the command first gets SIGXCPU (reported as
        # limit_hit "cpu") and only then SIGKILL. core=0: SIGXCPU would otherwise dump core into the copy.
        return [
            prlimit, f"--cpu={c.cpu_seconds}:{c.cpu_seconds + 1}", f"--as={c.address_space_bytes}",
            f"--nproc={c.max_processes}", f"--fsize={c.file_size_bytes}", f"--nofile={c.open_files}",
            "--core=0", "--",
        ]

    def _drop_args(self, uid: int) -> list[str]:
        # Why a private uid: Linux never enforces RLIMIT_NPROC for root (nor for root mapped into a user
        # namespace: 300 forks passed under nproc=20 here), so a fork bomb would only stop at the wall
        # timeout. cgroup pids.max needs a writable, delegated cgroup, which CI does not promise (the dev
        # machine has cgroup v1 only). A uid no other process uses makes the kernel count exactly this
        # sandbox's processes against RLIMIT_NPROC; the pid namespace dies with bwrap at the end.
        if not self._as_root:
            return []  # unprivileged: the user namespace counts processes per sandbox (Linux >= 5.14)
        return [
            self._setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all", "--",
        ]

    def _probe(self) -> None:
        probe_dir = Path(tempfile.mkdtemp(prefix="aios-rl-sandbox-probe-"))
        try:
            result = self.run(["python", "-c", "pass"], probe_dir, timeout_s=30)
        finally:
            shutil.rmtree(probe_dir, ignore_errors=True)
        if result.returncode != 0:
            raise SandboxError(
                f"the sandbox starts but `python -c pass` fails inside (exit {result.returncode}): "
                f"{result.stderr.strip()[-1000:]}; bind what is missing with SandboxConfig.extra_ro_paths"
            )


def check_bubblewrap(config: SandboxConfig | None = None) -> None:
    """Checks that bubblewrap is installed and can build this sandbox.

    Args:
        config: the sandbox configuration to check (``bwrap_path`` and layout).

    Raises:
        SandboxError: bubblewrap is missing or cannot create the namespaces and mounts, with the
            install command in the message.
    """
    Sandbox(config)  # construction finds the tools and runs a probe command inside


def run_unsandboxed(
    argv: list[str],
    workdir: Path,
    timeout_s: float | None = None,
    stdin: str | None = None,
    config: SandboxConfig | None = None,
) -> SandboxResult:
    """BENCHMARK ONLY: runs ``argv`` exactly as :meth:`Sandbox.run` would, but without any sandbox.

    Same PATH (so the same ``python``), same capture and timeout code, no isolation and no limits. It
    exists so ``benchmarks/shell_env.py`` can measure what the sandbox adds; environments must
    never use it.
    """
    config = config or SandboxConfig()
    argv, timeout = _check_call(argv, timeout_s, config)
    python_dir, _ = _python_layout()
    if python_dir == _PYTHON_SHIM_DIR:
        python_dir = os.path.dirname(sys.executable)
    env = {
        "PATH": f"{python_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": str(config.python_hash_seed),
        **dict(config.env),  # same variables as inside, so the comparison is like for like
    }
    raw = _execute(argv, Path(workdir), env, stdin, config.output_cap_bytes, timeout, None)
    return _to_result(argv, raw)


def _execute(
    command: list[str],
    cwd: Path | None,
    env: dict[str, str],
    stdin: str | None,
    cap: int,
    timeout: float,
    pass_fd: int | None,
) -> _Raw:
    """Spawns ``command`` in its own process group, pumps its pipes, kills the group at the deadline."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            pass_fds=() if pass_fd is None else (pass_fd,),
        )
    finally:
        if pass_fd is not None:
            os.close(pass_fd)  # only the child keeps the write end, so the status pipe ends with bwrap
    deadline = start + timeout
    try:
        out, err, timed_out = _pump(proc, None if stdin is None else stdin.encode(), cap, deadline)
        if not timed_out:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        # Killing bwrap's process group kills bwrap; --die-with-parent then kills the sandbox's pid 1,
        # and the kernel kills everything else in the pid namespace with it.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return _Raw(proc.returncode, out.data, err.data, out.truncated, err.truncated, timed_out,
                time.monotonic() - start)


class _CappedBuffer:
    """Keeps at most ``cap`` bytes of what is fed to it: the first half and the last half (a command's
    verdict, such as pytest's summary, comes last), and remembers whether bytes between were dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._head = bytearray()
        self._tail = bytearray()
        self._tail_cap = cap - cap // 2
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self.cap // 2 - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        excess = len(self._tail) - self._tail_cap
        if excess > 0:
            self.truncated = True
            del self._tail[:excess]

    @property
    def data(self) -> bytes:
        return bytes(self._head + self._tail)


def _pump(
    proc: subprocess.Popen[bytes], stdin: bytes | None, cap: int, deadline: float
) -> tuple[_CappedBuffer, _CappedBuffer, bool]:
    """Feeds stdin and drains stdout/stderr until both close or the deadline passes.

    Output past the cap is still read (its middle dropped) so the command never blocks on a full pipe and
    memory stays near ``2 * cap`` whatever it prints. Returns the two buffers and whether the deadline passed.
    """
    assert proc.stdout is not None and proc.stderr is not None
    buffers = {proc.stdout.fileno(): _CappedBuffer(cap), proc.stderr.fileno(): _CappedBuffer(cap)}
    pending = memoryview(stdin or b"")
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        if proc.stdin is not None:
            if pending:
                os.set_blocking(proc.stdin.fileno(), False)
                selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return buffers[proc.stdout.fileno()], buffers[proc.stderr.fileno()], True
            for key, _ in selector.select(remaining):
                if key.fd in buffers:
                    chunk = os.read(key.fd, _READ_CHUNK)
                    if chunk:
                        buffers[key.fd].feed(chunk)
                    else:
                        selector.unregister(key.fd)
                    continue
                try:
                    pending = pending[os.write(key.fd, pending[:_WRITE_CHUNK]):]
                except BlockingIOError:
                    continue
                except BrokenPipeError:  # the command stopped reading; the rest of stdin is moot
                    pending = pending[:0]
                if not pending:
                    selector.unregister(key.fd)
                    assert proc.stdin is not None
                    proc.stdin.close()
    return buffers[proc.stdout.fileno()], buffers[proc.stderr.fileno()], False


def _to_result(argv: list[str], raw: _Raw) -> SandboxResult:
    if raw.timed_out:
        term_signal: int | None = signal.SIGKILL
    elif raw.returncode < 0:  # unsandboxed: Popen reports death by signal N as -N
        term_signal = -raw.returncode
    elif 128 < raw.returncode <= 128 + 64:
        term_signal = raw.returncode - 128
    else:
        term_signal = None
    return SandboxResult(
        argv=tuple(argv),
        returncode=raw.returncode,
        stdout=raw.stdout.decode(errors="replace"),
        stderr=raw.stderr.decode(errors="replace"),
        stdout_truncated=raw.stdout_truncated,
        stderr_truncated=raw.stderr_truncated,
        timed_out=raw.timed_out,
        term_signal=int(term_signal) if term_signal is not None else None,
        duration_s=raw.duration_s,
    )


def _read_available(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _give_tree_to(root: Path, uid: int) -> None:
    """Chowns the task copy to the sandbox uid so the unprivileged command can write it.

    lchown, never following symlinks, so a link planted by an earlier command cannot hand a host file
    to the sandbox. A regular file with other hard links (``git clone --local``, ``cp -al``) is first
    replaced by a private copy: chowning the shared inode would make the other name writable from inside.
    """
    os.lchown(root, uid, uid)
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    private = f"{entry.path}.aios-rl-unlink-{os.getpid()}"
                    shutil.copy2(entry.path, private)
                    os.replace(private, entry.path)
                os.lchown(entry.path, uid, uid)


def _check_call(argv: list[str], timeout_s: float | None, config: SandboxConfig) -> tuple[list[str], float]:
    argv = [str(a) for a in argv]
    if not argv:
        raise EnvError("sandbox command is empty; pass the program and its arguments, e.g. ['python', '-V']")
    timeout = config.timeout_s if timeout_s is None else float(timeout_s)
    if timeout <= 0:
        raise EnvError(f"sandbox timeout_s must be > 0, got {timeout_s!r}")
    return argv, timeout


def _check_workdir(workdir: Path, read_only_paths: tuple[str, ...]) -> Path:
    host_dir = Path(workdir).resolve()
    if not host_dir.is_dir():
        raise EnvError(f"sandbox workdir {workdir} is not a directory; pass the task copy")
    forbidden = (*_NEVER_WORKDIRS, *read_only_paths)
    if len(host_dir.parts) < 3 or any(_overlaps(str(host_dir), p) for p in forbidden):
        raise EnvError(
            f"sandbox workdir {host_dir} is a system or interpreter path (or contains one); "
            "pass a disposable task copy such as /tmp/aios-rl/tasks/<id>"
        )
    return host_dir


def _python_layout() -> tuple[str, list[str]]:
    """Returns the PATH dir holding ``python`` (this interpreter) and the install dirs to bind read-only.

    A venv's ``bin/python`` only works at its own path (pyvenv.cfg is found next to it, and the venv's
    console scripts name it in their shebang), so installs are bound at their host paths.
    """
    exe = sys.executable
    candidates = {sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
                  os.path.dirname(os.path.realpath(exe))}
    paths = sorted({os.path.normpath(p) for p in candidates if p}, key=len)
    mounts: list[str] = []
    for path in paths:
        covered = any(_is_within(path, d) for d in _SYSTEM_DIRS) or any(_is_within(path, m) for m in mounts)
        if not covered:
            mounts.append(path)
    bin_dir = os.path.dirname(exe)
    beside = os.path.join(bin_dir, "python")
    if os.path.exists(beside) and os.path.samefile(beside, exe):
        return bin_dir, mounts
    return _PYTHON_SHIM_DIR, mounts  # e.g. a system python3 with no `python` next to it


def _find_tool(name_or_path: str, problem: str) -> str:
    found = shutil.which(name_or_path)
    if found is None:
        raise SandboxError(problem)
    return os.path.realpath(found)


def _find_system_tool(name: str) -> str:
    """Finds a util-linux helper that runs inside the sandbox, so it must live under a bound system dir."""
    path = _find_tool(name, f"{name} not found; install util-linux (`apt-get install util-linux`)")
    if not any(_is_within(path, d) for d in _SYSTEM_DIRS):
        raise SandboxError(f"{path} lies outside {', '.join(_SYSTEM_DIRS)}, so the sandbox cannot run it")
    return path


def _is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _overlaps(a: str, b: str) -> bool:
    return _is_within(a, b) or _is_within(b, a)

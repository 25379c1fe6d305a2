"""Whether a shell task is a real task: its tests fail as given and pass once its reference patch is applied.

This is the single code path behind the generator (keeps a mutant only if :func:`judge` accepts it),
``aios-rl shell import-tasks`` and ``aios-rl shell check-tasks`` (both call :func:`check_task`). Every run
goes through the bubblewrap :class:`Sandbox` on a throwaway copy of the task's ``repo/``, so a task under
check can neither change its own files nor anything else.

Example:
    >>> check = check_task(Path("tasks/roman-3f2a9c0d1e"), validation_sandbox())
    >>> check.verdict, check.reason, check.failing_tests
"""

from __future__ import annotations

import logging
import math
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import Field
from tqdm import tqdm

from aios_rl.contracts.episode import Record
from aios_rl.contracts.errors import ContractError, EnvError
from aios_rl.envs.shell.candidates import judge_file
from aios_rl.envs.shell.mutate import apply_unified_diff
from aios_rl.envs.shell.patches import diff_paths, without_files
from aios_rl.envs.shell.pytest_output import (
    is_pytest,
    judged_run,
    new_report_name,
    read_report,
    reporter_argv,
)
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig
from aios_rl.envs.shell.task import IGNORED_IN_COPIES, MANIFEST, REPO, ShellTaskManifest, read_manifest
from aios_rl.envs.shell.workspace import take_file

logger = logging.getLogger(__name__)

PYTEST_COMMAND: tuple[str, ...] = ("python", "-m", "pytest", "-q", "tests")
Verdict = Literal["valid", "invalid"]

# Big enough that pytest's closing summary (after every traceback) is never cut off by the cap.
_OUTPUT_CAP = 4 * 1024 * 1024
# pytest exit codes that mean "the suite could not be judged" rather than "tests failed".
_PYTEST_BROKEN = {
    3: "pytest hit an internal error",
    4: "pytest usage error",
    5: "the test command collects no tests",
}


class SuiteRun(Record):
    """One sandboxed run of a test command, with what its pytest output says.

    Attributes:
        returncode: exit status of the command (-9 when the wall timeout killed it).
        timed_out: the wall timeout ended the run.
        limit_hit: the sandbox limit that ended the run (``"timeout"``, ``"cpu"``, ``"file_size"``) or None.
        failed: node ids reported ``FAILED`` or ``ERROR`` (empty for non-pytest output): from the run's
            report for a ``python -m pytest ...`` command (errors, then failures), else from the output.
        counts: the summary line's counts, e.g. ``{"failed": 1, "passed": 26}`` (``errors`` counted as
            ``error``); empty if there is none.
        output_truncated: stdout or stderr was longer than the cap, so ids (when there is no report) or
            counts may be missing.
        duration_s: wall time of the sandboxed run.
        tail: the last lines of output, for error messages.
    """

    returncode: int = Field(description="Exit status (-9 when killed at the wall timeout).")
    timed_out: bool = Field(description="The wall timeout ended the run.")
    failed: list[str] = Field(default_factory=list, description="FAILED/ERROR node ids.")
    counts: dict[str, int] = Field(default_factory=dict, description="Counts from pytest's summary line.")
    limit_hit: str | None = Field(default=None, description="Sandbox limit that ended the run, if any.")
    output_truncated: bool = Field(default=False, description="Output exceeded the cap.")
    duration_s: float = Field(default=0.0, description="Wall time of the run, in seconds.")
    tail: str = Field(default="", description="Last lines of output.")

    @property
    def passed(self) -> int:
        """Tests reported passed by the summary line (0 when there is none)."""
        return self.counts.get("passed", 0)

    @property
    def n_failed(self) -> int:
        """Failed plus errored tests, from the summary line or else from the listed ids."""
        return max(self.counts.get("failed", 0) + self.counts.get("error", 0), len(self.failed))


class TaskCheck(Record):
    """The verdict on one task directory.

    Attributes:
        task_id: the manifest's id, or the directory name when the manifest is unreadable.
        verdict: ``valid`` when the tests fail as given and pass with the reference patch (or, for a task
            without a patch, fail as given).
        reason: one line saying why.
        failing_tests: node ids that fail as given.
        passing_tests: node ids among ``failing_tests`` that pass with the reference patch.
        given: the run on the task as given (None if it never ran).
        patched: the run with the reference patch applied (None without a patch or when it did not apply).
    """

    task_id: str
    verdict: Verdict
    reason: str
    failing_tests: list[str] = Field(default_factory=list)
    passing_tests: list[str] = Field(default_factory=list)
    given: SuiteRun | None = None
    patched: SuiteRun | None = None

    @property
    def valid(self) -> bool:
        """True for verdict ``valid``."""
        return self.verdict == "valid"


def validation_sandbox(max_timeout_s: float = 3600.0, cpu_seconds: int | None = None) -> Sandbox:
    """A sandbox sized for test runs: a large output cap and, by default, a CPU limit above the wall limit.

    By default the CPU limit must not end a slow but legitimate suite before its own ``timeout_s`` (a
    manifest may allow up to an hour), so the wall timeout of each run is what bounds it. The generator
    passes a small ``cpu_seconds`` instead: CPU time, unlike wall time, does not grow with machine load,
    so an endless-loop mutant is cut off at the same point on a busy machine as on an idle one.

    Raises:
        SandboxError: bubblewrap is missing or unusable (there is no unsandboxed fallback).
    """
    cpu = cpu_seconds if cpu_seconds is not None else math.ceil(max_timeout_s) + 1
    return Sandbox(SandboxConfig(timeout_s=max_timeout_s, cpu_seconds=cpu, output_cap_bytes=_OUTPUT_CAP))


def run_suite(
    repo: Path,
    test_command: Sequence[str],
    timeout_s: float,
    sandbox: Sandbox,
    *,
    files: Mapping[str, str] | None = None,
    patch: str | None = None,
) -> SuiteRun:
    """Runs ``test_command`` in the sandbox on a fresh copy of ``repo`` (``repo`` itself is never touched).

    Args:
        repo: the repository to copy (``.git`` and caches are left out).
        test_command: argv run from the copy's root.
        timeout_s: wall limit for the run.
        sandbox: the sandbox to run in.
        files: ``{relative path: text}`` written into the copy first (the generator's mutant).
        patch: a unified diff applied to the copy first (a task's reference patch).

    Raises:
        EnvError: ``repo`` cannot be copied (a named pipe, an unreadable file), or the patch does not
            apply (malformed, or a hunk does not match).
    """
    scratch = Path(tempfile.mkdtemp(prefix="aios-rl-suite-"))
    try:
        copy = scratch / REPO
        try:
            shutil.copytree(repo, copy, ignore=IGNORED_IN_COPIES, symlinks=True)
        except OSError as exc:
            raise EnvError(f"cannot copy {REPO}/: {_copy_problem(exc)}") from exc
        for rel, text in (files or {}).items():
            (copy / rel).write_text(text, encoding="utf-8")
        if patch is not None:
            apply_unified_diff(copy, patch)
        # A python -m pytest command runs through the reporter, as the environment runs it (without its
        # report flags): its report names every failing test, however much of the output the cap kept.
        name = new_report_name()
        command = reporter_argv(test_command, name, extra=())
        result = sandbox.run(command or list(test_command), copy, timeout_s=timeout_s)
        report = read_report(take_file(copy / name)) if command is not None else None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    output = result.stdout + "\n" + result.stderr
    # without a report, pytest's default summary (in the text) lists the failures
    parsed = judged_run(report, result.stdout, result.returncode, timed_out=result.timed_out)
    return SuiteRun(
        returncode=result.returncode,
        timed_out=result.timed_out,
        limit_hit=result.limit_hit,
        failed=list(parsed.failing),
        counts=parsed.counts,
        output_truncated=result.stdout_truncated or result.stderr_truncated,
        duration_s=result.duration_s,
        tail="\n".join(output.strip().splitlines()[-5:]),
    )


def _copy_problem(exc: OSError) -> str:
    """What went wrong in a copytree, in one line (shutil.Error lists every file it could not copy)."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        return "; ".join(str(entry[-1]) for entry in exc.args[0][:3])
    return str(exc)


def _broken(run: SuiteRun, test_command: Sequence[str], timeout_s: float) -> str | None:
    """Why ``run`` says nothing about the code (timeout, pytest usage/collection trouble), or None."""
    if run.timed_out:
        return f"timed out after {timeout_s:g}s"
    if run.limit_hit == "cpu":
        return "hit the sandbox CPU-time limit (an endless loop?)"
    if is_pytest(test_command) and run.returncode in _PYTEST_BROKEN:
        return f"{_PYTEST_BROKEN[run.returncode]} (exit {run.returncode})"
    return None


def judge(
    given: SuiteRun, patched: SuiteRun | None, test_command: Sequence[str], timeout_s: float
) -> tuple[Verdict, str]:
    """The validity rule: the tests fail as given, and pass with the reference patch when there is one.

    Returns:
        The verdict and a one-line reason.
    """
    if (problem := _broken(given, test_command, timeout_s)) is not None:
        return "invalid", f"as given: {problem}"
    if given.returncode == 0:
        return "invalid", "tests already pass as given; a task must fail before its fix"
    failing = f"{given.n_failed} failing" if given.n_failed else f"exit {given.returncode}"
    if patched is None:
        return "valid", f"fails as given ({failing}); no reference patch to check"
    if (problem := _broken(patched, test_command, timeout_s)) is not None:
        return "invalid", f"with the reference patch: {problem}"
    if patched.returncode != 0:
        still = ", ".join(patched.failed[:3]) or f"exit {patched.returncode}"
        return "invalid", f"tests still fail with the reference patch: {still}"
    return "valid", f"fails as given ({failing}) and passes with the reference patch"


def _invalid(task_id: str, reason: str, **runs: SuiteRun | None) -> TaskCheck:
    return TaskCheck(task_id=task_id, verdict="invalid", reason=reason, **runs)


def _read(task_dir: Path) -> ShellTaskManifest | TaskCheck:
    """The manifest, or an invalid verdict saying what is wrong with the directory."""
    if not (task_dir / MANIFEST).is_file():
        return _invalid(task_dir.name, f"missing {MANIFEST}")
    if not (task_dir / REPO).is_dir():
        return _invalid(task_dir.name, f"missing {REPO}/ directory")
    try:
        return read_manifest(task_dir)
    except ContractError as exc:
        return _invalid(task_dir.name, "invalid manifest: " + "; ".join(exc.problems or [str(exc)]))


def check_task(task_dir: Path, sandbox: Sandbox) -> TaskCheck:
    """Runs a task's ``test_command`` as given and, if it has one, with its ``reference_patch`` applied.

    Never raises for a bad task: a missing or invalid manifest, a patch that does not apply or a run that
    times out are ``invalid`` verdicts with the reason. Target tests named by the manifest must be among
    the failing ones when the output lists failing ids.

    Raises:
        SandboxError: the sandbox itself broke (not the task's fault).
    """
    manifest = _read(task_dir)
    if isinstance(manifest, TaskCheck):
        return manifest
    task_id, command, timeout = manifest.task_id, manifest.test_command, manifest.timeout_s
    repo = task_dir / REPO
    try:
        given = run_suite(repo, command, timeout, sandbox)
    except EnvError as exc:
        return _invalid(task_id, str(exc))
    verdict, reason = judge(given, None, command, timeout)
    if verdict == "invalid":
        return _invalid(task_id, reason, given=given)
    missing = [t for t in manifest.target_tests or [] if t not in given.failed]
    if given.failed and missing:
        return _invalid(task_id, f"target tests do not fail as given: {', '.join(missing[:3])}", given=given)
    patched = None
    if manifest.reference_patch is not None:
        # Judged as the verifier judges: its changes to the tests and their set-up are left out (a patch may
        # add regression tests; the fix itself must be in the code).
        try:
            code_only = without_files(manifest.reference_patch, judge_file)
        except EnvError as exc:
            return _invalid(task_id, f"reference patch does not apply: {exc}", given=given)
        if not code_only.strip():
            left = ", ".join(diff_paths(manifest.reference_patch)[:3])
            return _invalid(task_id, f"reference patch changes only {left}, which the verifier puts back as "
                            "they were before judging (tests and their set-up); the fix must be in the code",
                            given=given)
        try:
            patched = run_suite(repo, command, timeout, sandbox, patch=code_only)
        except EnvError as exc:
            return _invalid(task_id, f"reference patch does not apply: {exc}", given=given)
        verdict, reason = judge(given, patched, command, timeout)
        if verdict == "invalid" and code_only != manifest.reference_patch:
            reason += " (its changes to tests and their set-up left out, as the verifier leaves them out)"
    fixed = [t for t in given.failed if t not in patched.failed] if patched is not None else []
    return TaskCheck(task_id=task_id, verdict=verdict, reason=reason, failing_tests=given.failed,
                     passing_tests=fixed, given=given, patched=patched)


def check_tasks(
    task_dirs: Sequence[Path], sandbox: Sandbox, workers: int = 2, *, show_progress: bool = False
) -> list[TaskCheck]:
    """:func:`check_task` on many directories, ``workers`` at a time; results in input order.

    ``show_progress`` draws a progress bar on stderr when it is a terminal.
    """
    if workers < 1:
        raise EnvError(f"workers must be >= 1, got {workers}")
    bar = tqdm(total=len(task_dirs), desc="checking tasks", unit="task", file=sys.stderr,
               disable=not show_progress or not sys.stderr.isatty())
    with ThreadPoolExecutor(max_workers=workers) as pool, bar:
        checks = []
        for check in pool.map(lambda d: check_task(d, sandbox), task_dirs):
            checks.append(check)
            bar.update(1)
        return checks

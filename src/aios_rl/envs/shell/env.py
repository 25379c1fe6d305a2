"""``shell/bugfix-v1``: repair a bug in a real repository copy, every command in a bubblewrap sandbox.

An episode works on a fresh copy of ``spec["task_dir"]/repo`` (the task directory is never touched).
:meth:`ShellBugfixEnv.reset` runs the test command once (the baseline: which tests fail), then each
:meth:`~ShellBugfixEnv.step` takes one action (:mod:`~aios_rl.envs.shell.actions`): ``read`` a file
(host-side, a pure read with path checks), ``run`` an allowed command in the sandbox, ``patch`` files
(the tests are then re-run automatically), ``revert`` the working copy to its state at reset, or ``stop``.
A patch candidate already applied to the very same working copy (e.g. before a revert) is not offered again.
At reset a pytest suite is also run once under a line tracer (:mod:`~aios_rl.envs.shell.spectrum`), whose
per-line failing/passing counts give the patch candidates a line-level suspicion feature. Step rewards are 0: the control plane fuses the
terminal reward from :meth:`~ShellBugfixEnv.verify` later (ARCHITECTURE §5); ``config.step_penalty`` is
only reported in ``info``. ``info`` also repeats the latest test results the observation shows:
``tests_passed`` / ``tests_failed`` (counts) and ``all_tests_passed`` (the summary's "all passed"), which the
oracle reads to target ``stop`` at a passing state when ``config.stop_on_pass`` is off.

Observations are deterministic functions of the episode state (durations and addresses in command
output are masked), so restoring a snapshot and taking the same actions gives the same observations.
Test runs (and the traced run) are recalled from a per-process memo when the same command already ran
on the very same files (:mod:`~aios_rl.envs.shell.run_memo`); :meth:`~ShellBugfixEnv.verify` always runs
afresh. The environment keeps only the prompt and spec of a task (:class:`TaskSpec`); ``task.oracle`` is
dropped at reset, so nothing it shows or offers can depend on the reference fix.

Verification evidence (what :class:`~aios_rl.control.compare.ShellComparator` reads):

* ``tests_passed`` / ``tests_failed``: tests passing / failing (or erroring) now.
* ``target_total``: target tests (``spec["target_tests"]``, else the tests failing at reset).
* ``target_unresolved``: target tests that do not pass now (failing, erroring or no longer collected:
  deleting a test does not fix it).
* ``new_failures``: tests that passed at reset and do not pass now (again, deleted ones count).
* ``files_modified``: files added, removed or changed since reset.
* ``unrelated_files_modified``: of those, the files a bug fix in the code has no reason to touch: test
  files and anything that is not a non-test ``.py`` source file (every candidate and reference fix
  changes only non-test source files).
* ``no_progress_steps``: steps after which the file state and the latest test summary were unchanged.
* ``steps``: steps taken.

Before judging, :meth:`~ShellBugfixEnv.verify` puts the tests, pytest's configuration and any module that
would shadow pytest or run at interpreter start-up (:func:`judge_file`) back as they were at reset, so the
verdict is on the student's changes to the code under the task's own tests; the evidence still counts the
files the student changed. Which tests pass is taken from the run's report file, written by pytest itself
through a plugin of the environment (:data:`~aios_rl.envs.shell.pytest_output.REPORTER`; a file with a
random name per run, read and removed before the working copy is read back), not from the text, so the
verdict does not depend on how much the suite prints; without a report (a ``pytest`` or ``py.test``
command, or pytest never returned) the text's summary is read as before. (Code under test runs inside the
test process and could still print a fake summary or write a fake report: the verifier trusts pytest's
record, as benchmarks of this kind do.)

Outcome: ``success`` when the command passes with no target unresolved and no new failure;
``partial`` when fewer targets are unresolved than at reset; ``failure`` otherwise; ``blocked`` (with
``completed=False``) when the run could not complete: it timed out, or the sandbox failed.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import Observation, StepResult, Task, Verification
from aios_rl.contracts.errors import ConfigError, EnvError, SandboxError
from aios_rl.envs.shell import actions as act
from aios_rl.envs.shell.candidates import (
    Attempt,
    History,
    PatchCandidate,
    assemble,
    attempts_of,
    is_test_file,
    judge_file,
    patch_pool,
)
from aios_rl.envs.shell.mutate import apply_unified_diff
from aios_rl.envs.shell.patches import apply_edit, edited_lines
from aios_rl.envs.shell.pytest_output import (
    RunReport,
    SuiteRun,
    display_output,
    exit_code_run,
    is_pytest,
    judged_run,
    new_report_name,
    read_report,
    reporter_argv,
    reporting_argv,
    summary_text,
)
from aios_rl.envs.shell.run_memo import MAX_OUTPUT_BYTES, shared_memo, tree_key
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig
from aios_rl.envs.shell.spectrum import SPECTRUM_FILE, LineSpectrum, parse_spectrum, spectrum_argv
from aios_rl.envs.shell.task import IGNORED_IN_COPIES, REPO
from aios_rl.envs.shell.workspace import (
    FileTree,
    changed_paths,
    inside,
    new_workdir,
    python_sources,
    read_tree,
    take_file,
    tree_bytes,
    with_restored,
    write_tree,
)

logger = logging.getLogger(__name__)

ENV_ID = "shell/bugfix-v1"
_POOL_CACHE_SIZE = 16
_MAX_STEPS = 1000  # a bug-fix episode takes a dozen steps; more than this is a typo, not a budget


class ShellEnvConfig(ConfigModel):
    """Budgets and presentation of the shell bug-fix environment."""

    max_steps: int = Field(
        default=12, le=_MAX_STEPS,
        description="Steps per episode (at most 1000); it is truncated after the last.",
    )
    stop_on_pass: bool = Field(default=True, description="End the episode when all tests pass after a patch.")
    episode_wall_s: float = Field(
        default=180.0, description="Wall-clock budget of the episode's own steps, in seconds (time spent inside "
        "step; waiting while other environments of a batch step does not count).",
    )
    output_cap_chars: int = Field(default=2000, description="Characters of command output shown (last kept).")
    test_output_cap_bytes: int = Field(
        default=4 * 1024 * 1024, gt=0, description="Bytes of a test run's output kept (its first and last "
        "halves); it is judged from its report file, or from this text when there is none.",
    )
    read_cap_chars: int = Field(default=6000, description="Characters of a read file shown (beginning kept).")
    max_candidates: int = Field(default=256, description="Most candidate actions offered per observation.")
    max_copy_bytes: int = Field(
        default=256 * 1024 * 1024, gt=0, description="Largest the working copy may grow: a command that "
        "leaves it bigger has its file changes undone (the host reads the copy after every command).",
    )
    small_repo_functions: int = Field(
        default=20, description="Offer patches in every function when the repo has at most this many."
    )
    line_spectrum: bool = Field(
        default=True, description="Trace the suite once at reset for line-level suspicion features (pytest only)."
    )
    spectrum_timeout_factor: float = Field(
        default=3.0, gt=0, description="The traced run's timeout, in multiples of the scaled test timeout."
    )
    max_failing_ids_shown: int = Field(default=10, description="Failing test ids listed in the test summary.")
    step_penalty: float = Field(default=0.0, description="Per-step penalty reported in info, not rewarded.")
    test_timeout_factor: float = Field(
        default=5.0, gt=0, description="Test runs after reset may take this many times the baseline run's time."
    )
    min_test_timeout_s: float = Field(default=3.0, gt=0, description="Floor of that scaled test-run timeout.")
    work_root: str | None = Field(default=None, description="Where working copies go; None: the temp dir.")
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig, description="Sandbox limits and layout.")
    run_memo: int = Field(
        default=2048, ge=0,
        description="Test runs remembered per process (same files, same command: not run again); 0: none.",
    )

    @model_validator(mode="after")
    def _check(self) -> ShellEnvConfig:
        positive = ("max_steps", "episode_wall_s", "output_cap_chars", "read_cap_chars", "max_candidates")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"shell env {name} must be > 0, got {getattr(self, name)!r}")
        if self.max_candidates < 3:  # run, stop and, once the copy is modified, revert are always offered
            raise ConfigError(
                f"shell env max_candidates must be >= 3 (run, revert, stop), got {self.max_candidates}"
            )
        for name in ("step_penalty", "small_repo_functions", "max_failing_ids_shown"):
            if getattr(self, name) < 0:
                raise ConfigError(f"shell env {name} must be >= 0, got {getattr(self, name)!r}")
        return self


@dataclass(frozen=True)
class TaskSpec:
    """What the environment keeps of a task: never its ``oracle``, which it drops at reset."""

    task_id: str
    prompt: str
    task_dir: Path
    test_command: tuple[str, ...]
    timeout_s: float
    target_tests: tuple[str, ...]


@dataclass(frozen=True)
class EpisodeState:
    """Everything a step depends on besides the files: the snapshot payload next to the file tree."""

    spec: TaskSpec
    baseline: SuiteRun
    targets: tuple[str, ...]
    initial: FileTree
    spectrum: LineSpectrum | None = None
    step: int = 0
    files_read: frozenset[str] = frozenset()
    tried: frozenset[str] = frozenset()
    last_action: str = ""
    last_output: str = ""
    latest: SuiteRun | None = None
    latest_label: str = "at reset"
    progress_key: str = ""
    no_progress_steps: int = 0
    last_patch_failed: bool = False
    files_digest: str = ""
    patched: frozenset[tuple[str, str]] = frozenset()
    attempts: tuple[Attempt, ...] = ()  # applied patches and their test results (in-episode feedback)
    terminated: bool = False
    truncated: bool = False
    elapsed_s: float = 0.0  # seconds spent inside this episode's steps: the clock of episode_wall_s
    observation: Observation | None = None


@dataclass(frozen=True)
class ShellSnapshot:
    """What :meth:`ShellBugfixEnv.snapshot` returns: the episode state and the working copy's files."""

    state: EpisodeState
    files: FileTree


@dataclass(frozen=True)
class _Effect:
    output: str
    info: dict[str, Any]
    tests: SuiteRun | None = None
    stop: bool = False
    files: FileTree | None = None  # the working copy as the action's test run left it; None: read it anew


class ShellBugfixEnv:
    """The shell bug-fix environment (``shell/bugfix-v1``); see the module docstring.

    Args:
        config: budgets and presentation; defaults to ``ShellEnvConfig()``.
        sandbox: a ready sandbox to share between environments; built from ``config.sandbox`` on first
            reset when None.

    Example:
        >>> env = ShellBugfixEnv()
        >>> obs = env.reset(task, seed=0)
        >>> result = env.step(obs.candidates[0])
        >>> env.verify().outcome
        'failure'
        >>> env.close()
    """

    env_id = ENV_ID
    version = "1"

    def __init__(self, config: ShellEnvConfig | None = None, *, sandbox: Sandbox | None = None) -> None:
        self.config = config or ShellEnvConfig()
        self._sandbox = sandbox
        self._workdir: Path | None = None
        self._state: EpisodeState | None = None
        self._pools: dict[str, list[PatchCandidate]] = {}
        self._cleanup: Callable[[], Any] = lambda: None

    # ------------------------------------------------------------------ protocol

    def reset(self, task: Task, *, seed: int) -> Observation:
        """Start an episode on a fresh copy of the task's repository and run its tests once.

        ``seed`` is accepted for the protocol; the environment has no randomness of its own.

        Raises:
            EnvError: the task is not a shell task or its spec/repository is missing or malformed.
            SandboxError: the sandbox cannot be set up.
        """
        spec = read_spec(task)
        self._state = None  # a reset that raises below leaves no episode running, not the previous one
        self._new_workdir()
        try:
            shutil.copytree(spec.task_dir / REPO, self._repo, symlinks=True, ignore=IGNORED_IN_COPIES)
        except OSError as exc:  # shutil.Error (a pipe, an unreadable file...) is an OSError
            raise EnvError(f"task {task.task_id}: cannot copy {spec.task_dir / REPO}: {str(exc)[:500]}; "
                           "a task repository must hold only regular files, directories and links") from exc
        baseline, output, duration, files = self._run_tests(spec)
        # Later runs get a budget scaled from the baseline: a patch that makes the code loop forever (common
        # for candidate edits of loop conditions) costs seconds, not the task's whole timeout, per step.
        scaled = max(self.config.min_test_timeout_s, self.config.test_timeout_factor * duration)
        spec = replace(spec, timeout_s=min(spec.timeout_s, scaled))
        targets = spec.target_tests or baseline.failing
        missing = [t for t in spec.target_tests if t not in baseline.failing]
        if missing:
            logger.warning("task %s: target tests not failing at reset: %s", task.task_id, missing[:5])
        spectrum, initial = self._line_spectrum(spec, baseline, files)
        digest = _digest(initial)
        state = EpisodeState(
            spec=spec, baseline=baseline, targets=tuple(targets), initial=initial, spectrum=spectrum, latest=baseline,
            last_output=_tail(output, self.config.output_cap_chars),
            progress_key=_progress_key(digest, baseline), files_digest=digest,
        )
        self._state = replace(state, observation=self._observe(state, initial))
        logger.debug("reset %s: %d failing at baseline", task.task_id, baseline.n_failed)
        return self._state.observation

    def step(self, action: str) -> StepResult:
        """Take one action (text or JSON form); an invalid action is a step with an error observation.

        Raises:
            EnvError: no episode is running, or it already ended.
        """
        state = self._running()
        started, spent = time.monotonic(), state.elapsed_s
        if spent >= self.config.episode_wall_s:
            effect = _Effect("The episode's wall-clock budget is spent; nothing was run.",
                             _info("none", error="wall budget spent"))
        else:
            effect = self._dispatch(state, action, self.config.episode_wall_s - spent)
        # Nothing wrote to the working copy since the action's test run read it back (if it ran one).
        files = effect.files if effect.files is not None else read_tree(self._repo)
        latest = effect.tests or state.latest
        digest = _digest(files)
        key = _progress_key(digest, latest)
        step = state.step + 1
        passed = effect.tests is not None and effect.tests.passed and effect.info.get("patch_applied", False)
        terminated = effect.stop or (self.config.stop_on_pass and passed)
        elapsed = spent + time.monotonic() - started
        out_of_time = elapsed >= self.config.episode_wall_s
        truncated = not terminated and (step >= self.config.max_steps or out_of_time)
        info = dict(effect.info, step_penalty=self.config.step_penalty, tests_run=effect.tests is not None,
                    tests_passed=len(latest.passing) if latest else 0,
                    tests_failed=latest.n_failed if latest else 0,
                    all_tests_passed=bool(latest and latest.passed))
        if terminated or truncated:
            info["stop_reason"] = ("student_stop" if effect.stop else "tests_passed") if terminated else (
                "max_steps" if step >= self.config.max_steps else "wall_budget")
        if effect.info.get("invalid_action"):
            logger.debug("invalid action at step %d: %s", step, effect.info.get("error"))
        state = replace(
            state, step=step, last_action=action, last_output=effect.output,
            tried=state.tried | {action}, latest=latest,
            latest_label=state.latest_label if effect.tests is None else (
                f"at reset; restored at step {step}" if effect.info["action_kind"] == "revert" else f"after step {step}"),
            files_read=state.files_read | set(effect.info.get("files_read", ())),
            progress_key=key, no_progress_steps=state.no_progress_steps + (key == state.progress_key),
            last_patch_failed=bool(effect.info.get("patch_applied")) and not passed,
            files_digest=digest,
            patched=state.patched | {(state.files_digest, action)} if effect.info.get("patch_applied") else state.patched,
            attempts=state.attempts + attempts_of(effect.info["edited_lines"], state.baseline, effect.tests)
            if effect.info.get("edited_lines") and effect.tests is not None else state.attempts,
            terminated=terminated, truncated=truncated, elapsed_s=elapsed,
        )
        self._state = replace(state, observation=self._observe(state, files))
        return StepResult(observation=self._state.observation, reward=0.0, terminated=terminated,
                          truncated=truncated, info=info)

    def snapshot(self) -> ShellSnapshot:
        """The current episode state and file contents (immutable, cheap: small repos, shared bytes)."""
        state = self._started()
        return ShellSnapshot(state=state, files=read_tree(self._repo))

    def restore(self, state: ShellSnapshot) -> None:
        """Return to a snapshot (of this or another instance): files, step state and observation.

        Raises:
            EnvError: ``state`` is not a :class:`ShellSnapshot`.
        """
        if not isinstance(state, ShellSnapshot):
            raise EnvError(f"restore needs a ShellSnapshot from snapshot(), got {type(state).__name__}")
        if self._workdir is None:
            self._new_workdir()
        write_tree(self._repo, state.files)
        self._state = state.state

    def verify(self) -> Verification:
        """Run the test command and report the outcome with evidence (see the module docstring).

        The verifier always runs the suite afresh (never recalled from the run memo), so a suite whose
        result varies from run to run is judged by a run of its own.
        """
        state = self._started()
        edited = read_tree(self._repo)
        judged = with_restored(edited, state.initial, judge_file)
        if judged != edited:  # the student's changes to the tests and their set-up do not reach the verdict
            write_tree(self._repo, judged)
        try:
            run, _, _, _ = self._run_tests(state.spec, fresh=True)
        except SandboxError as exc:  # the sandbox is a process boundary: record the failure, do not crash
            logger.warning("verify of %s blocked: %s", state.spec.task_id, exc)
            return Verification(completed=False, outcome="blocked", evidence={"error": str(exc)[:500]})
        evidence = _evidence(state, run, edited)
        if run.timed_out and (state.baseline.timed_out or not state.step):
            # The suite could not run even before the student acted: nothing to judge the student by.
            return Verification(completed=False, outcome="blocked", evidence=evidence)
        if run.timed_out:
            # The baseline ran in time, so the student's edits made the suite hang: that is a failure, never
            # the neutral "blocked" (which would make an infinite loop pay better than a wrong fix).
            return Verification(completed=True, outcome="failure", evidence=evidence)
        if run.passed and not evidence["target_unresolved"] and not evidence["new_failures"]:
            outcome = "success"
        elif evidence["target_unresolved"] < evidence["target_total"]:
            outcome = "partial"
        else:
            outcome = "failure"
        return Verification(completed=True, outcome=outcome, evidence=evidence)

    def close(self) -> None:
        """Remove the working copy. Safe to call twice."""
        self._cleanup()
        self._workdir = None
        self._state = None

    # ------------------------------------------------------------------ actions

    def _dispatch(self, state: EpisodeState, text: str, budget_s: float) -> _Effect:
        parsed = act.parse_action(text)
        if isinstance(parsed, act.Invalid):
            return _invalid(parsed.kind, parsed.reason)
        if isinstance(parsed, act.Read):
            return self._read(parsed.path)
        if isinstance(parsed, act.Run):
            return self._run(state, parsed.argv, budget_s)
        if isinstance(parsed, act.Patch):
            return self._patch(state, parsed, budget_s)
        if isinstance(parsed, act.Revert):
            return self._revert(state)
        said = f"Stopped: {parsed.message}" if parsed.message else "Stopped."
        return _Effect(said, _info("stop"), stop=True)

    def _read(self, path: str) -> _Effect:
        target = self._inside(path)
        if target is None:
            return _invalid("read", f"path {path!r} leaves the repository")
        if not target.is_file():
            return _Effect(f"read failed: no file {path!r}", _info("read", error="no such file"))
        text = target.read_bytes().decode("utf-8", errors="replace")
        cap = self.config.read_cap_chars
        shown = text if len(text) <= cap else text[:cap] + (
            f"\n[... {len(text) - cap} more characters; use `run sed -n '<from>,<to>p' {path}`]")
        header = f"{path} ({len(text.splitlines())} lines):\n"
        return _Effect(header + shown, {**_info("read"), "files_read": [path]})

    def _run(self, state: EpisodeState, argv: tuple[str, ...], budget_s: float) -> _Effect:
        spec = state.spec
        problem = act.check_command(argv, spec.test_command, self._is_file)
        if problem:
            return _invalid("run", problem)
        if list(argv) == list(spec.test_command):
            run, output, _, files = self._run_tests(spec, budget_s)
            return _Effect(_tail(output, self.config.output_cap_chars), _info("run"), tests=run, files=files)
        timeout = min(spec.timeout_s, max(budget_s, 1.0))
        result, _ = self._sandbox_run(list(argv), timeout)
        output = display_output(result.stdout + result.stderr)
        ending = f"timed out after {timeout:g}s" if result.timed_out else f"exit code {result.returncode}"
        output += f"\n[{ending}]"
        read = [p for p in act.file_arguments(argv) if self._is_file(p)]
        info = {**_info("run", error="command timed out" if result.timed_out else ""), "files_read": read}
        return _Effect(_tail(output, self.config.output_cap_chars), info)

    def _patch(self, state: EpisodeState, patch: act.Patch, budget_s: float) -> _Effect:
        try:
            if patch.diff is not None:
                changed = apply_unified_diff(self._repo, patch.diff)
            else:
                assert patch.edit is not None  # the parser builds one of the two
                changed = [self._search_replace(patch.edit)]
        except (EnvError, UnicodeDecodeError, OSError) as exc:
            reason = _scrub(str(exc), self._repo)
            return _Effect(f"patch failed: {reason}", _info("patch", error=reason))
        run, output, _, files = self._run_tests(state.spec, budget_s)
        text = f"Patch applied to {', '.join(changed)}. Tests re-run:\n" + output
        info = {**_info("patch"), "patch_applied": True, "files_changed": changed,
                "edited_lines": edited_lines(patch.diff) if patch.diff is not None else []}
        return _Effect(_tail(text, self.config.output_cap_chars), info, tests=run, files=files)

    def _revert(self, state: EpisodeState) -> _Effect:
        """Restore the working copy to its state at reset; the tests are not re-run (their results at reset
        stand), so a revert costs a step but no test time."""
        write_tree(self._repo, state.initial)
        text = "Working copy restored to its state at reset. Test results are those of the run at reset:\n"
        return _Effect(_tail(text + summary_text(state.baseline, max_ids=self.config.max_failing_ids_shown),
                             self.config.output_cap_chars), _info("revert"), tests=state.baseline)

    def _line_spectrum(
        self, spec: TaskSpec, baseline: SuiteRun, files: FileTree
    ) -> tuple[LineSpectrum | None, FileTree]:
        """One traced run of the suite at reset (see :mod:`~aios_rl.envs.shell.spectrum`), or None; with the
        working copy after it (``files``, the working copy now, when nothing ran)."""
        argv = spectrum_argv(spec.test_command) if self.config.line_spectrum and baseline.n_failed else None
        if argv is None:
            return None, files
        timeout = self.config.spectrum_timeout_factor * spec.timeout_s
        key = tree_key("spectrum", argv, self._box().config, files)
        memo = shared_memo(self.config.run_memo)
        known = memo.get(key, timeout)
        if known is not None:
            return known[0], files
        # taken (and removed) before the size check: the spectrum is the environment's file, not the suite's
        result, text = self._sandbox_run(argv, timeout, take=SPECTRUM_FILE)
        try:
            spectrum = None if result.timed_out or text is None else parse_spectrum(text)
        except EnvError as exc:
            logger.debug("no line spectrum for %s: %s", spec.task_id, exc)
            spectrum = None
        after = read_tree(self._repo)
        if not result.timed_out and after == files:  # a run that wrote files is not repeated by a recall
            memo.put(key, (spectrum,), result.duration_s)
        return spectrum, after

    def _search_replace(self, edit: Any) -> str:
        target = self._inside(edit.path)
        if target is None or not target.is_file():
            raise EnvError(f"edit targets unknown file {edit.path!r}")
        try:
            text = target.read_bytes().decode("utf-8")  # bytes: the file's own line endings stay as they are
        except UnicodeDecodeError as exc:
            raise EnvError(f"edit targets {edit.path!r}, which is not UTF-8 text: {exc}") from None
        target.write_bytes(apply_edit(text, edit.search, edit.replace).encode("utf-8"))  # CRLF-aware
        return edit.path

    # ------------------------------------------------------------------ helpers

    def _run_tests(
        self, spec: TaskSpec, budget_s: float | None = None, *, fresh: bool = False
    ) -> tuple[SuiteRun, str, float, FileTree]:
        """Run the test command (or recall the same run on the same files, :mod:`.run_memo`); returns the
        parsed run, the output as the student sees it, the run's wall time in seconds and the working copy
        as the run left it."""
        timeout = spec.timeout_s if budget_s is None else min(spec.timeout_s, max(budget_s, 1.0))
        cap, command = self.config.test_output_cap_bytes, spec.test_command
        result, report, files = self._memo_run(reporting_argv(command), timeout, fresh=fresh, cap=cap,
                                               report_of=command)
        raw = result.stdout + result.stderr
        if is_pytest(spec.test_command):  # from its report, else (no report) from its text
            run = judged_run(report, raw, result.returncode, timed_out=result.timed_out)
        else:
            run = exit_code_run(spec.test_command, result.returncode, timed_out=result.timed_out)
        output = display_output(raw)
        if result.timed_out:
            output += f"\n[the test run timed out after {timeout:g}s]"
        return run, output, result.duration_s, files

    def _memo_run(
        self, argv: list[str], timeout_s: float, *, fresh: bool = False, cap: int | None = None,
        report_of: tuple[str, ...] = (),
    ) -> tuple[Any, RunReport | None, FileTree]:
        """A sandboxed run (``cap``: its output cap, else the sandbox's), recalled when the same command
        already ran on the same files in this process (unless ``fresh``); stored only when it finished in
        time and left the files as they were. ``report_of``: the test command ``argv`` is the
        :func:`reporting_argv` of; when it has a :func:`reporter_argv` form, that runs instead and its report
        is part of the result (None when it wrote none, or a malformed one). Returns the run, the report and
        the working copy after it (read back when it ran: a command may write files)."""
        before = read_tree(self._repo)
        reported = reporter_argv(report_of, "")  # the command run, but for the report's name; or None
        # the settings of the sandbox that runs it (one given to __init__ may differ from config.sandbox)
        box = self._box().config
        key = tree_key("run", tuple(argv), reported, box, self.config.max_copy_bytes, cap, before)
        memo = shared_memo(self.config.run_memo)
        known = None if fresh else memo.get(key, timeout_s)
        if known is not None:
            return *known, before
        name = new_report_name()
        command = reporter_argv(report_of, name)
        take = name if command is not None else None
        result, text = self._sandbox_run(command or argv, timeout_s, before, cap, take=take)
        report = read_report(text)
        after = read_tree(self._repo)
        small = len(result.stdout) + len(result.stderr) + len(text or "") <= MAX_OUTPUT_BYTES  # chars ~ bytes
        if not result.timed_out and after == before and small:
            memo.put(key, (result, report), result.duration_s)
        return result, report, after

    def _sandbox_run(
        self, argv: list[str], timeout_s: float, before: FileTree | None = None, cap: int | None = None,
        *, take: str | None = None,
    ) -> tuple[Any, str | None]:
        """Run ``argv`` in the sandbox on the working copy; returns the result and, with ``take`` (a file name
        in the copy's root the command writes for the host), that file's text, removed from the copy first
        (None when there is no such regular file). A command that leaves the copy bigger than
        ``max_copy_bytes`` has its file changes undone (``before``: the copy as it was, read if not given),
        and its output says so: the copy is read into memory after every command."""
        before = read_tree(self._repo) if before is None else before
        start_size = tree_bytes(self._repo)
        result = self._box().run(argv, self._repo, timeout_s=timeout_s, output_cap_bytes=cap)
        taken = take_file(self._repo / take) if take is not None else None
        size = tree_bytes(self._repo)
        if size > self.config.max_copy_bytes and size > start_size:  # this command grew it past the cap
            write_tree(self._repo, before)
            note = (f"\n[the command left {size // 2**20} MiB in the working copy, more than "
                    f"{self.config.max_copy_bytes // 2**20} MiB; its file changes were undone]")
            result = result.model_copy(update={"stderr": result.stderr + note})
        return result, taken

    def _box(self) -> Sandbox:
        """The sandbox commands run in: the one given, else one built from ``config.sandbox`` on first use."""
        if self._sandbox is None:
            self._sandbox = Sandbox(self.config.sandbox)
        return self._sandbox

    def _observe(self, state: EpisodeState, files: FileTree) -> Observation:
        sources = python_sources(files)
        key = tree_key(sorted(sources.items()), state.latest)
        if key not in self._pools:
            if len(self._pools) >= _POOL_CACHE_SIZE:
                self._pools.pop(next(iter(self._pools)))
            self._pools[key] = patch_pool(sources, state.latest, self.config.small_repo_functions)
        history = History(step=state.step, max_steps=self.config.max_steps, files_read=state.files_read,
                          tried=state.tried, modified=files != state.initial,
                          last_patch_failed=state.last_patch_failed, attempts=state.attempts)
        # A patch already applied to this very working copy is not offered again: its test result is known.
        done = {text for digest, text in state.patched if digest == state.files_digest}
        pool = [c for c in self._pools[key] if c.text not in done] if done else self._pools[key]
        texts, features = assemble(pool, sources, state.latest, state.spec.test_command, history,
                                   self.config.max_candidates, state.spectrum)
        return Observation(text=self._render(state), candidates=texts, candidate_features=features,
                           features=_observation_features(state, self.config.max_steps),
                           state_key=state.progress_key)

    def _render(self, state: EpisodeState) -> str:
        last = state.last_action.strip().split("\n")
        action = last[0][:200] + (f" (+{len(last) - 1} more lines)" if len(last) > 1 else "")
        summary = summary_text(state.latest, max_ids=self.config.max_failing_ids_shown)
        return "\n".join([
            state.spec.prompt.strip(), "",
            f"Step {state.step} of {self.config.max_steps}.",
            f"Last action: {action}" if state.step else "Last action: none (the tests ran once at reset).",
            "Output:", state.last_output, "",
            f"{summary} [{state.latest_label}]",
        ])  # fmt: skip

    def _inside(self, path: str) -> Path | None:
        return inside(self._repo, path)

    def _is_file(self, path: str) -> bool:
        target = inside(self._repo, path)
        return target is not None and target.is_file()

    def _new_workdir(self) -> None:
        self._cleanup()
        self._workdir = new_workdir(self.config.work_root)
        # Removed on close(), or when the env is garbage-collected without one (no temp dirs left behind).
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._workdir, True)

    @property
    def _repo(self) -> Path:
        if self._workdir is None:
            raise EnvError("the shell environment has no working copy; call reset(task, seed=...) first")
        return self._workdir / REPO

    def _started(self) -> EpisodeState:
        if self._state is None or self._workdir is None:
            raise EnvError("no episode is running; call reset(task, seed=...) first")
        return self._state

    def _running(self) -> EpisodeState:
        state = self._started()
        if state.terminated or state.truncated:
            raise EnvError(f"the episode ended at step {state.step}; reset or restore a snapshot to go on")
        return state


def read_spec(task: Task) -> TaskSpec:
    """The environment's view of a shell task, checked.

    Raises:
        EnvError: naming every problem with ``task.environment`` and ``task.spec``.
    """
    spec = task.spec
    problems = []
    if task.environment != "shell":
        problems.append(f"environment is {task.environment!r}, expected 'shell'")
    command = spec.get("test_command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) and a for a in command):
        problems.append(f"spec.test_command must be a non-empty list of strings, got {command!r}")
    timeout = spec.get("timeout_s", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        problems.append(f"spec.timeout_s must be a number > 0, got {timeout!r}")
    targets = spec.get("target_tests") or []
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        problems.append(f"spec.target_tests must be a list of test ids, got {targets!r}")
    task_dir = Path(str(spec.get("task_dir", "")))
    if not spec.get("task_dir") or not (task_dir / REPO).is_dir():
        problems.append(f"spec.task_dir must be a task directory with {REPO}/, got {spec.get('task_dir')!r}")
    if problems:
        raise EnvError(f"task {task.task_id} cannot run in {ENV_ID}: " + "; ".join(problems))
    return TaskSpec(task.task_id, task.prompt, task_dir, tuple(command), float(timeout), tuple(targets))


def _invalid(kind: str, reason: str) -> _Effect:
    return _Effect(f"Invalid action: {reason}", _info(kind, error=reason, invalid=True))


def _info(kind: str, *, error: str = "", invalid: bool = False) -> dict[str, Any]:
    return {"action_kind": kind, "invalid_action": invalid, "error": error, "patch_applied": False,
            "files_changed": []}


def _tail(text: str, cap: int) -> str:
    """The last ``cap`` characters of ``text``, marked when cut (the most recent output matters most)."""
    return text if len(text) <= cap else f"[... {len(text) - cap} earlier characters cut]\n" + text[-cap:]


def _scrub(message: str, repo: Path) -> str:
    # Host paths of the working copy differ per episode; keep them out of observations.
    for root in {str(repo.resolve()), str(repo)}:
        message = message.replace(root + os.sep, "").replace(root, ".")
    return message


def _digest(files: FileTree) -> str:
    return tree_key(files)


def _progress_key(files_digest: str, run: SuiteRun | None) -> str:
    ids = (run.passing, run.failing, run.returncode, run.timed_out) if run else None
    return tree_key(files_digest, ids)


def _observation_features(state: EpisodeState, max_steps: int) -> dict[str, float]:
    run = state.latest
    return {
        "step": float(state.step),
        "step_fraction": state.step / max_steps,
        "tests_failed": float(run.n_failed if run else 0),
        "tests_passed": float(len(run.passing) if run else 0),
        "baseline_failed": float(state.baseline.n_failed),
    }


def _evidence(state: EpisodeState, run: SuiteRun, files: FileTree) -> dict[str, Any]:
    passing = set(run.passing)
    changed = changed_paths(state.initial, files)
    unrelated = [p for p in changed if is_test_file(p) or not p.endswith(".py")]
    return {
        "tests_passed": len(run.passing),
        "tests_failed": run.n_failed,
        "target_total": len(state.targets),
        "target_unresolved": sum(t not in passing for t in state.targets),
        "new_failures": sum(t not in passing for t in state.baseline.passing),
        "files_modified": len(changed),
        "unrelated_files_modified": len(unrelated),
        "no_progress_steps": state.no_progress_steps,
        "steps": state.step,
        "returncode": run.returncode,
        "timed_out": run.timed_out,
        "complete": run.complete,
    }

"""The oracle teacher for shell tasks: critique and shaping from the task's reference patch.

:class:`ShellOracle` implements the :class:`~aios_rl.contracts.protocols.Teacher` protocol with backend
``"oracle"``. Its reference action is the task's reference patch in candidate form
(:func:`reference_action`): the patch is applied to the buggy files in memory and re-diffed with
:func:`~aios_rl.envs.shell.mutate.unified_diff`, so it equals the environment's patch candidate for the
same edit character for character, whatever diff tool wrote the manifest. When the episode applied a
patch, ``revert`` comes first: from a modified working copy the fix (a diff against the buggy files) is
reached by reverting, and a consumer taking the first admissible candidate then gets the right target at
every state before the fix, since ``revert`` is offered only while the copy is modified. The signal also
carries those targets per visited state (``step_reference_actions``, what ``algos.distill`` uses): the
same list, except ``stop`` at a state whose replayed files already hold the reference fix (reached when
the environment's ``stop_on_pass`` is off), where ``revert`` would undo the fix; and ``stop`` as well at a
state whose latest tests all passed (the environment's ``info["all_tests_passed"]``, what the observation
shows) with the tests and pytest's set-up as at reset (:func:`~aios_rl.envs.shell.candidates.judge_file`,
what the verifier restores), so a different fix that passes every test is not reverted either.

Shaping, in [-1, 1]: ``+1`` when the episode's final files hold the reference fix; otherwise ``+0.3`` for
reading a file the fix changes and ``+0.3`` for patching a function it changes; ``-0.5`` when the
verification found new failures. The episode's files are replayed from its applied ``patch`` actions
(steps whose ``info["patch_applied"]`` is true) and its ``revert`` steps (back to the task's files) on the
task's repository; changes made by running scripts are not seen.

A task without a reference patch still gets ``status="complete"``: no reference actions, and shaping
from the verification evidence only (fraction of target tests resolved, ``-0.5`` for new failures).
A reference patch that does not apply, or a missing task directory, gives ``status="invalid_response"``
with the reason in ``error``: teachers never raise for their own failures.
"""

from __future__ import annotations

import difflib
import logging
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from aios_rl.contracts.episode import Episode, Task, TeacherSignal, Verification
from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.actions import Patch, Read, Revert, Run, file_arguments, parse_action
from aios_rl.envs.shell.candidates import REVERT_CANDIDATE, STOP_CANDIDATE, function_at_line, judge_file
from aios_rl.envs.shell.mutate import apply_unified_diff, unified_diff
from aios_rl.envs.shell.task import REPO

logger = logging.getLogger(__name__)

BACKEND = "oracle"
FIX_SHAPING, READ_SHAPING, TOUCH_SHAPING, NEW_FAILURE_SHAPING = 1.0, 0.3, 0.3, -0.5


@dataclass(frozen=True)
class ReferenceFix:
    """The reference patch applied to the task's repository, in memory.

    Attributes:
        action: the ``patch\\n<diff>`` action text, as the environment's candidates spell it.
        before: the buggy text of each file the fix changes.
        after: the fixed text of each file it changes.
        functions: qualnames of the functions the fix changes, per file.
    """

    action: str
    before: dict[str, str]
    after: dict[str, str]
    functions: dict[str, frozenset[str]]


def reference_fix(task: Task) -> ReferenceFix | None:
    """The task's reference fix, or None when the task has no reference patch.

    Raises:
        EnvError: the task directory is missing or the reference patch does not apply to its repo.
    """
    patch = (task.oracle or {}).get("reference_patch")
    if not patch:
        return None
    return _fix_of(_task_files(task), str(patch))


def _fix_of(files: dict[str, str], patch: str) -> ReferenceFix:
    fixed = apply_unified_diff(files, patch)
    changed = sorted(p for p in files.keys() | fixed.keys() if files.get(p) != fixed.get(p))
    before = {p: files.get(p, "") for p in changed}
    after = {p: fixed.get(p, "") for p in changed}
    action = "patch\n" + "".join(unified_diff(before[p], after[p], p) for p in changed)
    functions = {p: frozenset(_changed_functions(before[p], after[p])) for p in changed}
    return ReferenceFix(action=action, before=before, after=after, functions=functions)


def reference_action(task: Task) -> str | None:
    """The reference fix as a candidate-form action (``patch\\n<diff>``), or None without a reference."""
    fix = reference_fix(task)
    return fix.action if fix else None


class ShellOracle:
    """Oracle teacher for ``shell`` tasks (see the module docstring for the shaping rules)."""

    backend = BACKEND

    def signal(self, task: Task, episode: Episode) -> TeacherSignal:
        """Critique ``episode`` of ``task`` against the reference fix. Never raises for its own failures."""
        start = time.monotonic()
        try:
            patch = (task.oracle or {}).get("reference_patch")
            if patch:
                files = _task_files(task)
                return self._with_reference(_fix_of(files, str(patch)), files, episode, start)
        except (EnvError, OSError) as exc:
            logger.warning("oracle cannot use the reference of task %s: %s", task.task_id, exc)
            return TeacherSignal(status="invalid_response", backend=BACKEND, error=str(exc)[:500],
                                 latency_s=time.monotonic() - start)
        shaping, said = _evidence_shaping(episode.verification)
        critique = f"No reference fix for this task; {said}"
        return TeacherSignal(status="complete", backend=BACKEND, critique=critique, shaping=shaping,
                             confidence=1.0, latency_s=time.monotonic() - start)

    def _with_reference(
        self, fix: ReferenceFix, files: dict[str, str], episode: Episode, start: float
    ) -> TeacherSignal:
        read: set[str] = set()
        touched: set[tuple[str, str]] = set()
        patches = 0
        initial = files
        done_at: list[bool] = []  # per visited state: its files hold the reference fix, or pass every test
        passing = False  # the latest test results, as the state's observation shows them, all passed
        for step in episode.trajectory:
            done_at.append(_holds(files, fix) or (passing and not _judge_files_changed(initial, files)))
            action = parse_action(step.action)
            if isinstance(action, Read):
                read.add(_norm(action.path))
            elif isinstance(action, Run):
                read.update(_norm(p) for p in file_arguments(action.argv))
            elif isinstance(action, Patch) and step.info.get("patch_applied"):
                patches += 1
                files, changes = _replay(files, action)
                touched |= changes
            elif isinstance(action, Revert) and step.info.get("action_kind") == "revert":
                files = initial  # the environment put the working copy back as it was at reset
            passing = step.info.get("all_tests_passed") is True
        fixed = _holds(files, fix)
        read_right = bool(read & fix.after.keys())
        touched_right = any(q in fix.functions.get(p, ()) for p, q in touched)
        new_failures = _count(episode.verification, "new_failures")
        shaping = FIX_SHAPING if fixed else READ_SHAPING * read_right + TOUCH_SHAPING * touched_right
        shaping = max(-1.0, min(1.0, shaping + (NEW_FAILURE_SHAPING if new_failures else 0.0)))
        where = "; ".join(f"{p} ({', '.join(sorted(fix.functions[p]))})" for p in sorted(fix.after))
        did = ", ".join(sorted(f"{p}:{q}" for p, q in touched)) or "nothing"
        critique = (
            f"The reference fix changes {where}. The episode took {len(episode.trajectory)} steps, read "
            f"{', '.join(sorted(read)) or 'no file'}, applied {patches} patch(es) touching {did}; "
            + ("its final files " + ("hold" if fixed else "do not hold") + " the reference fix")
            + (f"; {new_failures} test(s) that passed at reset fail now." if new_failures else ".")
        )
        references = [REVERT_CANDIDATE, fix.action] if patches else [fix.action]
        return TeacherSignal(
            status="complete", backend=BACKEND, critique=critique, reference_actions=references,
            step_reference_actions=[[STOP_CANDIDATE] if done else references for done in done_at],
            shaping=shaping, confidence=1.0, boundary=False, latency_s=time.monotonic() - start,
        )


def _holds(files: dict[str, str], fix: ReferenceFix) -> bool:
    return all(files.get(p) == text for p, text in fix.after.items())


def _judge_files_changed(initial: dict[str, str], files: dict[str, str]) -> bool:
    """Whether ``files`` differ from ``initial`` in a file the verifier restores before judging."""
    return any(judge_file(p) for p in initial.keys() | files.keys() if initial.get(p) != files.get(p))


def _replay(files: dict[str, str], patch: Patch) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """Apply one patch in memory; the (file, function) pairs it changed. A patch that fails is skipped."""
    try:
        after = apply_unified_diff(files, patch.diff) if patch.diff is not None else patch.edit.apply(files)
    except EnvError:
        return files, set()
    touched = set()
    for path in after.keys() | files.keys():
        if files.get(path) != after.get(path):
            touched |= {(path, q) for q in _changed_functions(files.get(path, ""), after.get(path, ""))}
    return after, touched


def _changed_functions(before: str, after: str) -> set[str]:
    """Qualnames of the functions of ``before`` whose lines differ in ``after`` (``<module>`` elsewhere)."""
    old, new = before.split("\n"), after.split("\n")  # "\n" only: the lines the AST numbers
    found = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for line in range(i1 + 1, max(i2, i1 + 1) + 1):
            found.add(function_at_line(before, line) or "<module>")
    return found


def _evidence_shaping(verification: Verification | None) -> tuple[float, str]:
    if verification is None or not verification.completed:
        return 0.0, "the episode has no completed verification, so no shaping."
    total, unresolved = _count(verification, "target_total"), _count(verification, "target_unresolved")
    resolved = (total - unresolved) / total if total else float(verification.outcome == "success")
    new_failures = _count(verification, "new_failures")
    shaping = max(-1.0, min(1.0, resolved + (NEW_FAILURE_SHAPING if new_failures else 0.0)))
    said = f"{resolved:.0%} of target tests resolved, {new_failures} new failure(s)"
    return shaping, f"shaping from the verification: {said}."


def _count(verification: Verification | None, key: str) -> int:
    value = verification.evidence.get(key, 0) if verification is not None else 0
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _task_files(task: Task) -> dict[str, str]:
    """Every UTF-8 text file of the task's repository, by relative POSIX path (read, never written).

    Read as bytes, so "\r\n" endings stay as the environment and the reference patch see them."""
    repo = Path(str(task.spec.get("task_dir", ""))) / REPO
    if not repo.is_dir():
        raise EnvError(f"task repository {repo} does not exist")
    texts: dict[str, str] = {}
    for path in sorted(repo.rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            try:
                texts[path.relative_to(repo).as_posix()] = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                continue  # binary files cannot be patched by text diffs anyway
    return texts


def _norm(path: str) -> str:
    return PurePosixPath(path).as_posix().removeprefix("./")

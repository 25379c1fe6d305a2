"""``aios-rl shell import-tasks``: bring a directory of user task directories into a task set.

Each task is checked exactly as ``check-tasks`` does (:func:`aios_rl.envs.shell.validation.check_task`:
fails as given, passes with its reference patch), then written with :func:`task.write_task`, which builds
the copy beside the destination and renames it, so a rejected or interrupted task never leaves a partial
directory. Invalid tasks are skipped and reported with the reason; valid ones are imported regardless.

Example:
    >>> report = import_tasks(Path("my-bugs"), Path("tasks/shell"))
    >>> report.imported, [(r.task_id, r.reason) for r in report.rejected]
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import Field

from aios_rl.contracts.episode import Record
from aios_rl.contracts.errors import ContractError, EnvError
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import REPO, read_manifest, require_task_dirs, write_task
from aios_rl.envs.shell.validation import TaskCheck, check_tasks, validation_sandbox

logger = logging.getLogger(__name__)


class Rejection(Record):
    """One task that was not imported."""

    task_id: str = Field(description="The manifest's task_id, or the directory name if unreadable.")
    reason: str = Field(description="Why, in one line.")


class ImportReport(Record):
    """What :func:`import_tasks` did; ``imported`` ids are in source-directory order."""

    imported: list[str] = Field(default_factory=list, description="Ids written to the destination.")
    rejected: list[Rejection] = Field(default_factory=list, description="Tasks skipped, with reasons.")


def escaping_symlinks(repo: Path) -> list[str]:
    """Symlinks under ``repo`` that point outside it (copying would pull host files into the task).

    Resolved with ``os.path.realpath``, which leaves a link loop as it stands instead of raising (3.11's
    ``Path.resolve`` raises RuntimeError), so a loop inside the repo is judged by where it lies.
    """
    root = Path(os.path.realpath(repo))
    bad = []
    for dirpath, dirnames, filenames in os.walk(repo):
        for name in sorted([*dirnames, *filenames]):
            path = Path(dirpath) / name
            if path.is_symlink() and not Path(os.path.realpath(path)).is_relative_to(root):
                bad.append(path.relative_to(repo).as_posix())
    return sorted(bad)


def import_tasks(
    src: Path, out: Path, sandbox: Sandbox | None = None, *, workers: int = 2, show_progress: bool = False
) -> ImportReport:
    """Validates every task directory directly under ``src`` and copies the valid ones into ``out``.

    A task is rejected when its check is invalid, its ``repo/`` links outside itself, its id appeared
    earlier in ``src``, or ``out`` already has a task with that id. ``out`` is created if needed and may
    already hold tasks.

    Raises:
        ContractError: ``src`` is not a directory or holds no task directories.
        EnvError: ``out`` lies inside ``src`` (it would be imported into itself), or is not a directory.
        SandboxError: bubblewrap is unusable.
    """
    if out.resolve().is_relative_to(src.resolve()):
        raise EnvError(f"--out {out} lies inside {src}; import into a directory outside the source")
    if out.exists() and not out.is_dir():
        raise EnvError(f"--out {out} exists and is not a directory; import into a new or existing task set")
    task_dirs = require_task_dirs(src)  # after the checks of --out, which say more about a mistyped path
    out.mkdir(parents=True, exist_ok=True)
    sandbox = sandbox or validation_sandbox()
    checks = check_tasks(task_dirs, sandbox, workers=workers, show_progress=show_progress)
    imported: dict[str, str] = {}  # task_id -> source directory name
    rejected: list[Rejection] = []
    for task_dir, check in zip(task_dirs, checks, strict=True):
        reason = _rejection(task_dir, check, imported, out)
        if reason is None:
            reason = _write(task_dir, out)
        if reason is None:
            imported[check.task_id] = task_dir.name
        else:
            rejected.append(Rejection(task_id=check.task_id, reason=reason))
            logger.info("rejected %s: %s", check.task_id, reason)
    return ImportReport(imported=list(imported), rejected=rejected)


def _rejection(task_dir: Path, check: TaskCheck, seen: dict[str, str], out: Path) -> str | None:
    if not check.valid:
        return check.reason
    if check.task_id in seen:
        return f"duplicate task_id: already imported from {seen[check.task_id]}"
    if (out / check.task_id).exists():
        return f"task_id already exists in {out}"
    links = escaping_symlinks(task_dir / REPO)
    if links:
        return f"repo/ has symlinks leading outside it: {', '.join(links[:3])}"
    return None


def _write(task_dir: Path, out: Path) -> str | None:
    """Writes the task atomically; returns a reason instead when the copy fails (nothing is left)."""
    try:
        write_task(out, read_manifest(task_dir), task_dir / REPO)
    except (ContractError, OSError) as exc:
        return f"could not write the task: {exc}"
    return None

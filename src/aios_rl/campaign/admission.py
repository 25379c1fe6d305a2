"""Which episodes an online campaign may train on (ARCHITECTURE §2, §5; reference §9.1 step 3).

An episode is *admitted* into the micro-batch under collection (or, after an update, into the monitored
episodes) only when every check below passes; otherwise it is stored all the same, with
``admission_status="rejected"`` and the first failing check as ``admission_reason``, and it still uses up
its task slot:

1. verification completed (the tests ran to a verdict; a blocked run proves nothing);
2. the trajectory is valid: it has steps, it ended (terminated or truncated), and at least one action
   was admissible (an episode of invalid actions only carries no trainable step);
3. sandbox isolation held: the task's source repository is byte for byte what it was before the episode
   (every command runs on a copy; a changed source means something escaped the sandbox);
4. when a teacher is required, it answered (``complete`` or ``fallback_complete``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aios_rl.contracts.episode import AdmissionStatus, Episode, Task

ANSWERED = ("complete", "fallback_complete")
_SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


def source_fingerprint(task: Task) -> str:
    """sha256 over the paths and bytes of the task's repository (caches skipped); '' when it has none."""
    root = Path(str(task.spec.get("task_dir", ""))) / "repo"
    if not root.is_dir():
        return ""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or _SKIPPED_DIRS.intersection(path.relative_to(root).parts):
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def admission(
    episode: Episode, *, isolation_held: bool, require_teacher: bool
) -> tuple[AdmissionStatus, str]:
    """``("admitted", "")`` or ``("rejected", why)`` for one finished episode (checks in module order)."""
    verification = episode.verification
    if verification is None or not verification.completed:
        error = (verification.evidence.get("error", "") if verification is not None else "") or "no verdict"
        return "rejected", f"verification did not complete: {str(error)[:200]}"
    steps = episode.trajectory
    if not steps:
        return "rejected", "invalid trajectory: no steps"
    if not (steps[-1].terminated or steps[-1].truncated):
        return "rejected", "invalid trajectory: it did not end"
    if all(step.info.get("invalid_action") for step in steps):
        return "rejected", "invalid trajectory: every action was invalid"
    if not isolation_held:
        return "rejected", "sandbox isolation: the task's source repository changed during the episode"
    if require_teacher:
        signal = episode.teacher_signal
        if signal is None or signal.status not in ANSWERED:
            status = "no teacher signal" if signal is None else f"teacher status {signal.status}"
            return "rejected", f"teacher required but did not answer ({status})"
    return "admitted", ""


def with_admission(episode: Episode, status: AdmissionStatus, reason: str) -> Episode:
    return episode.model_copy(update={"admission_status": status, "admission_reason": reason})

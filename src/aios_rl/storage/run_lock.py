"""The single-writer lock of a run directory.

A run has one writing process at a time: it holds an exclusive ``flock`` on ``RUN/writer.lock`` for as long
as its control plane is open. A second writer is refused at once with :class:`RunLockedError` instead of
committing beside it or sweeping away the checkpoint save it has in flight. Readers (status, lineage show,
eval) take no lock. The kernel drops the lock when the file is closed or the process dies (SIGKILL too), so
a crashed writer never leaves a stale lock. Two opens in one process conflict as well: ``flock`` locks
belong to the open file, not to the process.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from aios_rl.contracts.errors import RunLockedError, StorageError

__all__ = ["LOCK_FILE", "WriterLock"]

LOCK_FILE = "writer.lock"


class WriterLock:
    """The held writer lock of ``run_dir`` (created with the directory when missing); :meth:`release` it.

    Raises:
        RunLockedError: another open writer holds the run (the message names its pid when it recorded one).
        StorageError: the directory or the lock file cannot be created.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot create the writer lock {self.path}: {exc}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _recorded_pid(self._fd)
            self.release()
            raise RunLockedError(_locked_message(self.path.parent, holder)) from None
        except OSError as exc:
            self.release()
            raise StorageError(f"cannot lock {self.path}: {exc}") from None
        # Recorded for the message a refused writer shows; the lock itself is the flock, not this content
        # (a full disk that refuses these bytes leaves the lock held and the message saying "pid unknown").
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _locked_message(run: Path, holder: int | None) -> str:
    who = f"pid {holder}" if holder else "pid unknown"
    if holder == os.getpid():
        who += ", this process: close the writer it already holds first"
    return (
        f"{run} is being written by another process ({who}); wait for it to finish or stop it, then run the "
        f"command again (read-only commands such as `aios-rl status --run {run}` work meanwhile)"
    )


def _recorded_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None

"""Files written whole or not at all: a temp file in the same directory, fsynced, renamed over the name.

A reader (or a process started after a crash) sees the previous file or the new one, never a part of it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` via a temp file in its directory: ``write(tmp)``, fsync, rename, fsync the directory.
    A ``write`` that raises leaves ``path`` as it was and no temp file."""
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(6)}")
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # flushes the pages written by `write`, whatever descriptor wrote them
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    """:func:`write_atomic` for a UTF-8 text."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def fsync_dir(directory: Path) -> None:
    """Make a rename or creation in ``directory`` durable (only once its directory entry is on disk)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

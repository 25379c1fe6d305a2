"""The working copy of a shell episode as an immutable file tree: what snapshots hold and restore writes.

A :data:`FileTree` is a sorted tuple of ``(relative path, FileEntry)``, so it can be shared between
snapshots without copying, compared for equality (no-progress detection, files modified) and pickled
(to restore a snapshot in another worker). Caches (``__pycache__``, ``.pytest_cache``, ``*.pyc``...)
and ``.git`` are not part of the tree. Symlinks are recorded as links and never followed, so a link the
student planted inside the sandbox cannot make the host read or write outside the copy.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from aios_rl.envs.shell.actions import check_relpath

SKIPPED_NAMES = frozenset({".git", "__pycache__", ".pytest_cache", ".hypothesis"})


@dataclass(frozen=True)
class FileEntry:
    """One path of a working copy: a file (bytes and mode), a symlink (target) or a directory (mode)."""

    kind: str  # "file" | "link" | "dir"
    data: bytes = b""
    mode: int = 0o644


FileTree = tuple[tuple[str, FileEntry], ...]


def read_tree(root: Path) -> FileTree:
    """Every file, link and directory under ``root`` (caches skipped), without following links."""
    entries: list[tuple[str, FileEntry]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_NAMES)
        base = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = base / name
            rel = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                entries.append((rel, FileEntry("link", os.readlink(path).encode())))
                if name in dirnames:
                    dirnames.remove(name)
            elif stat.S_ISDIR(info.st_mode):
                entries.append((rel, FileEntry("dir", mode=stat.S_IMODE(info.st_mode))))
            elif stat.S_ISREG(info.st_mode) and not name.endswith(".pyc"):
                entries.append((rel, FileEntry("file", path.read_bytes(), stat.S_IMODE(info.st_mode))))
    return tuple(sorted(entries))


def tree_bytes(root: Path) -> int:
    """The bytes of every regular file under ``root`` (caches included, links not followed), from ``lstat``
    alone: cheap to ask before reading a working copy that a command may have filled."""
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            try:
                info = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def write_tree(root: Path, tree: FileTree) -> None:
    """Make ``root`` hold exactly ``tree``: remove everything else, then write every entry."""
    if root.exists():
        for child in list(root.iterdir()):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    root.mkdir(parents=True, exist_ok=True)
    dirs = []
    for rel, entry in tree:  # sorted, so a directory comes before what it holds
        path = root / rel
        if entry.kind == "dir":
            path.mkdir(exist_ok=True)
            dirs.append((path, entry.mode))
        elif entry.kind == "link":
            os.symlink(entry.data.decode(), path)
        else:
            path.write_bytes(entry.data)
            path.chmod(entry.mode)
    for path, mode in reversed(dirs):  # last, so a read-only directory was still writable while filled
        path.chmod(mode)


def changed_paths(before: FileTree, after: FileTree) -> list[str]:
    """Files and links added, removed or changed between two trees (directories ignored), sorted."""
    old = {p: e for p, e in before if e.kind != "dir"}
    new = {p: e for p, e in after if e.kind != "dir"}
    return sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))


def python_sources(tree: FileTree) -> dict[str, str]:
    """The ``.py`` files of a tree as text (undecodable bytes replaced)."""
    return {
        p: e.data.decode("utf-8", errors="replace") for p, e in tree if e.kind == "file" and p.endswith(".py")
    }


def inside(repo: Path, path: str) -> Path | None:
    """The host path of a repository-relative path, or None when it (or a link on the way) leaves ``repo``."""
    if check_relpath(path):
        return None
    target = (repo / path).resolve()
    return target if target.is_relative_to(repo.resolve()) else None


def take_file(path: Path) -> str | None:
    """The text of the regular file ``path``, which is then removed; None when there is none. Links are
    never followed (the file comes from inside the sandbox) and a name that is something else is left."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            data = fh.read()
        path.unlink()
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


WORKDIR_PREFIX = "aios-rl-shell-"
STALE_AFTER_S = 300.0
_swept_roots: set[Path] = set()


def new_workdir(work_root: str | None) -> Path:
    """A fresh private directory for one episode's working copy (under ``work_root`` or the temp dir).

    Its name carries the owning process id. A process killed with SIGKILL cannot remove its working
    copies; the first call in each process sweeps those left under the same root by dead processes
    (:func:`sweep_stale_workdirs`).
    """
    root = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    if root not in _swept_roots:
        _swept_roots.add(root)
        sweep_stale_workdirs(root)
    return Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-", dir=root))


def sweep_stale_workdirs(root: Path, min_age_s: float = STALE_AFTER_S) -> int:
    """Remove working copies under ``root`` whose owning process is gone and that are older than
    ``min_age_s`` (the age guards against a process of another PID namespace sharing the directory).
    Returns how many were removed."""
    removed = 0
    now = time.time()
    for entry in root.glob(f"{WORKDIR_PREFIX}*-*"):
        pid = entry.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        try:
            old = now - entry.lstat().st_mtime >= min_age_s
        except OSError:
            continue
        if pid.isdigit() and old and entry.is_dir() and not entry.is_symlink() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            removed += not entry.exists()
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def with_restored(tree: FileTree, initial: FileTree, protected: Callable[[str], bool]) -> FileTree:
    """``tree`` with every ``protected`` path exactly as in ``initial``: edited ones restored, added ones
    removed, deleted ones back (with the directories that held them, replacing whatever took their place)."""
    merged = {path: entry for path, entry in tree if not protected(path)}
    original = dict(initial)
    for path, entry in initial:
        if not protected(path):
            continue
        merged[path] = entry
        for parent in PurePosixPath(path).parents:
            name = parent.as_posix()
            if name != "." and (name not in merged or merged[name].kind != "dir") and name in original:
                merged[name] = original[name]
    # a restored directory may now hold paths the tree had under a file or link of the same name: drop them
    def under_a_file(path: str) -> bool:
        parents = [q.as_posix() for q in PurePosixPath(path).parents if q.as_posix() != "."]
        return any(merged.get(q, FileEntry("dir")).kind != "dir" for q in parents)

    shadowed = [p for p in merged if under_a_file(p)]
    for path in shadowed:
        del merged[path]
    return tuple(sorted(merged.items()))

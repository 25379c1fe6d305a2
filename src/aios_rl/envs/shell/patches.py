"""Unified diffs and search/replace edits: making them, and applying them strictly.

A diff is applied only if every hunk's context matches exactly (at its line number, or at exactly one other
place); nothing is written unless every hunk applies. ``/dev/null`` creates or deletes files; ``..`` paths
and renames are refused. Used by the mutation generator (reference patches), the environment (patch
actions and candidates) and task validation.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import overload

from aios_rl.contracts.errors import EnvError


def split_lines(text: str) -> list[str]:
    """Lines with their endings; only "\\n" ends a line (as for the tokenizer and the AST), unlike
    ``str.splitlines``, which also splits on form feeds and other separators."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


_NO_NEWLINE = "\\ No newline at end of file\n"
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_HEADERS = ("diff ", "index ", "new file mode", "deleted file mode", "similarity", "rename ", "old mode",
                "new mode")  # fmt: skip


def unified_diff(before: str, after: str, relpath: str) -> str:
    """A standard unified diff (``--- a/path``, ``+++ b/path``, 3 lines of context); ``""`` if equal.

    A last line without newline gets the usual ``\\ No newline at end of file`` marker.
    """
    lines = difflib.unified_diff(split_lines(before), split_lines(after), f"a/{relpath}", f"b/{relpath}")
    return "".join(x if x.endswith("\n") else f"{x}\n{_NO_NEWLINE}" for x in lines)


@dataclass(frozen=True)
class _Hunk:
    old_start: int
    old: tuple[str, ...]  # context and removed lines, in order
    new: tuple[str, ...]  # context and added lines, in order
    removed: tuple[str, ...]
    added: tuple[str, ...]
    first_change: int  # old-side line number of the first removed line, or of the line an addition precedes


def _diff_path(header: str, line_no: int) -> str | None:
    raw = header.rstrip("\n").split("\t")[0].strip()
    if raw == "/dev/null":
        return None
    path = raw[2:] if raw[:2] in ("a/", "b/") else raw
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or ".." in parts:
        raise EnvError(f"diff line {line_no}: path {raw!r} must be relative and stay inside the repository")
    return path


def _parse_hunk(lines: list[str], i: int) -> tuple[_Hunk, int]:
    match = _HUNK.match(lines[i])
    if not match:
        raise EnvError(f"diff line {i + 1}: bad hunk header {lines[i].rstrip()!r}")
    old_left = int(match[2]) if match[2] is not None else 1
    new_left = int(match[4]) if match[4] is not None else 1
    old: list[str] = []
    new: list[str] = []
    changed: dict[str, list[str]] = {"-": [], "+": []}
    start = int(match[1])
    first_change = None
    i += 1
    last = ""
    while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
        line = lines[i]
        tag, body = (" ", "\n") if line in ("\n", "") else (line[0], line[1:])
        if tag == "\\":  # the previous line had no newline at end of file
            for side, flag in ((old, "- "), (new, "+ ")):
                if last in flag and side:
                    side[-1] = side[-1].removesuffix("\n")
        elif tag in (" ", "-", "+"):
            if tag != " ":
                changed[tag].append(body)
                if first_change is None:
                    first_change = start + len(old)
            if tag in " -":
                old.append(body)
                old_left -= 1
            if tag in " +":
                new.append(body)
                new_left -= 1
            last = tag
        else:
            raise EnvError(f"diff line {i + 1}: expected ' ', '-' or '+' in a hunk, got {line.rstrip()!r}")
        i += 1
    if old_left or new_left:
        raise EnvError(
            f"diff hunk {match[0]!r} ends early: {old_left} old and {new_left} new line(s) missing"
        )
    return _Hunk(start, tuple(old), tuple(new), tuple(changed["-"]), tuple(changed["+"]),
                 first_change if first_change is not None else start), i


def changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """The removed and the added lines of a unified diff, in order and without their line endings.

    Raises:
        EnvError: ``diff`` is not a well-formed unified diff (as for :func:`apply_unified_diff`).
    """
    hunks = [hunk for _, _, file_hunks in _parse_diff(diff) for hunk in file_hunks]
    removed = [line.removesuffix("\n") for hunk in hunks for line in hunk.removed]
    added = [line.removesuffix("\n") for hunk in hunks for line in hunk.added]
    return removed, added


def edited_lines(diff: str) -> list[tuple[str, int]]:
    """``(path, line)`` for each hunk of a unified diff: the file and the old-side line number of the hunk's
    first change (a removed line, or the line an added one goes before).

    Raises:
        EnvError: ``diff`` is not a well-formed unified diff (as for :func:`apply_unified_diff`).
    """
    return [(new or old or "", hunk.first_change) for old, new, hunks in _parse_diff(diff) for hunk in hunks]


def diff_paths(diff: str) -> list[str]:
    """The paths a unified diff creates, changes or deletes, in order.

    Raises:
        EnvError: on a malformed diff.
    """
    return [new or old for old, new, _ in _parse_diff(diff) if (new or old) is not None]  # type: ignore[misc]


def without_files(diff: str, drop: Callable[[str], bool]) -> str:
    """``diff`` without the sections of the files ``drop`` names (e.g. what a verifier puts back).

    Raises:
        EnvError: on a malformed diff.
    """
    _parse_diff(diff)  # the whole diff must parse before any part of it is kept
    lines = split_lines(diff if diff.endswith("\n") else diff + "\n")
    kept, keep = [], True
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            path = _diff_path(lines[i + 1][4:], i + 2) or _diff_path(line[4:], i + 1)
            keep = path is None or not drop(path)
        if keep:
            kept.append(line)
    return "".join(kept)


def _parse_diff(diff: str) -> list[tuple[str | None, str | None, list[_Hunk]]]:
    # A diff pasted without its final newline still means full lines; only "\ No newline" says otherwise.
    lines = split_lines(diff if diff.endswith("\n") else diff + "\n")
    patches = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_path, new_path = _diff_path(line[4:], i + 1), _diff_path(lines[i + 1][4:], i + 2)
            if old_path and new_path and old_path != new_path:
                raise EnvError(f"diff line {i + 1}: renames are not supported ({old_path} -> {new_path})")
            i += 2
            hunks = []
            while i < len(lines) and lines[i].startswith("@@"):
                hunk, i = _parse_hunk(lines, i)
                hunks.append(hunk)
            if not hunks:
                raise EnvError(f"diff for {new_path or old_path} has no hunks")
            patches.append((old_path, new_path, hunks))
        elif line.startswith(_GIT_HEADERS) or not line.strip():
            i += 1
        else:
            raise EnvError(f"diff line {i + 1}: expected a '--- a/path' header, got {line.rstrip()!r}")
    if not patches:
        raise EnvError("diff contains no file changes")
    return patches


def _apply_hunks(text: str, hunks: list[_Hunk], path: str) -> str:
    lines = split_lines(text)
    out: list[str] = []
    pos = 0
    for h in hunks:
        k = len(h.old)
        guess = h.old_start - 1 if k else h.old_start  # -5,0 means "insert after line 5"
        if k == 0 or (guess >= pos and tuple(lines[guess : guess + k]) == h.old):
            at = guess
        else:  # line numbers may be off; the context itself must match exactly and uniquely
            hits = [j for j in range(pos, len(lines) - k + 1) if tuple(lines[j : j + k]) == h.old]
            if len(hits) != 1:
                problem = "does not match" if not hits else f"matches {len(hits)} places"
                context = "".join(h.old)[:200]
                raise EnvError(f"hunk at line {h.old_start} of {path}: context {problem}: {context!r}")
            at = hits[0]
        if not pos <= at <= len(lines):
            raise EnvError(f"hunk at line {h.old_start} of {path} is outside the file ({len(lines)} lines)")
        out += lines[pos:at] + list(h.new)
        pos = at + k
    return "".join(out + lines[pos:])


@overload
def apply_unified_diff(files: Mapping[str, str], diff: str) -> dict[str, str]: ...
@overload
def apply_unified_diff(files: Path, diff: str) -> list[str]: ...
def apply_unified_diff(files: Mapping[str, str] | Path, diff: str) -> dict[str, str] | list[str]:
    """Apply a single- or multi-file unified diff strictly: every context and removed line must match.

    Hunks may sit at other line numbers than stated if their lines match exactly one place (like
    ``git apply``'s offsets); there is no fuzz. ``/dev/null`` creates or deletes a file. Nothing is
    changed unless every hunk of every file applies.

    Args:
        files: ``{relative path: text}``, or a repository root directory.
        diff: the unified diff.

    Returns:
        For a mapping, a new mapping with the changes applied (deleted files removed); for a
        directory, the sorted relative paths written or deleted.

    Raises:
        EnvError: on a malformed diff, a missing file, an unsafe path or a hunk that does not match.
    """
    root = files if isinstance(files, Path) else None
    current = {} if root is not None else dict(files)
    touched: dict[str, str | None] = {}
    for old_path, new_path, hunks in _parse_diff(diff):
        path = new_path or old_path
        if root is not None and path not in current:
            current[path] = _read_inside(root, path)
        if old_path is None and current.get(path) is not None:
            raise EnvError(f"diff creates {path}, which already exists")
        if old_path is not None and current.get(path) is None:
            raise EnvError(f"diff changes {path}, which does not exist")
        result = _apply_hunks(current.get(path) or "", hunks, path)
        if new_path is None and result:
            raise EnvError(f"diff deletes {path} but leaves {len(result)} characters")
        current[path] = touched[path] = None if new_path is None else result
    if root is None:
        return {p: t for p, t in current.items() if t is not None}
    targets = {path: _writable(root, path) for path in touched}  # every check before the first write
    for path, content in touched.items():
        target = targets[path]
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("utf-8"))  # bytes: keep "\r\n" exactly as the diff has it
    return sorted(touched)


def _writable(root: Path, path: str) -> Path:
    """The file ``path`` names inside ``root``, checked so that writing it can neither block nor half-fail:
    it is a regular file or absent (never a pipe, device or directory), and no part of its parent is a file.

    Raises:
        EnvError: otherwise, or when it leaves ``root``.
    """
    target, base = _inside(root, path), root.resolve()
    if target.exists() and not target.is_file():
        raise EnvError(f"{path} is not a regular file")
    for parent in target.parents:
        if parent == base or not parent.is_relative_to(base):
            break
        if parent.exists() and not parent.is_dir():
            raise EnvError(f"{path}: {parent.relative_to(base).as_posix()} is not a directory")
    return target


def _inside(root: Path, path: str) -> Path:
    target = (root / path).resolve()
    if not target.is_relative_to(root.resolve()):
        raise EnvError(f"path {path!r} leaves the repository root {root}")
    return target


def _read_inside(root: Path, path: str) -> str | None:
    target = _inside(root, path)
    return target.read_bytes().decode("utf-8") if target.is_file() else None  # no newline translation


def apply_search_replace(text: str, search: str, replace: str) -> str:
    """Replace the single occurrence of ``search`` in ``text`` by ``replace``.

    Raises:
        EnvError: if ``search`` is empty, absent, or occurs more than once (overlaps included).
    """
    if not search:
        raise EnvError("search text is empty; quote the exact lines to replace")
    first = text.find(search)
    if first < 0:
        raise EnvError(f"search text not found: {search[:200]!r}")
    if text.find(search, first + 1) >= 0:
        raise EnvError(f"search text occurs more than once; include more context: {search[:200]!r}")
    return text[:first] + replace + text[first + len(search) :]


def apply_edit(text: str, search: str, replace: str) -> str:
    """:func:`apply_search_replace` as the environment applies an edit: a search quoted with plain newlines
    (as a read shows the file) that is not in a file with "\r\n" endings takes the file's endings, in the
    replacement too (a "\r\n" already in either stays one).

    Raises:
        EnvError: as :func:`apply_search_replace`.
    """
    if search not in text and "\r\n" in text and "\n" in search:
        search, replace = _crlf(search), _crlf(replace)
    return apply_search_replace(text, search, replace)


def _crlf(text: str) -> str:
    """Every bare ``\n`` of ``text`` as ``\r\n``."""
    return re.sub(r"(?<!\r)\n", "\r\n", text)


@dataclass(frozen=True)
class SearchReplace:
    """A structured edit ``{"path": ..., "search": ..., "replace": ...}`` as LM students emit it."""

    path: str
    search: str
    replace: str

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> SearchReplace:
        """Validate a decoded JSON object: exactly the three keys, all strings.

        Raises:
            EnvError: on missing, unknown or non-string fields.
        """
        keys = {"path", "search", "replace"}
        if set(data) != keys or not all(isinstance(data[k], str) for k in keys):
            raise EnvError(f"edit must have exactly string fields {sorted(keys)}, got {repr(dict(data))[:200]}")
        return cls(str(data["path"]), str(data["search"]), str(data["replace"]))

    def apply(self, files: Mapping[str, str]) -> dict[str, str]:
        """A copy of ``files`` with this edit applied (as the environment applies it, :func:`apply_edit`).

        Raises:
            EnvError: if the file is unknown or the search text is not unique in it.
        """
        if self.path not in files:
            raise EnvError(f"edit targets unknown file {self.path!r}")
        return {**files, self.path: apply_edit(files[self.path], self.search, self.replace)}

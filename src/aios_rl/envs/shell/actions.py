"""The shell environment's action language: parsing the text and JSON forms and the command allow-list.

Text form (what the compact student's candidates look like)::

    read <path>
    run <command>
    patch
    <unified diff>
    patch <path>
    <<<<<<< SEARCH
    <exact lines>
    =======
    <replacement lines>
    >>>>>>> REPLACE
    revert
    stop <message>

JSON form (what LM students emit): ``{"action": "read", "path": ...}``, ``{"action": "run", "command":
...}``, ``{"action": "patch", "diff": ...}`` or ``{"action": "patch", "path": ..., "search": ...,
"replace": ...}``, ``{"action": "revert"}``, ``{"action": "stop", "message": ...}``. ``revert`` restores the
working copy to its state at reset. A ```` ``` ```` fence around either form is
ignored.

Parsing never raises for bad input: it returns an :class:`Invalid` whose reason the environment shows
the student, so a malformed action costs one step and is counted, it does not crash the rollout.

Commands are split with :mod:`shlex` and executed without a shell, so the allow-list below is about a
sane action space (the bubblewrap sandbox is the security boundary): an unquoted ``|``, ``&``, ``;``,
``<``, ``>``, ``(`` or ``)``, a backtick or ``$(`` is rejected because it would not do what the student
means. Allowed: the task's test command (optionally with extra arguments), ``cat``, ``grep``, ``ls``,
``head``, ``tail`` (not ``-f``), ``wc``, ``find`` (without ``-exec``/``-delete``/``-fprint``...),
``diff``, ``sed -n '<lines>p'`` and ``python <file in the repo>``. Arguments that look like paths must
stay inside the repository: no absolute paths, ``~`` or ``..`` components.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.mutate import SearchReplace

READ_ONLY_PROGRAMS: tuple[str, ...] = ("cat", "grep", "ls", "head", "tail", "wc", "find", "diff")
_FIND_FORBIDDEN = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
_TAIL_FORBIDDEN = frozenset({"-f", "-F", "--follow", "--retry"})
_SED_PRINT = re.compile(r"^(\d+|\$)(,(\d+|\$))?p$")
_OPERATORS = frozenset("|&;<>()")
_SEARCH, _DIVIDER, _REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_JSON_FIELDS = {
    "read": ({"path"}, set()),
    "run": ({"command"}, set()),
    "revert": (set(), set()),
    "stop": (set(), {"message"}),
}


@dataclass(frozen=True)
class Read:
    """Show a file of the repository (done host-side: a pure read with path checks)."""

    path: str


@dataclass(frozen=True)
class Run:
    """Run a command (already split) in the sandbox."""

    argv: tuple[str, ...]


@dataclass(frozen=True)
class Patch:
    """Change files: a unified diff, or one exact search/replace edit."""

    diff: str | None = None
    edit: SearchReplace | None = None


@dataclass(frozen=True)
class Revert:
    """Restore the working copy to its state at reset (``git checkout .`` for the task copy)."""


@dataclass(frozen=True)
class Stop:
    """End the episode."""

    message: str = ""


@dataclass(frozen=True)
class Invalid:
    """An action that could not be parsed or is not allowed; ``reason`` is shown to the student."""

    reason: str
    kind: str = "unknown"


Action = Read | Run | Patch | Revert | Stop


def action_kind(action: Action | Invalid) -> str:
    """``read``, ``run``, ``patch``, ``revert``, ``stop`` or ``invalid``."""
    return "invalid" if isinstance(action, Invalid) else type(action).__name__.lower()


def parse_action(text: str) -> Action | Invalid:
    """Parse one action in text or JSON form (see the module docstring). Never raises."""
    body = _strip_fence(text)
    if body.lstrip().startswith(("{", "[")):
        return _parse_json(body)
    head, _, rest = body.lstrip().partition("\n")
    verb, _, arg = head.strip().partition(" ")
    arg = arg.strip()
    if verb == "read":
        return _read(arg) if not rest.strip() else Invalid("read takes one path on one line", "read")
    if verb == "run":
        if rest.strip():
            return Invalid("a command must fit on one line", "run")
        split = split_command(arg)
        return split if isinstance(split, Invalid) else Run(tuple(split))
    if verb == "patch":
        return _patch_text(arg, rest)
    if verb == "revert":
        return Revert() if not (arg or rest.strip()) else Invalid("revert takes no arguments", "revert")
    if verb == "stop":
        return Stop(" ".join([arg, rest.strip()]).strip())
    shown = head.strip()[:60] or "(empty)"
    return Invalid(f"unknown action {shown!r}; start with read, run, patch, revert or stop")


def split_command(command: str) -> list[str] | Invalid:
    """Split a command line like a POSIX shell would, rejecting operators a shell would interpret."""
    if not command.strip():
        return Invalid("run needs a command, e.g. `run ls`", "run")
    if "`" in command or "$(" in command or "\n" in command:
        return Invalid("command substitution and newlines are not supported; run one plain command", "run")
    operator = _unquoted_operator(command)
    if operator is not None:
        return Invalid(
            f"shell operator {operator!r} is not supported (no pipes, redirections, chaining or "
            "subshells); run one plain command",
            "run",
        )
    try:
        return shlex.split(command)
    except ValueError as exc:  # unbalanced quotes
        return Invalid(f"cannot split the command: {exc}", "run")


def _unquoted_operator(command: str) -> str | None:
    """The first shell operator character outside quotes (POSIX quoting rules), or None."""
    quote = ""
    escaped = False
    for char in command:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _OPERATORS:
            return char
    return None


def check_command(
    argv: Sequence[str], test_command: Sequence[str], is_repo_file: Callable[[str], bool]
) -> str | None:
    """Why a split command is not allowed, or None when it is.

    Args:
        argv: the command, split.
        test_command: the task's test command; it (and it with extra arguments) is always allowed.
        is_repo_file: whether a relative path names a regular file inside the repository.
    """
    if list(argv) == list(test_command):
        return None
    prefix = len(test_command) if list(argv[: len(test_command)]) == list(test_command) else 1
    bad = next((a for a in argv[prefix:] if _escapes(a)), None)
    if bad is not None:
        return f"argument {bad!r} leaves the repository; use paths relative to the repository root"
    if prefix > 1:
        return None
    program, args = argv[0], list(argv[1:])
    allowed = f"allowed: the test command `{shlex.join(test_command)}`, {', '.join(READ_ONLY_PROGRAMS)}, " \
              "`sed -n '<from>,<to>p' <file>` and `python <file in the repo>`"
    if program in READ_ONLY_PROGRAMS:
        if program == "find" and _FIND_FORBIDDEN & set(args):
            return f"find may only list files, not {sorted(_FIND_FORBIDDEN & set(args))[0]}"
        if program == "tail" and _TAIL_FORBIDDEN & set(args):
            return "tail -f would wait forever; use tail -n <count> <file>"
        return None
    if program == "sed":
        if len(args) >= 2 and args[0] == "-n" and _SED_PRINT.match(args[1]):
            return None
        return "only `sed -n '<from>,<to>p' <file>` is allowed"
    if program == "python":
        if args and not args[0].startswith("-") and is_repo_file(args[0]):
            return None
        return "python may only run a file of the repository: `python <file> [args]`"
    return f"command {program!r} is not allowed; {allowed}"


def check_relpath(path: str) -> str | None:
    """Why ``path`` is not a usable repository-relative path, or None."""
    if not path:
        return "a path is required"
    if "\x00" in path:
        return "the path contains a NUL character"
    if path.startswith(("/", "~")) or ".." in PurePosixPath(path).parts:
        return f"path {path!r} leaves the repository; use a path relative to the repository root"
    return None


def file_arguments(argv: Sequence[str]) -> list[str]:
    """Non-option arguments of a read-only file command (``cat``/``head``/``tail``/``sed -n``), else []."""
    if not argv or argv[0] not in ("cat", "head", "tail", "sed"):
        return []
    args = list(argv[3:] if argv[0] == "sed" else argv[1:])
    return [a for a in args if not a.startswith("-") and not a.isdigit()]


def _escapes(arg: str) -> bool:
    value = arg
    if arg.startswith("-"):
        if "=" in arg:
            value = arg.split("=", 1)[1]
        elif not arg.startswith("--") and len(arg) > 2:
            value = arg[2:]  # an attached short-option value: -f/etc/passwd
        else:
            return False
    return check_relpath(value) is not None and value != ""


def _read(path: str) -> Read | Invalid:
    problem = check_relpath(path)
    return Invalid(problem, "read") if problem else Read(path)


def _patch_text(path: str, body: str) -> Patch | Invalid:
    if not path:
        if not body.strip():
            return Invalid("patch needs a unified diff on the lines after `patch`", "patch")
        return Patch(diff=body)
    problem = check_relpath(path)
    if problem:
        return Invalid(problem, "patch")
    lines = body.split("\n")
    try:
        start, mid, end = lines.index(_SEARCH), lines.index(_DIVIDER), lines.index(_REPLACE)
    except ValueError:
        return Invalid(f"`patch <path>` needs a {_SEARCH} / {_DIVIDER} / {_REPLACE} block", "patch")
    if not start < mid < end:
        return Invalid(f"the {_SEARCH}, {_DIVIDER} and {_REPLACE} markers are out of order", "patch")
    search = "".join(line + "\n" for line in lines[start + 1 : mid])
    replace = "".join(line + "\n" for line in lines[mid + 1 : end])
    return _edit({"path": path, "search": search, "replace": replace})


def _edit(data: dict[str, object]) -> Patch | Invalid:
    try:
        edit = SearchReplace.from_dict(data)
    except EnvError as exc:
        return Invalid(str(exc), "patch")
    problem = check_relpath(edit.path) or (None if edit.search else "search text is empty")
    return Invalid(problem, "patch") if problem else Patch(edit=edit)


def _parse_json(text: str) -> Action | Invalid:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return Invalid(f"malformed JSON action at line {exc.lineno} column {exc.colno}: {exc.msg}")
    if not isinstance(data, dict) or not isinstance(data.get("action"), str):
        return Invalid('a JSON action must be an object with a string "action" field')
    kind = data.pop("action")
    if kind == "patch":
        if set(data) == {"diff"} and isinstance(data["diff"], str) and data["diff"].strip():
            return Patch(diff=data["diff"])
        if set(data) == {"path", "search", "replace"}:
            return _edit(data)
        return Invalid('patch needs {"diff"} or {"path", "search", "replace"} string fields', "patch")
    if kind not in _JSON_FIELDS:
        return Invalid(f"unknown action {kind!r}; use read, run, patch, revert or stop")
    required, optional = _JSON_FIELDS[kind]
    keys = set(data)
    if not required <= keys <= required | optional or not all(isinstance(v, str) for v in data.values()):
        fields = ", ".join(sorted(required | optional))
        return Invalid(f"{kind} takes string field(s) {fields}; got {sorted(keys)}", kind)
    if kind == "read":
        return _read(data["path"].strip())
    if kind == "run":
        split = split_command(data["command"])
        return split if isinstance(split, Invalid) else Run(tuple(split))
    if kind == "revert":
        return Revert()
    return Stop(data.get("message", "").strip())


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        inner = stripped[stripped.index("\n") + 1 : -3]
        return inner if inner.endswith("\n") else inner + "\n"
    return text

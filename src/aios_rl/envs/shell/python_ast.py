"""``ast.parse`` behind one process-wide lock: CPython 3.11 cannot parse in two threads at once.

CPython 3.11 keeps the AST converter's recursion depth in interpreter-wide state. When two threads parse
at the same time and the garbage collector runs Python code in the middle of one conversion (a finalizer,
say), the threads switch and the depth counter of one is changed by the other; the parse then fails with
``SystemError: AST constructor recursion depth mismatch``. The environment workers of a rollout run in a
thread pool and each parses the working copy's sources for its candidates, so that happened here (in a
test of `shell train` under load). Later CPython versions keep the depth per parse (CPython issue
gh-106905). The lock's cost was not measured; a parse of one module is short beside the sandboxed test
runs the workers otherwise wait on.

The lock covers this project's parses only: the standard library parses too, unlocked (3.11's traceback
module parses a source line to place its ``^`` markers when it formats an exception, as ``logger.exception``
does in a teacher's thread). Such a parse can disturb one of ours in the same way, so a parse that fails
with the mismatch is parsed again, up to ``RETRIES`` times.

A leading UTF-8 byte order mark is left out of the parse, as Python does when it reads a source file
(``ast.parse`` of text refuses it); columns on line 1 then count from after it.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["BOM", "parse"]

_LOCK = threading.Lock()
RETRIES = 3
_DISTURBED = "recursion depth mismatch"
BOM = "\ufeff"


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, never at the same time as another of ours (SyntaxError as usual), parsed again
    up to ``RETRIES`` times when an unlocked parse disturbs it. A leading :data:`BOM` is skipped."""
    source = source.removeprefix(BOM)
    with _LOCK:
        for _ in range(RETRIES):
            try:
                return ast.parse(source)
            except SystemError as exc:
                if _DISTURBED not in str(exc):
                    raise
        return ast.parse(source)  # the last try: whatever it raises, the caller sees

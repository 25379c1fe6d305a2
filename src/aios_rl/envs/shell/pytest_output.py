"""Reading test runs: pytest's short summary, traceback frames, and the text the student is shown.

The shell environment runs pytest with ``-rA --tb=short -p no:cacheprovider`` appended (see
:data:`PYTEST_REPORT_ARGS`) so that the short test summary lists every test with its outcome and each
traceback frame is one ``path:line: in function`` line. A test command that is not pytest is judged by
its exit code alone: it counts as one test, named by the command, that passes iff it exits 0.

Everything here is a pure function of the command's output, so a summary can be recomputed from a
stored episode.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

PYTEST_REPORT_ARGS: tuple[str, ...] = ("-rA", "--tb=short", "-p", "no:cacheprovider")

# "FAILED tests/test_x.py::test_y[a-b] - AssertionError: ..." (the reason after " - " is optional).
_OUTCOME_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+?(?:\[.*?\])?)(?: - .*)?$")
# A parametrised id may itself hold "] - " ("test_y[c] - d]"): then where the id ends is read from the
# failure's section header ("____ test_y[c] - d] ____", "____ ERROR at setup of Class.test[...] ____").
_PARAM_END = re.compile(r"\](?= - |$)")
_SECTION = re.compile(r"^_+ (?:ERROR at (?:setup|teardown) of )?(.+?) _+$")  # one "_" when the name is long
# pytest 9: "SUBFAILED[msg] (i=1) tests/test_x.py::T::test_y - AssertionError"; a unittest test whose
# subTest failed is otherwise listed as PASSED, so this line alone says it failed.
_SUBFAILED_LINE = re.compile(r"^SUBFAILED(?:\[.*?\])? ?(?:\(.*?\))? (\S+?::\S+?(?:\[.*?\])?)(?: - .*)?$")
# The last line: "==== 1 failed, 26 passed in 0.40s ====" or, under -q, "1 failed, 26 passed in 0.40s";
# pytest 9 counts subtests (unittest's subTest too) in two words: "1 passed, 3 subtests passed in 0.60s".
_FINAL_LINE = re.compile(r"^=*\s*((?:\d+ [a-z]+(?: [a-z]+)?(?:, )?)+|no tests ran) in [\d.]+s\b")
_COUNT = re.compile(r"(\d+) ([a-z]+(?: [a-z]+)?)")
# --tb=short frame header: "roman.py:19: in to_roman"
_FRAME = re.compile(r"^(\S+\.py):(\d+): in (\S+)$")
# Wall-clock durations and memory addresses change from run to run; they are masked in what the student
# sees so that the same state always gives the same observation (branching and matched comparisons).
_DURATION = re.compile(r"\bin \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?")
_PASSES = re.compile(r"^=+ PASSES =+$")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


@dataclass(frozen=True)
class Frame:
    """One traceback frame: file as pytest printed it (relative to the repo root), 1-based line, function."""

    path: str
    lineno: int
    function: str


@dataclass(frozen=True)
class SuiteRun:
    """What one run of the test command showed.

    Attributes:
        passing: ids of tests that passed (pytest node ids; the command itself for non-pytest commands).
        failing: ids of tests that failed or errored, collection errors included.
        counts: pytest's final-line counts (``passed``, ``failed``, ``error``, ``skipped``...), errors
            normalised to ``error``.
        returncode: exit status of the command.
        complete: the run reached a verdict (pytest printed its final line, or a non-pytest command
            exited); False on a timeout or a crash before pytest's summary.
        timed_out: the command was killed at its wall timeout.
        frames: traceback frames printed for the failures, in output order.
    """

    passing: tuple[str, ...]
    failing: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)
    returncode: int = 0
    complete: bool = True
    timed_out: bool = False
    frames: tuple[Frame, ...] = ()

    @property
    def passed(self) -> bool:
        """The command passed: exit 0 and a verdict reached."""
        return self.complete and self.returncode == 0 and not self.timed_out

    @property
    def n_failed(self) -> int:
        """Number of failing (or erroring) tests."""
        return len(self.failing)


def is_pytest(argv: Sequence[str]) -> bool:
    """Whether a test command runs pytest (``pytest ...``, ``pytest-3``, ``py.test``, ``python -m pytest ...``)."""
    if not argv:
        return False
    if PurePosixPath(argv[0]).name.startswith(("pytest", "py.test")):
        return True
    return "-m" in argv[:-1] and argv[list(argv).index("-m") + 1] == "pytest"


def reporting_argv(argv: Sequence[str]) -> list[str]:
    """The argv the environment really runs for a test command: pytest gets the report flags appended."""
    return [*argv, *PYTEST_REPORT_ARGS] if is_pytest(argv) else list(argv)


def parse_pytest(output: str, returncode: int, *, timed_out: bool = False) -> SuiteRun:
    """Per-test outcomes from pytest output produced with ``-rA --tb=short``.

    Node ids come from the short test summary; a parametrised id keeps its ``[...]`` part. Tests marked
    ``XFAIL`` are neither passing nor failing; ``XPASS`` counts as passing; a test with a ``SUBFAILED``
    subtest is failing (pytest 9 lists a unittest test whose subTest failed as ``PASSED`` too). Without
    ``-rA`` (pytest's default summary, which task validation reads) the failing ids and the counts are still
    complete; only ``passing`` stays empty.

    Args:
        output: stdout (and stderr) of the run.
        returncode: its exit status.
        timed_out: whether the run was killed at its timeout (then it is never complete).

    Returns:
        The parsed run. ``complete`` is False when pytest's final summary line is missing.
    """
    passing: list[str] = []
    failing: list[str] = []
    counts: dict[str, int] = {}
    complete = False
    lines = output.splitlines()
    sections = {m.group(1) for line in lines if (m := _SECTION.match(line))}
    for line in lines:
        match = _OUTCOME_LINE.match(line)
        if match:
            kind, node = match.groups()
            node = _whole_id(kind, line[len(kind) + 1 :], node, sections)
            if kind in ("PASSED", "XPASS"):
                passing.append(node)
            elif kind in ("FAILED", "ERROR"):
                failing.append(node)
            continue
        sub_failed = _SUBFAILED_LINE.match(line)
        if sub_failed:
            failing.append(sub_failed.group(1))
            continue
        final = _FINAL_LINE.match(line.strip())
        if final:
            complete = True
            counts = {_count_key(word): int(n) for n, word in _COUNT.findall(final.group(1))}
    failed = set(failing)
    return SuiteRun(
        passing=tuple(dict.fromkeys(node for node in passing if node not in failed)),
        failing=tuple(dict.fromkeys(failing)),
        counts=counts,
        returncode=returncode,
        complete=complete and not timed_out,
        timed_out=timed_out,
        frames=traceback_frames(output),
    )


def _whole_id(kind: str, rest: str, node: str, sections: set[str]) -> str:
    """The node id of a summary line whose parametrised id holds "] - " (``node`` when it does not).

    A ``PASSED`` line never has a reason after the id, so all of ``rest`` is the id. Otherwise the id ends
    at the last "]" before a " - " whose test name (classes joined by ".") heads a failure's section.
    """
    if "[" not in node or rest == node:
        return node
    if kind == "PASSED":
        return rest
    for end in reversed([m.end() for m in _PARAM_END.finditer(rest)]):
        longer = rest[:end]
        if len(longer) > len(node) and ".".join(longer.split("::")[1:]) in sections:
            return longer
    return node


def exit_code_run(argv: Sequence[str], returncode: int, *, timed_out: bool = False) -> SuiteRun:
    """A non-pytest test command judged by exit code: one test, named by the command line."""
    name = shlex.join(argv)
    ok = returncode == 0 and not timed_out
    return SuiteRun(
        passing=(name,) if ok else (),
        failing=() if ok else (name,),
        counts={"passed": int(ok), "failed": int(not ok)},
        returncode=returncode,
        complete=not timed_out,
        timed_out=timed_out,
    )


def traceback_frames(output: str) -> tuple[Frame, ...]:
    """Frames of ``--tb=short`` tracebacks (``path:line: in function``), in output order."""
    frames = []
    for line in output.splitlines():
        match = _FRAME.match(line.strip())
        if match:
            frames.append(Frame(match.group(1), int(match.group(2)), match.group(3)))
    return tuple(frames)


def display_output(output: str) -> str:
    """Command output as the student sees it: run-dependent noise masked, per-test PASSED lines dropped.

    The ``PASSED`` lines and the ``PASSES`` header come from ``-rA``, which the environment adds for its
    own bookkeeping; the final line already counts the passes, and the failures stay visible.
    """
    kept = [line for line in output.splitlines() if not (line.startswith("PASSED ") or _PASSES.match(line))]
    text = "\n".join(kept)
    text = _DURATION.sub("in <duration>", text)
    return _ADDRESS.sub("0x<address>", text)


def summary_text(run: SuiteRun | None, *, max_ids: int = 10) -> str:
    """A few lines: pass/fail counts and the failing test ids (at most ``max_ids`` of them)."""
    if run is None:
        return "Tests: not run yet."
    if run.timed_out:
        return "Tests: the test run timed out."
    status = "all passed" if run.passed else f"exit code {run.returncode}"
    lines = [f"Tests: {len(run.passing)} passed, {run.n_failed} failed ({status})."]
    if not run.complete:
        lines.append("The test run ended without pytest's final summary line.")
    if run.failing:
        shown = ", ".join(run.failing[:max_ids])
        more = f" (+{run.n_failed - max_ids} more)" if run.n_failed > max_ids else ""
        lines.append(f"Failing: {shown}{more}")
    return "\n".join(lines)


def _count_key(word: str) -> str:
    return "error" if word in ("error", "errors") else word

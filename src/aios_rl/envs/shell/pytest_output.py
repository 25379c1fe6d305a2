"""Reading test runs: pytest's short summary, traceback frames, and the text the student is shown.

The shell environment runs pytest with ``-rA --tb=short -p no:cacheprovider`` appended (see
:data:`PYTEST_REPORT_ARGS`) so that the short test summary lists every test with its outcome and each
traceback frame is one ``path:line: in function`` line. A test command that is not pytest is judged by
its exit code alone: it counts as one test, named by the command, that passes iff it exits 0.

Which tests passed and failed is not taken from that text when it can be had exactly: a ``python -m pytest
...`` command runs as ``python -c REPORTER`` (:func:`reporter_argv`, as the line-spectrum tracer runs),
whose in-process plugin writes every test's outcome, as the summary would list it, and pytest's exit
status to a report file (:func:`parse_report`, :func:`reported_run`). The text is kept for what the
student sees, the final line's counts and the traceback frames; a run without a report (pytest did not
return: a crash, ``os._exit``, a timeout; or another form of pytest command) is read from its text as
before, which misses tests whose summary lines fell in the middle of an output longer than the cap.

Everything here is a pure function of the command's output (and report), so a summary can be
recomputed from a stored episode.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from aios_rl.contracts.errors import EnvError

logger = logging.getLogger(__name__)

PYTEST_REPORT_ARGS: tuple[str, ...] = ("-rA", "--tb=short", "-p", "no:cacheprovider")

# The report file's name, in the working copy's root: this prefix and a random token per run (so a file the
# student's code leaves there beforehand is never taken for it); the environment reads and removes it.
REPORT_PREFIX = ".aios-test-report-"
# Outcomes as the -rA summary groups them, in the order that decides a test reported twice (an error in
# teardown after a passing call is an error; a failing subtest fails a passing test).
REPORT_OUTCOMES: tuple[str, ...] = ("error", "failed", "passed", "xpassed", "xfailed", "skipped")
_PYTHON = re.compile(r"^python[\d.]*$")

# Run as ``python -c REPORTER <report file> <pytest args>`` in the working copy; only the standard library
# and pytest. It behaves as ``python -m pytest <pytest args>`` (the working copy first on sys.path), takes
# the outcomes from the terminal reporter's records, which the -rA summary is printed from (node ids as
# printed: relative to the invocation directory), and writes ``{"exitstatus": int, "outcomes": {node id:
# outcome}}``, first outcome of REPORT_OUTCOMES per test, in the summary's order. Writing the report can
# never change the run's exit status. The code under test runs in this process, so it could still find
# the file (the name is not left in sys.argv) and write a fake one, as it could print a fake summary.
REPORTER = f"""
def _main():
    import os, sys
    report = os.path.join(os.getcwd(), sys.argv.pop(1))
    sys.path[0] = os.getcwd()
    import json
    import pytest
    class Recorder:
        reporter = config = None
        @pytest.hookimpl(trylast=True)
        def pytest_configure(self, config):
            self.config, self.reporter = config, config.pluginmanager.get_plugin("terminalreporter")
    def shown(config, nodeid):
        root, here = config.rootpath, config.invocation_params.dir
        if root == here:
            return nodeid
        path, sep, rest = nodeid.partition("::")
        return os.path.relpath(root / path, here) + sep + rest
    recorder = Recorder()
    code = int(pytest.main(sys.argv[1:], plugins=[recorder]))
    try:
        if recorder.reporter is not None:
            outcomes = {{}}
            for outcome in {REPORT_OUTCOMES!r}:
                for rep in recorder.reporter.stats.get(outcome, ()):
                    outcomes.setdefault(shown(recorder.config, rep.nodeid), outcome)
            with open(report, "x", encoding="utf-8") as fh:
                json.dump({{"exitstatus": code, "outcomes": outcomes}}, fh)
    except Exception:
        pass
    sys.exit(code)
_main()
"""

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


def reporter_argv(
    argv: Sequence[str], report: str, *, extra: Sequence[str] = PYTEST_REPORT_ARGS
) -> list[str] | None:
    """The :data:`REPORTER` form of a ``python -m pytest ...`` test command (``extra`` appended: the report
    flags, or none for task validation, which runs the command as given), writing its report to ``report``
    (a file name in the working copy's root), or None for any other command.

    Only that form: ``python -c`` puts the working copy first on ``sys.path`` as ``python -m`` does, while a
    ``pytest`` script would not, so rewriting one could change what the tests import.
    """
    if not is_python_pytest(argv):
        return None
    return [argv[0], "-c", REPORTER, report, *argv[3:], *extra]


def is_python_pytest(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is ``python -m pytest ...`` (any ``python``, ``python3``, ``python3.11``, by path or
    not): the form an in-process reporter or tracer can run as ``python -c CODE ...`` unchanged."""
    if len(argv) < 3 or list(argv[1:3]) != ["-m", "pytest"]:
        return False
    return bool(_PYTHON.match(PurePosixPath(argv[0]).name))


def new_report_name() -> str:
    """A report file name for one run: :data:`REPORT_PREFIX` and a new random token, so that no file left
    in the working copy beforehand is taken for the run's report."""
    return f"{REPORT_PREFIX}{secrets.token_hex(16)}.json"


@dataclass(frozen=True)
class RunReport:
    """What :data:`REPORTER` wrote: each test's outcome (one of :data:`REPORT_OUTCOMES`, in the -rA
    summary's order) and pytest's exit status."""

    outcomes: Mapping[str, str]
    exitstatus: int


def parse_report(text: str) -> RunReport:
    """Parse the reporter's JSON.

    Raises:
        EnvError: the text is not the reporter's format.
    """
    try:
        data = json.loads(text)
        outcomes, status = data["outcomes"], data["exitstatus"]
        if not isinstance(outcomes, dict) or isinstance(status, bool) or not isinstance(status, int):
            raise TypeError("outcomes must be an object and exitstatus an integer")
        bad = [(k, v) for k, v in outcomes.items() if v not in REPORT_OUTCOMES]
        if bad:
            raise ValueError(f"unknown outcome {bad[0][1]!r} of {bad[0][0]!r}")
    except (ValueError, TypeError, KeyError, RecursionError) as exc:  # json's errors are ValueErrors
        raise EnvError(f"test report is malformed: {str(exc)[:200]}") from exc
    return RunReport(outcomes, status)


def read_report(text: str | None) -> RunReport | None:
    """The report in ``text`` (the report file's, None when the run wrote none), or None when it is
    malformed (then the run is judged from its text)."""
    if text is None:
        return None
    try:
        return parse_report(text)
    except EnvError as exc:
        logger.debug("no test report: %s", exc)
        return None


def judged_run(
    report: RunReport | None, output: str, returncode: int, *, timed_out: bool = False
) -> SuiteRun:
    """A pytest run as the environment and task validation judge it: from its report when it wrote one and
    finished in time (:func:`reported_run`), else from its text (:func:`parse_pytest`)."""
    if report is not None and not timed_out:  # pytest's own record of every test: exact
        return reported_run(report, output)
    return parse_pytest(output, returncode, timed_out=timed_out)


def reported_run(report: RunReport, output: str) -> SuiteRun:
    """The run as its report says, with what only the text holds (counts, frames) read from ``output``.

    ``passing`` and ``failing`` are what :func:`parse_pytest` reads from a whole -rA summary (``passed`` and
    ``xpassed``; ``error`` then ``failed``), the exit status is the one pytest returned, and the run is
    complete when pytest returned 0 or 1 (a verdict on every test) or printed its final line. (A run that
    timed out is judged from its text: :func:`judged_run`.)
    """
    text = parse_pytest(output, report.exitstatus)
    outcomes = report.outcomes.items()
    return replace(
        text,
        passing=tuple(node for node, outcome in outcomes if outcome in ("passed", "xpassed")),
        failing=tuple(node for node, outcome in outcomes if outcome == "error")
        + tuple(node for node, outcome in outcomes if outcome == "failed"),
        complete=text.complete or report.exitstatus in (0, 1),
    )


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

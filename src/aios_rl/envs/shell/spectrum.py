"""Line spectra: which source lines each test executes, from one traced pytest run in the sandbox.

Spectrum-based fault localisation at line granularity (Ochiai; Abreu et al. 2007,
https://doi.org/10.1109/PRDC.2007.31): a line executed by every failing test and by few passing ones is
suspicious. The environment takes one traced run of the suite at reset (:func:`spectrum_argv`: pytest
started through a small tracer that records, per test, the lines of files under the working copy that
its call phase executed, and writes them to :data:`SPECTRUM_FILE` in the working copy, which the
environment reads and deletes). It is what an agent would get by running the suite under a coverage
tool: it comes from the working copy and the tests only, never from a task's oracle.

Only pytest suites are traced (``python -m pytest ...``); for other test commands, a suite whose traced
run times out, or output that does not parse, there is no spectrum and the line features are 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.pytest_output import is_python_pytest

SPECTRUM_FILE = ".aios-line-spectrum.json"

# Run as ``python -c TRACER <pytest args>`` in the working copy; only the standard library and pytest. Like
# ``python -m pytest`` it puts the working copy on sys.path by its absolute name (``-c`` puts "", the current
# directory whatever it is then, so a test that changed directory would make later imports fail).
TRACER = f"""
import json, os, sys
sys.path[0] = os.getcwd()
import pytest
ROOT = os.getcwd() + os.sep
class _Spectrum:
    def __init__(self):
        self.lines, self.failed = {{}}, {{}}
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        seen = set()
        def local(frame, event, arg):
            if event == "line":
                seen.add((frame.f_code.co_filename, frame.f_lineno))
            return local
        def start(frame, event, arg):
            if frame.f_code.co_filename.startswith(ROOT):
                seen.add((frame.f_code.co_filename, frame.f_lineno))
                return local
            return None
        sys.settrace(start)
        try:
            yield
        finally:
            sys.settrace(None)
            self.lines[item.nodeid] = seen
    def pytest_runtest_logreport(self, report):
        self.failed[report.nodeid] = self.failed.get(report.nodeid, False) or report.failed
spectrum = _Spectrum()
code = pytest.main(sys.argv[1:], plugins=[spectrum])
out = {{node: {{"failed": spectrum.failed.get(node, False),
               "lines": sorted([os.path.relpath(f, ROOT), n] for f, n in seen)}}
       for node, seen in spectrum.lines.items()}}
with open({SPECTRUM_FILE!r}, "w") as fh:
    json.dump(out, fh)
sys.exit(code)
"""


@dataclass(frozen=True)
class LineSpectrum:
    """Per line, how many failing and passing tests executed it.

    Attributes:
        failed_total: failing tests in the traced run.
        counts: ``(path, line) -> (failing tests executing it, passing tests executing it)``.
    """

    failed_total: int
    counts: Mapping[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    def ochiai(self, path: str, line: int) -> float:
        """``ef / sqrt(F * (ef + ep))`` of the line, 0 when no failing test executed it."""
        ef, ep = self.counts.get((path, line), (0, 0))
        if ef == 0 or self.failed_total == 0:
            return 0.0
        return ef / math.sqrt(self.failed_total * (ef + ep))

    def file_max(self, path: str) -> float:
        """The most suspicious line of a file (0 when none of it ran in a failing test)."""
        return max((self.ochiai(p, n) for p, n in self.counts if p == path), default=0.0)


def spectrum_argv(test_command: Sequence[str]) -> list[str] | None:
    """The traced form of a ``python -m pytest ...`` command (any python, as
    :func:`~aios_rl.envs.shell.pytest_output.is_python_pytest` reads it), or None for other test commands."""
    if not is_python_pytest(test_command):
        return None
    return [test_command[0], "-c", TRACER, *test_command[3:], "-q", "-p", "no:cacheprovider"]


def parse_spectrum(text: str) -> LineSpectrum:
    """Parse the tracer's JSON (``{node: {"failed": bool, "lines": [[path, line], ...]}}``).

    Raises:
        EnvError: the text is not the tracer's format.
    """
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("not an object")
        counts: dict[tuple[str, int], list[int]] = {}
        failed_total = 0
        for record in data.values():
            failed = bool(record["failed"])
            failed_total += failed
            for path, line in record["lines"]:
                pair = counts.setdefault((str(path), int(line)), [0, 0])
                pair[0 if failed else 1] += 1
    except (ValueError, TypeError, KeyError, OverflowError) as exc:  # OverflowError: int(1e999)
        raise EnvError(f"line spectrum output is malformed: {exc}") from exc
    return LineSpectrum(failed_total, {key: (ef, ep) for key, (ef, ep) in counts.items()})


def rank_fractions(scores: Sequence[Any]) -> list[float]:
    """For each score, the share of the others that are strictly higher (0 for the best).

    Scores may be any hashable, mutually comparable values, e.g. tuples for a lexicographic order.
    """
    n = len(scores)
    if n <= 1:
        return [0.0] * n
    ordered = sorted(scores, reverse=True)
    first_index: dict[Any, int] = {}
    for i, s in enumerate(ordered):
        first_index.setdefault(s, i)
    return [first_index[s] / (n - 1) for s in scores]

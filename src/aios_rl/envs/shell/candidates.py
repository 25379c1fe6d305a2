"""Admissible actions for the compact student, with numeric features derived only from what it observed.

Candidates, in this order: ``read <file>`` for non-test Python source files, ``run <test command>``,
patch candidates, ``revert`` (only while the working copy differs from its state at reset), ``stop done``. A patch candidate is ``"patch\\n" + mutate.unified_diff(buggy, fixed,
path)`` for one :func:`~aios_rl.envs.shell.mutate.fix_candidates` edit, so a reference fix normalised the
same way (see :func:`~aios_rl.envs.shell.oracle.reference_action`) equals a candidate string exactly.

Patch sites are the functions the latest test run implicates (:func:`localize`): functions holding a
traceback line of a failure, and functions a failing test reaches through names it uses (found by AST,
up to two calls deep). A repository with at most ``small_repo_functions`` functions is searched whole.
Patches are ranked (:func:`patch_pool`) by traceback, then by the function's spectrum-based suspicion
(failing vs passing tests reaching it), then by line distance to a traceback line, and the list is
capped at ``max_candidates`` deterministically.

Feature layout (:data:`FEATURE_NAMES`; every candidate has every key, floats):

============================  ===========================================================================
``kind_<kind>``               one-hot action kind: read, run, patch, revert, stop
``op_<operator>``             one-hot edit operator family of a patch (all 0 for other kinds)
``in_traceback``              patch: its function holds a traceback line; read: the file does
``traceback_distance``        patch: line distance to the nearest traceback line in its file divided by the
                              file's line count (capped at 1); 1 when the file has no traceback line
``called_by_failing_test``    patch: a failing test reaches its function (static calls, see :func:`localize`);
                              read: the file has such a function
``suspicion``                 patch: Ochiai suspicion of its function (:func:`localize`); read: the file's
                              highest
``line_suspicion``            patch: Ochiai suspicion of the edited line from the line spectrum taken at
                              reset (:mod:`~aios_rl.envs.shell.spectrum`); read: the file's highest line;
                              0 without a spectrum
``line_suspicion_rank``       patch: share of the other patches with a strictly higher line suspicion (0:
                              none); 1 for other kinds
``naturalness``               patch: how much more common in the working copy's code the n-grams of the
                              lines it adds are than those of the lines it removes
                              (:func:`~aios_rl.envs.shell.naturalness.naturalness_gain`); 0 for other kinds
``naturalness_rank``          patch: share of the other patches with a strictly higher naturalness; 1 for
                              other kinds
``localization_rank``         patch: share of the other patches strictly ahead by line suspicion, then
                              naturalness (both higher first); 1 for other kinds
``already_read``              patch/read: the file was already read (``read``, ``cat``, ``head``...)
``already_tried``             this exact candidate text was already taken as an action
``step_fraction``             steps taken so far / max steps
``failing_tests``             failing tests in the latest test run (a count)
``failing_fraction``          failing / (passing + failing) in the latest test run
``modified``                  the working copy differs from its state at reset
``last_patch_failed``         the previous action applied a patch and the tests still fail
``attempt_same_line``         patch: a patch the episode applied earlier edited this line of this file
``attempt_nearby``            patch: ``max(0, 1 - d / ATTEMPT_WINDOW)`` for the line distance ``d`` to the
                              nearest earlier applied patch in this file (0 when none)
``attempt_fixed``             patch: of that nearest attempt within ``ATTEMPT_WINDOW`` lines, the share of
                              the tests failing at reset that passed after it (0 when none)
``attempt_broke``             patch: of that attempt, the share of the tests passing at reset that failed
                              after it (0 when none)
============================  ===========================================================================

The ``attempt_*`` features are in-episode feedback: what the episode's own earlier patches did to the tests
(:class:`Attempt`), for telling edits at one site apart after a wrong one (another edit on a line whose
wrong edit already changed the failing set, say). Recovery demonstrations and the teacher's labels on
visited states show them with the oracle's answer; RL on multi-attempt episodes with their outcomes.

No input here comes from a task's oracle: the environment passes the working copy's files, the latest
test run and the episode history, nothing else (``tests/envs/shell/test_no_leakage.py`` checks it).
"""

from __future__ import annotations

import ast
import functools
import math
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell import python_ast
from aios_rl.envs.shell.mutate import (
    NON_INVERTIBLE_OPERATORS,
    OPERATORS,
    Mutation,
    apply_mutation,
    fix_candidates,
    function_qualnames,
    unified_diff,
)
from aios_rl.envs.shell.mutation_scope import iter_functions
from aios_rl.envs.shell.naturalness import naturalness_gain, ngram_counts
from aios_rl.envs.shell.pytest_output import SuiteRun
from aios_rl.envs.shell.spectrum import LineSpectrum, rank_fractions

PATCH_OPERATORS: tuple[str, ...] = tuple(op for op in OPERATORS if op not in NON_INVERTIBLE_OPERATORS)
KINDS: tuple[str, ...] = ("read", "run", "patch", "revert", "stop")
FEATURE_NAMES: tuple[str, ...] = (
    *(f"kind_{k}" for k in KINDS),
    *(f"op_{op}" for op in PATCH_OPERATORS),
    "in_traceback", "traceback_distance", "called_by_failing_test", "suspicion", "line_suspicion",
    "line_suspicion_rank", "naturalness", "naturalness_rank", "localization_rank", "already_read",
    "already_tried", "step_fraction", "failing_tests", "failing_fraction", "modified", "last_patch_failed",
    "attempt_same_line", "attempt_nearby", "attempt_fixed", "attempt_broke",
)  # fmt: skip
ATTEMPT_WINDOW = 5  # lines: how far from an earlier applied patch the attempt_* features reach
STOP_CANDIDATE = "stop done"
REVERT_CANDIDATE = "revert"
_Fn = tuple[str, str]  # (file, qualname)
_MAX_DEPTH = 2


@dataclass(frozen=True)
class Site:
    """Why a function is implicated.

    Attributes:
        depth: fewest calls from a failing test (0: named by one, or holding a traceback line); 3 when
            no failing test reaches it (it is searched because the repository is small).
        traceback_lines: lines of it that appear in tracebacks of the failures.
        tests: failing tests that reach it.
        suspicion: Ochiai score in [0, 1] (see :func:`localize`).
    """

    depth: int
    traceback_lines: tuple[int, ...] = ()
    tests: int = 0
    suspicion: float = 0.0


@dataclass(frozen=True)
class PatchCandidate:
    """One ranked patch candidate and the observable facts its features come from."""

    text: str
    file: str
    qualname: str
    lineno: int
    operator: str
    in_traceback: bool
    traceback_distance: float
    called_by_failing_test: bool
    suspicion: float = 0.0
    naturalness: float = 0.0


@dataclass(frozen=True)
class Attempt:
    """A patch the episode applied, and what the test run after it showed against the run at reset.

    Attributes:
        file: the file a hunk of it changed.
        line: the line number (before the patch) of the hunk's first change.
        fixed: share of the tests failing at reset that passed after it.
        broke: share of the tests passing at reset that failed after it.
    """

    file: str
    line: int
    fixed: float
    broke: float


def attempts_of(edits: Iterable[tuple[str, int]], baseline: SuiteRun, after: SuiteRun) -> tuple[Attempt, ...]:
    """One :class:`Attempt` per edited ``(file, line)`` of a patch, scored by the test run ``after`` it."""
    passing, failing = set(after.passing), set(after.failing)
    fixed = sum(t in passing for t in baseline.failing) / max(1, len(baseline.failing))
    broke = sum(t in failing for t in baseline.passing) / max(1, len(baseline.passing))
    return tuple(Attempt(path, line, round(fixed, 6), round(broke, 6)) for path, line in edits)


@dataclass(frozen=True)
class History:
    """What the episode did so far, as far as features need it."""

    step: int
    max_steps: int
    files_read: frozenset[str] = frozenset()
    tried: frozenset[str] = frozenset()
    modified: bool = False
    last_patch_failed: bool = False
    attempts: tuple[Attempt, ...] = ()


def is_test_file(path: str) -> bool:
    """Test modules and fixtures: under ``tests``/``test``, ``test_*.py``, ``*_test.py``, ``conftest.py``."""
    p = PurePosixPath(path)
    name = p.name
    in_tests = any(part in ("tests", "test") for part in p.parts[:-1])
    return in_tests or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


# Besides the tests, files the verifier takes as they were at reset: pytest's configuration and modules that
# would shadow pytest or run at interpreter start-up.
# Every file name pytest reads its configuration from: pytest.ini/.pytest.ini and pytest.toml/.pytest.toml
# (pytest 9) take precedence over pyproject.toml, tox.ini and setup.cfg.
_JUDGE_FILES = frozenset({
    "conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml", "setup.cfg",
    "tox.ini", "pytest.py", "sitecustomize.py", "usercustomize.py",
})


def judge_file(path: str) -> bool:
    """Whether ``path`` is one the verifier restores to its state at reset before judging: a test module or
    fixture, pytest's configuration, or a module that would shadow pytest or run at interpreter start-up."""
    parts = PurePosixPath(path).parts
    return is_test_file(path) or parts[-1] in _JUDGE_FILES or parts[0] in ("pytest", "_pytest")


def source_files(paths: Iterable[str]) -> list[str]:
    """Non-test Python files among ``paths``, sorted."""
    return sorted(p for p in paths if p.endswith(".py") and not is_test_file(p))


def function_spans(source: str) -> list[tuple[str, int, int]]:
    """``(qualname, first line, last line)`` of every function, outer first; [] if it does not parse."""
    return [(name, _first_line(node), node.end_lineno or node.lineno) for name, node in _functions(source)]


@functools.lru_cache(maxsize=256)
def _functions(source: str) -> tuple[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef], ...]:
    # Cached: localisation asks for the same module's functions once per function and frame. The nodes
    # are shared between callers, who only read them.
    try:
        tree = python_ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    return tuple(iter_functions(tree))


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def function_at_line(source: str, lineno: int) -> str | None:
    """Qualname of the innermost function whose lines include ``lineno``, or None."""
    inside = [(first, name) for name, first, last in function_spans(source) if first <= lineno <= last]
    return max(inside)[1] if inside else None


def localize(
    files: Mapping[str, str], run: SuiteRun | None, small_repo_functions: int
) -> dict[str, dict[str, Site]]:
    """Functions implicated by the failing tests of ``run``, with how suspicious each is.

    A test "reaches" the functions it names and, through a static call graph (names resolved by
    :func:`_resolve`), those they name, up to ``_MAX_DEPTH`` calls deep. Suspicion is the Ochiai score
    of spectrum-based fault localisation (Abreu et al. 2007, https://doi.org/10.1109/PRDC.2007.25) over
    these static reaches: ``failing_reaching / sqrt(failing_total * (failing_reaching + passing_reaching))``.
    Functions holding a traceback line of a failure are implicated whatever their score.

    Args:
        files: the working copy's Python files, ``{relative path: text}`` (tests included).
        run: the latest test run (its test ids and traceback frames); None before any run.
        small_repo_functions: implicate every function when the source files hold at most this many.

    Returns:
        ``{file: {qualname: Site}}`` for the implicated functions of each non-test source file.
    """
    sources = {p: files[p] for p in source_files(files)}
    spans = {p: function_spans(text) for p, text in sources.items()}
    every = [(p, q) for p in spans for q, _, _ in spans[p]]
    graph = {(p, q): _resolve(_names_in_function(sources[p], q), spans) for p, q in every}
    traceback: dict[_Fn, set[int]] = {}
    for frame in run.frames if run else ():
        path = _known_path(frame.path, sources)
        qualname = function_at_line(sources[path], frame.lineno) if path else None
        if path and qualname:
            traceback.setdefault((path, qualname), set()).add(frame.lineno)
    failing, passing = (run.failing, run.passing) if run else ((), ())
    references = _test_references(files, [*failing, *passing])
    reached_by_failing: dict[_Fn, int] = {}
    reached_by_passing: dict[_Fn, int] = {}
    depth: dict[_Fn, int] = {fn: 0 for fn in traceback}
    for test_id, names in references.items():
        is_failing = test_id in failing
        for fn, d in _reach(_resolve(names, spans), graph).items():
            counts = reached_by_failing if is_failing else reached_by_passing
            counts[fn] = counts.get(fn, 0) + 1
            if is_failing:
                depth[fn] = min(depth.get(fn, d), d)
    chosen = every if len(every) <= small_repo_functions or not depth else list(depth)
    sites: dict[str, dict[str, Site]] = {}
    for path, qualname in chosen:
        ef, ep = reached_by_failing.get((path, qualname), 0), reached_by_passing.get((path, qualname), 0)
        suspicion = ef / math.sqrt(len(failing) * (ef + ep)) if ef else 0.0
        sites.setdefault(path, {})[qualname] = Site(
            depth=depth.get((path, qualname), _MAX_DEPTH + 1),
            traceback_lines=tuple(sorted(traceback.get((path, qualname), ()))),
            tests=ef,
            suspicion=round(suspicion, 6),
        )
    return sites


def _reach(start: Iterable[_Fn], graph: Mapping[_Fn, list[_Fn]]) -> dict[_Fn, int]:
    """Functions reachable from ``start`` in at most ``_MAX_DEPTH`` calls, with their call depth."""
    found = {fn: 0 for fn in start}
    frontier = list(found)
    for d in range(1, _MAX_DEPTH + 1):
        frontier = [nxt for fn in frontier for nxt in graph.get(fn, ()) if nxt not in found]
        for fn in frontier:
            found.setdefault(fn, d)
    return found


def patch_pool(
    files: Mapping[str, str], run: SuiteRun | None, small_repo_functions: int
) -> list[PatchCandidate]:
    """Every patch candidate at the implicated functions, best first (deterministic).

    Order: functions holding a traceback line first; then more suspicious functions; then nearer to a
    traceback line of the file; then shallower call depth; then source position.
    """
    ranked: list[tuple[tuple, PatchCandidate]] = []
    sites_by_file = localize(files, run, small_repo_functions)
    counts = ngram_counts(files) if sites_by_file else Counter()
    for path, sites in sorted(sites_by_file.items()):
        text = files[path]
        n_lines = max(1, text.count("\n") + 1)
        file_tb = sorted({line for site in sites.values() for line in site.traceback_lines})
        try:
            known = set(function_qualnames(text))
            edits = fix_candidates(text, path, sorted(q for q in sites if q in known))
        except EnvError:  # a module the student broke no longer parses: no edits to offer in it
            continue
        seen: set[str] = set()
        for edit in edits:
            diff = unified_diff(text, apply_mutation(text, edit), path)
            if not diff or diff in seen:
                continue
            seen.add(diff)
            site = sites[edit.qualname]
            lines = min((abs(edit.lineno - t) for t in file_tb), default=None)
            candidate = PatchCandidate(
                text="patch\n" + diff,
                file=path,
                qualname=edit.qualname,
                lineno=edit.lineno,
                operator=edit.operator,
                in_traceback=bool(site.traceback_lines),
                traceback_distance=1.0 if lines is None else min(1.0, lines / n_lines),
                called_by_failing_test=site.tests > 0,
                suspicion=site.suspicion,
                naturalness=round(naturalness_gain(diff, counts), 6),
            )
            key = _rank_key(site, lines if lines is not None else n_lines, path, edit, candidate.text)
            ranked.append((key, candidate))
    return [c for _, c in sorted(ranked, key=lambda item: item[0])]


def _rank_key(site: Site, lines: int, path: str, edit: Mutation, text: str) -> tuple:
    # Measured on two random samples of seed mutants (102 and 87 tasks): the reference fix is among the
    # first 60 patches for 80% and 70% of tasks, among the first 120 for 90% and 84%. Traceback first,
    # then suspicion, did best of the orders tried on the first sample; on the second all were within 2%.
    return (not site.traceback_lines, -site.suspicion, lines, site.depth, path, edit.lineno, edit.col,
            PATCH_OPERATORS.index(edit.operator), text)


def assemble(
    pool: Sequence[PatchCandidate],
    files: Mapping[str, str],
    run: SuiteRun | None,
    test_command: Sequence[str],
    history: History,
    max_candidates: int,
    spectrum: LineSpectrum | None = None,
) -> tuple[list[str], list[dict[str, float]]]:
    """The capped candidate list and its aligned feature dicts (layout in the module docstring).

    ``run``, ``stop`` and (when the working copy was modified) ``revert`` are always kept; reads of files
    with traceback lines or implicated functions come first; patches take the room left, in ``pool``
    order, and reads fill any remainder.
    """
    run_text = "run " + shlex.join(test_command)
    by_file: dict[str, list[PatchCandidate]] = {}
    for c in pool:
        by_file.setdefault(c.file, []).append(c)
    tb_files = {p for p, cs in by_file.items() if any(c.in_traceback for c in cs)}
    reads = sorted(source_files(files), key=lambda p: (p not in tb_files, p not in by_file, p))
    room = max(0, max_candidates - 2 - history.modified)
    n_reads = min(len(reads), max(room // 4, room - len(pool)))
    patches = list(pool[: room - n_reads])
    common = _common_features(run, history)
    line_scores = [spectrum.ochiai(c.file, c.lineno) if spectrum else 0.0 for c in patches]
    natural = [c.naturalness for c in patches]
    rows: list[tuple[str, dict[str, float]]] = []
    for path in sorted(reads[:n_reads]):
        found = by_file.get(path, [])
        rows.append((f"read {path}", _features("read", None, common, history, f"read {path}", {
            "in_traceback": path in tb_files,
            "traceback_distance": 0.0 if path in tb_files else 1.0,
            "called_by_failing_test": any(c.called_by_failing_test for c in found),
            "suspicion": max((c.suspicion for c in found), default=0.0),
            "line_suspicion": spectrum.file_max(path) if spectrum else 0.0,
            "already_read": path in history.files_read,
        })))
    rows.append((run_text, _features("run", None, common, history, run_text, {})))
    for c, line_score, line_rank, natural_rank, local_rank in zip(
        patches, line_scores, rank_fractions(line_scores), rank_fractions(natural),
        rank_fractions(list(zip(line_scores, natural))),
    ):
        rows.append((c.text, _features("patch", c.operator, common, history, c.text, {
            "in_traceback": c.in_traceback,
            "traceback_distance": c.traceback_distance,
            "called_by_failing_test": c.called_by_failing_test,
            "suspicion": c.suspicion,
            "line_suspicion": line_score,
            "line_suspicion_rank": line_rank,
            "naturalness": c.naturalness,
            "naturalness_rank": natural_rank,
            "localization_rank": local_rank,
            "already_read": c.file in history.files_read,
            **_attempt_features(c, history.attempts),
        })))
    if history.modified:
        rows.append((REVERT_CANDIDATE, _features("revert", None, common, history, REVERT_CANDIDATE, {})))
    rows.append((STOP_CANDIDATE, _features("stop", None, common, history, STOP_CANDIDATE, {})))
    return [text for text, _ in rows], [row for _, row in rows]


def _features(
    kind: str, operator: str | None, common: dict[str, float], history: History, text: str,
    facts: Mapping[str, float | bool],
) -> dict[str, float]:
    row = {name: 0.0 for name in FEATURE_NAMES}
    row[f"kind_{kind}"] = 1.0
    if operator is not None:
        row[f"op_{operator}"] = 1.0
    row["traceback_distance"] = 1.0  # "no traceback line near", unless the facts say otherwise
    row["line_suspicion_rank"] = row["naturalness_rank"] = row["localization_rank"] = 1.0
    row.update({key: float(value) for key, value in facts.items()})
    row["already_tried"] = float(text in history.tried)
    row.update(common)
    return row


def _attempt_features(candidate: PatchCandidate, attempts: Sequence[Attempt]) -> dict[str, float]:
    distances = ((abs(a.line - candidate.lineno), a) for a in attempts if a.file == candidate.file)
    near = [(d, a) for d, a in distances if d < ATTEMPT_WINDOW]
    if not near:
        return {}
    d, nearest = min(near, key=lambda item: item[0])  # the earliest attempt among equally near ones
    return {
        "attempt_same_line": d == 0,
        "attempt_nearby": 1.0 - d / ATTEMPT_WINDOW,
        "attempt_fixed": nearest.fixed,
        "attempt_broke": nearest.broke,
    }


def _common_features(run: SuiteRun | None, history: History) -> dict[str, float]:
    failing = run.n_failed if run else 0
    total = failing + (len(run.passing) if run else 0)
    return {
        "step_fraction": history.step / max(1, history.max_steps),
        "failing_tests": float(failing),
        "failing_fraction": failing / total if total else 0.0,
        "modified": float(history.modified),
        "last_patch_failed": float(history.last_patch_failed),
    }


def _known_path(printed: str, sources: Mapping[str, str]) -> str | None:
    """The repository file a traceback path names (pytest prints paths relative to its rootdir)."""
    if printed in sources:
        return printed
    return next((p for p in sorted(sources) if printed.endswith("/" + p)), None)


def _test_references(files: Mapping[str, str], test_ids: Sequence[str]) -> dict[str, set[str]]:
    """For each test id, the names its test function (or, for a file-level error, its file) uses."""
    trees: dict[str, ast.AST | None] = {}
    found: dict[str, set[str]] = {}
    for node_id in test_ids:
        path, *parts = node_id.split("::")
        if path not in trees:
            try:
                trees[path] = python_ast.parse(files[path]) if path in files else None
            except (SyntaxError, ValueError):
                trees[path] = None
        node = trees[path]
        if node is None:
            continue
        for part in (p.split("[")[0] for p in parts):
            node = next((c for c in ast.iter_child_nodes(node) if getattr(c, "name", None) == part), node)
        found[node_id] = _referenced_names(node)
    return found


def _referenced_names(node: ast.AST) -> set[str]:
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            names.add(child.id)
        elif isinstance(child, ast.Attribute):
            names.add(child.attr)
    return names


def _names_in_function(source: str, qualname: str) -> set[str]:
    node = next((n for name, n in _functions(source) if name == qualname), None)
    return _referenced_names(node) if node is not None else set()


def _resolve(names: Iterable[str], spans: Mapping[str, list[tuple[str, int, int]]]) -> list[_Fn]:
    """Functions a set of names can refer to: same last name component, or ``Class.__init__`` for a class."""
    wanted = set(names)
    hits = []
    for path in sorted(spans):
        for qualname, _, _ in spans[path]:
            parts = qualname.split(".")
            if parts[-1] in wanted or (parts[-1] == "__init__" and len(parts) > 1 and parts[-2] in wanted):
                hits.append((path, qualname))
    return hits

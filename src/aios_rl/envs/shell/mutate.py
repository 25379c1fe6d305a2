"""AST mutation operators, their inverses (patch candidates) and patch application for shell tasks.

A shell task is a seed repository with one injected bug. The generator enumerates single-site
mutations inside functions the tests cover (:func:`enumerate_mutations`), keeps a mutant when the
original passes and the mutant fails some but not all tests, and the compact student repairs it by
choosing among patch candidates (:func:`fix_candidates`): the same operators applied to the buggy
code. Every operator is a family closed under inversion (``<`` -> ``<=`` is undone by ``<=`` ->
``<``; ``n`` -> ``n + 1`` by ``n + 1`` -> ``n``), so the reference fix is among the candidates for
every operator but one:

* ``drop_statement`` is not invertible: what was dropped cannot be recovered from the buggy code.
* ``wrong_variable`` is inverted by trying the other in-scope names of a compatible kind.
* ``wrong_return`` turns into ``None`` only values a fixer can name again (a local in scope or a
  bool), so ``return None`` -> each of those is its inverse; ``return a + b`` is never made ``None``.

Inversion is exact up to spelling: an original written ``not(x)`` is restored as ``not x``, so such
rare spellings are misses. :func:`is_invertible` answers the question exactly for one mutation.

Mutations are applied by replacing a source segment located by AST positions, never by unparsing,
so a diff touches only the mutated lines and comments and formatting elsewhere survive.

Scope analysis lives in :mod:`.mutation_scope`, the operators' site generators in
:mod:`.mutation_operators`; this module holds the records, enumeration and patch application.
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell import python_ast
from aios_rl.envs.shell.mutation_operators import OPERATOR_SITES
from aios_rl.envs.shell.mutation_scope import Function, Source, function_index
from aios_rl.envs.shell.mutation_scope import function_qualnames as function_qualnames
from aios_rl.envs.shell.patches import (
    SearchReplace,
    apply_search_replace,
    apply_unified_diff,
    split_lines,
    unified_diff,
)

# The diff helpers live in patches.py; they stay importable from here for existing callers.
__all__ = ["SearchReplace", "apply_search_replace", "apply_unified_diff", "unified_diff"]

OPERATORS: tuple[str, ...] = (
    "comparison_swap",
    "arithmetic_swap",
    "boolean_swap",
    "negate_condition",
    "range_off_by_one",
    "slice_index",
    "constant_change",
    "drop_statement",
    "swap_call_args",
    "wrong_variable",
    "wrong_return",
)
NON_INVERTIBLE_OPERATORS: frozenset[str] = frozenset({"drop_statement"})
assert tuple(OPERATOR_SITES) == OPERATORS


@dataclass(frozen=True)
class Mutation:
    """One single-site source edit inside one function.

    Attributes:
        operator: operator name, one of :data:`OPERATORS`.
        file: path of the module relative to the repository root (``"pkg/mod.py"``).
        qualname: qualified name of the enclosing function (``"Class.method"``, ``"f.<locals>.g"``).
        lineno: 1-based line of the first replaced character.
        col: 0-based *character* column of the first replaced character (AST columns are bytes).
        original_segment: exact text replaced (may span lines; whole lines for dropped statements).
        mutated_segment: replacement text.
        description: one human-readable line, e.g. ``"comparison '<' -> '<='"``.
    """

    operator: str
    file: str
    qualname: str
    lineno: int
    col: int
    original_segment: str
    mutated_segment: str
    description: str


@dataclass(frozen=True)
class _Edit:
    start: int  # absolute character offsets into the module text
    end: int
    replacement: str
    operator: str
    description: str
    qualname: str
    chunk: tuple[int, int, str]  # (start, end, wrapper prefix) of the enclosing function's text


# ---------------------------------------------------------------- enumeration


def _select(src: Source, qualnames: Sequence[str] | None) -> list[tuple[str, ast.AST]]:
    index = function_index(src.tree)
    if qualnames is None:
        qualnames = list(index)
    for name in qualnames:
        if name not in index:
            close = difflib.get_close_matches(name, list(index), n=3)
            known = ", ".join(close or index) or "none"
            hint = f"; did you mean {known}?" if close else f"; known: {known}"
            raise EnvError(f"no function {name!r} in module{hint}")
    return [(name, fn) for name in dict.fromkeys(qualnames) for fn in index[name]]


def _edits(src: Source, qualnames: Sequence[str] | None, operators: Sequence[str]) -> list[_Edit]:
    unknown = sorted(set(operators) - set(OPERATORS))
    if unknown:
        raise EnvError(f"unknown mutation operator(s) {unknown}; known: {', '.join(OPERATORS)}")
    edits = []
    for qualname, fn in _select(src, qualnames):
        fx = Function(src, fn, qualname)
        for op in operators:
            for start, end, new, description in OPERATOR_SITES[op](fx):
                edits.append(_Edit(start, end, new, op, description, qualname, fx.chunk))
    rank = {op: i for i, op in enumerate(OPERATORS)}
    # Stable sort: position first, then operator order; generation order breaks the remaining ties.
    edits.sort(key=lambda e: (e.start, e.end, rank[e.operator]))
    return edits


# Operators whose edits are a binary-operator token, an identifier or two argument texts exchanged:
# valid syntax by construction (the tests check every mutant of the seeds parses).
_ALWAYS_PARSE = frozenset(
    {"comparison_swap", "arithmetic_swap", "boolean_swap", "swap_call_args", "wrong_variable"}
)


def _squash(text: str) -> str:
    return re.sub(r"[\s()\\]", "", text)


def _checked(src: Source, edits: list[_Edit], file: str, *, dedupe_by: str) -> list[Mutation]:
    """Keep edits that parse and change the AST; dedupe by AST (``"ast"``) or by source (``"text"``).

    Dumping ASTs dominates the cost, so an AST is compared only where equality is possible at all:
    against the original when the edit changes nothing but spaces and parentheses, and against
    earlier edits of the same site that differ from it only that way (``n + 1`` / ``n+1``).
    """
    text = src.text
    baselines: dict[tuple[int, int, str], str] = {}
    seen_text: set[tuple] = set()
    kept: dict[tuple[int, int, str], list[str]] = {}  # texts, not trees: thousands of live ASTs slow the GC
    out = []
    for e in edits:
        start, end, prefix = e.chunk
        mutated_chunk = prefix + text[start : e.start] + e.replacement + text[e.end : end]
        if (e.chunk, mutated_chunk) in seen_text:
            continue
        squashed = _squash(e.replacement)
        site = (e.start, e.end, squashed)
        no_op_possible = squashed == _squash(text[e.start : e.end])
        if e.operator in _ALWAYS_PARSE and site not in kept and not no_op_possible:
            # Token and name swaps always parse and always change the AST; parsing them is the bulk of
            # the cost of fix_candidates, which runs once per student step.
            kept[site] = [mutated_chunk]
            seen_text.add((e.chunk, mutated_chunk))
            out.append(_to_mutation(src, e, file))
            continue
        try:
            tree = python_ast.parse(mutated_chunk)
        except (SyntaxError, ValueError):
            continue
        if no_op_possible:
            if e.chunk not in baselines:
                baselines[e.chunk] = ast.dump(python_ast.parse(prefix + text[start:end]))
            if ast.dump(tree) == baselines[e.chunk]:
                continue
        if dedupe_by == "ast" and site in kept:
            dump = ast.dump(tree)
            if any(dump == ast.dump(python_ast.parse(t)) for t in kept[site]):
                continue
        kept.setdefault(site, []).append(mutated_chunk)
        seen_text.add((e.chunk, mutated_chunk))
        out.append(_to_mutation(src, e, file))
    return out


def _to_mutation(src: Source, e: _Edit, file: str) -> Mutation:
    lineno, col = src.position(e.start)
    original = src.text[e.start : e.end]
    return Mutation(e.operator, file, e.qualname, lineno, col, original, e.replacement, e.description)


def enumerate_mutations(
    source: str, relpath: str, qualnames: Sequence[str] | None = None, *, operators: Sequence[str] = OPERATORS
) -> list[Mutation]:
    """All single-site mutations inside the given functions, in a deterministic order.

    Sites are restricted to function bodies (not decorators, defaults or annotations); a nested
    function's body belongs to its own qualname. A mutant is kept only if it parses and its AST
    differs from the original; mutants with equal ASTs (``not a < b`` vs ``not (a < b)``) are kept
    once. Operand swaps of symmetric comparisons (``x == y`` -> ``y == x``) are never produced.

    Args:
        source: module text.
        relpath: module path relative to the repository root, stored on each mutation.
        qualnames: functions to mutate (``"Class.method"``); ``None`` means every function.
        operators: operator names to use, default all of :data:`OPERATORS`.

    Returns:
        Mutations sorted by position, then operator order.

    Raises:
        EnvError: if the source does not parse, or a qualname or operator is unknown.

    Example:
        >>> [m.mutated_segment for m in enumerate_mutations("def f(a):\\n    return a < 1\\n", "m.py",
        ...                                                 operators=["comparison_swap"])]
        ['<=', '>']
    """
    src = Source(source)
    return _checked(src, _edits(src, qualnames, operators), relpath, dedupe_by="ast")


def fix_candidates(buggy_source: str, relpath: str, qualnames: Sequence[str]) -> list[Mutation]:
    """Patch candidates for a buggy module: single-site inverse edits inside the implicated functions.

    Because every operator family is closed under inversion, these are the mutations of the buggy
    code itself, minus ``drop_statement`` (deleting code never undoes one of our mutations), with
    textual variants kept (``not x < y`` and ``not (x < y)``) so that the exact original spelling is
    among them. Deduplicated by resulting source. See the module docstring for the operators that
    cannot be inverted. On the bundled seeds a function gets 26 candidates at the median and
    about 4.6 per function line, 60 % of them ``wrong_variable``.

    Args:
        buggy_source: module text with the bug.
        relpath: module path relative to the repository root.
        qualnames: implicated functions, e.g. from failing tests' tracebacks.

    Returns:
        Candidate edits in source order; apply one with :func:`apply_mutation`.

    Raises:
        EnvError: if the source does not parse or a qualname is unknown.
    """
    src = Source(buggy_source)
    operators = [op for op in OPERATORS if op not in NON_INVERTIBLE_OPERATORS]
    return _checked(src, _edits(src, list(qualnames), operators), relpath, dedupe_by="text")


def apply_mutation(source: str, mutation: Mutation) -> str:
    """Replace ``mutation.original_segment`` at its position by ``mutation.mutated_segment``.

    Raises:
        EnvError: if the source at that position is not the mutation's original segment.
    """
    lines = split_lines(source)
    if not 1 <= mutation.lineno <= len(lines) or not 0 <= mutation.col <= len(lines[mutation.lineno - 1]):
        raise EnvError(f"mutation position {mutation.lineno}:{mutation.col} is outside {mutation.file}")
    start = sum(len(x) for x in lines[: mutation.lineno - 1]) + mutation.col
    found = source[start : start + len(mutation.original_segment)]
    if found != mutation.original_segment:
        raise EnvError(
            f"mutation does not match {mutation.file} at {mutation.lineno}:{mutation.col}: "
            f"expected {mutation.original_segment!r}, found {found!r}"
        )
    return source[:start] + mutation.mutated_segment + source[start + len(found) :]


def is_invertible(source: str, mutation: Mutation) -> bool:
    """Whether the exact original ``source`` is among :func:`fix_candidates` of the mutant."""
    buggy = apply_mutation(source, mutation)
    candidates = fix_candidates(buggy, mutation.file, [mutation.qualname])
    return any(apply_mutation(buggy, c) == source for c in candidates)


# Prior difficulty per operator: how far the symptom usually is from the site, and (drop_statement)
# whether the candidate list can fix it at all.
_OPERATOR_DIFFICULTY = {
    "negate_condition": 0.25, "comparison_swap": 0.3, "boolean_swap": 0.35, "constant_change": 0.35,
    "arithmetic_swap": 0.35, "range_off_by_one": 0.45, "swap_call_args": 0.45, "slice_index": 0.5,
    "wrong_return": 0.5, "wrong_variable": 0.6, "drop_statement": 0.85,
}  # fmt: skip
_MANY_CANDIDATES = 300


def difficulty_estimate(mutation: Mutation, n_candidates: int, n_failing_tests: int) -> float:
    """Heuristic task difficulty in [0, 1] for curriculum ordering; not a calibrated probability.

    ``0.5 * operator prior + 0.3 * search + 0.2 * weak signal`` where the operator prior is a fixed
    table (``negate_condition`` 0.25 ... ``drop_statement`` 0.85), search is
    ``log(1 + n_candidates) / log(1 + 300)`` capped at 1 (more candidates, more to choose from), and
    weak signal is ``1 / (1 + n_failing_tests)`` (fewer failing tests, less evidence of the site).
    Increasing in ``n_candidates``, decreasing in ``n_failing_tests``.

    Raises:
        EnvError: for an unknown operator or negative counts.
    """
    if mutation.operator not in _OPERATOR_DIFFICULTY:
        raise EnvError(f"unknown mutation operator {mutation.operator!r}; known: {', '.join(OPERATORS)}")
    if n_candidates < 0 or n_failing_tests < 0:
        raise EnvError(
            f"counts must be >= 0, got n_candidates={n_candidates}, n_failing_tests={n_failing_tests}"
        )
    search = min(1.0, math.log1p(n_candidates) / math.log1p(_MANY_CANDIDATES))
    signal = 1.0 / (1.0 + n_failing_tests)
    return min(1.0, max(0.0, 0.5 * _OPERATOR_DIFFICULTY[mutation.operator] + 0.3 * search + 0.2 * signal))

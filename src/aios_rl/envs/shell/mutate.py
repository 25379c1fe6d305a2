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
"""

from __future__ import annotations

import ast
import bisect
import difflib
import io
import itertools
import math
import re
import tokenize
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.patches import (
    SearchReplace,
    split_lines,
    apply_search_replace,
    apply_unified_diff,
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




class _Source:
    """A parsed module with character offsets for AST positions and an operator-token index."""

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            self.tree = ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            raise EnvError(f"cannot parse module source: {exc}") from exc
        self.lines = split_lines(text)
        self.line_starts = list(itertools.accumulate((len(x) for x in self.lines), initial=0))
        self.tokens: list[tuple[int, int, str]] = []  # (start, end, string) of OP/NAME tokens but parens
        self._token_starts: list[int] = []
        self._tokenized: set[tuple[int, int, str]] = set()

    def tokenize(self, chunk: tuple[int, int, str]) -> None:
        """Index the operator tokens of one function's text (``chunk`` as in :class:`_Function`).

        Only the functions being mutated are tokenized: for patch candidates that is one or two
        functions, and tokenizing the whole module was a third of the cost.
        """
        if chunk in self._tokenized:
            return
        self._tokenized.add(chunk)
        start, end, prefix = chunk
        start_row = bisect.bisect_right(self.line_starts, start)  # 1-based line where the chunk starts
        first_line = row = start_row - prefix.count("\n")  # the line the wrapper prefix stands in for
        found = set(self.tokens)
        try:
            for tok in tokenize.generate_tokens(io.StringIO(prefix + self.text[start:end]).readline):
                row = first_line + tok.start[0] - 1
                operator = tok.type in (tokenize.OP, tokenize.NAME) and tok.string not in ("(", ")")
                if operator and row >= start_row:
                    at = self.line_starts[row - 1] + tok.start[1]
                    found.add((at, at + len(tok.string), tok.string))
        except (tokenize.TokenError, SyntaxError) as exc:
            raise EnvError(f"cannot tokenize lines {start_row}-{row} of the module: {exc}") from exc
        self.tokens = sorted(found)
        self._token_starts = [t[0] for t in self.tokens]

    def offset(self, lineno: int, col_bytes: int) -> int:
        line = self.lines[lineno - 1] if lineno <= len(self.lines) else ""
        col = col_bytes if line.isascii() else len(line.encode()[:col_bytes].decode(errors="replace"))
        return self.line_starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset))

    def seg(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def op_between(self, left: ast.AST, right: ast.AST) -> tuple[int, int, str] | None:
        """The operator token(s) between two sibling operands, parentheses excluded."""
        lo, hi = self.span(left)[1], self.span(right)[0]
        i = bisect.bisect_left(self._token_starts, lo)
        found = []
        while i < len(self.tokens) and self.tokens[i][1] <= hi:
            found.append(self.tokens[i])
            i += 1
        if not found:
            return None
        return found[0][0], found[-1][1], " ".join(t[2] for t in found)

    def position(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self.line_starts, offset) - 1
        return index + 1, offset - self.line_starts[index]


# ---------------------------------------------------------------- functions and scopes

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Pos = tuple[int, int]  # (lineno, byte column), compared to order bindings and uses


def _end(node: ast.AST) -> _Pos:
    return node.end_lineno, node.end_col_offset
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _function_index(tree: ast.Module) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Functions by Python ``__qualname__``, in source order (a name can repeat, e.g. property setters)."""
    found: dict[str, list] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _DEFS):
                found.setdefault(prefix + child.name, []).append(child)
                visit(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                visit(child, prefix)

    visit(tree, "")
    return found


def function_qualnames(source: str) -> list[str]:
    """Qualified names of all functions and methods of a module, in source order.

    Names follow Python's ``__qualname__``: ``f``, ``Class.method``, ``outer.<locals>.inner``.

    Raises:
        EnvError: if the source does not parse.
    """
    return list(_function_index(_Source(source).tree))


@dataclass(frozen=True)
class _Visit:
    node: ast.AST
    parent: ast.AST
    stmt: ast.stmt
    scoped: frozenset[str]  # names bound by enclosing comprehensions and lambdas
    nested: bool  # inside a comprehension or lambda


_NOT_WALKED = (*_DEFS, ast.ClassDef, ast.JoinedStr)


def _walk(fn: ast.AST) -> list[_Visit]:
    """Nodes of a function body in field order; nested defs, classes, f-strings and annotations skipped.

    f-strings are skipped because their inner positions are unreliable before Python 3.12;
    annotations because mutating them cannot change behaviour.
    """
    out: list[_Visit] = []

    def visit(node: ast.AST, parent: ast.AST, stmt: ast.stmt, scoped: frozenset[str], nested: bool) -> None:
        stmt = node if isinstance(node, ast.stmt) else stmt
        out.append(_Visit(node, parent, stmt, scoped, nested))
        if isinstance(node, _COMPREHENSIONS):
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            scoped, nested = scoped | targets, True
        elif isinstance(node, ast.Lambda):
            scoped, nested = scoped | {a.arg for a in _all_args(node.args)}, True
        for field, value in ast.iter_fields(node):
            if field == "annotation":
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST) and not isinstance(child, _NOT_WALKED):
                    visit(child, node, stmt, scoped, nested)

    for stmt in fn.body:
        if not isinstance(stmt, (*_DEFS, ast.ClassDef)):
            visit(stmt, fn, stmt, frozenset(), False)
    return out


def _all_args(args: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *extra, *args.kwonlyargs]


_KIND_BY_TYPE = {
    "int": "number", "float": "number", "bool": "bool", "str": "str", "bytes": "bytes", "list": "list",
    "List": "list", "dict": "dict", "Dict": "dict", "set": "set", "Set": "set", "tuple": "tuple",
    "Tuple": "tuple",
}  # fmt: skip
_KIND_BY_CALL = {
    **_KIND_BY_TYPE, "len": "number", "sum": "number", "abs": "number", "round": "number", "sorted": "list",
}  # fmt: skip
_KIND_BY_NODE = (
    (ast.List, "list"), (ast.ListComp, "list"), (ast.Dict, "dict"), (ast.DictComp, "dict"), (ast.Set, "set"),
    (ast.SetComp, "set"), (ast.Tuple, "tuple"), (ast.JoinedStr, "str"),
)  # fmt: skip


def _expr_kind(node: ast.AST | None, known: Mapping[str, str | None]) -> str | None:
    """Coarse type of an expression when obvious from its form and the kinds ``known`` so far."""
    if isinstance(node, ast.Constant) and node.value is not None:
        return _KIND_BY_TYPE.get(type(node.value).__name__)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _KIND_BY_CALL.get(node.func.id)
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.Compare) or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return "bool"
    if isinstance(node, ast.UnaryOp):
        return "number" if _expr_kind(node.operand, known) == "number" else None
    if isinstance(node, ast.BinOp):
        kinds = {_expr_kind(node.left, known), _expr_kind(node.right, known)}
        concat = isinstance(node.op, ast.Add) and kinds in ({"str"}, {"list"})
        return kinds.pop() if kinds == {"number"} or concat else None
    if isinstance(node, ast.Subscript):  # "abc"[i] is a str, items[1:] a list
        base = _expr_kind(node.value, known)
        return base if base == "str" or base == "list" and isinstance(node.slice, ast.Slice) else None
    if isinstance(node, (ast.BoolOp, ast.IfExp)):
        parts = node.values if isinstance(node, ast.BoolOp) else [node.body, node.orelse]
        kinds = {_expr_kind(p, known) for p in parts}
        return kinds.pop() if len(kinds) == 1 else None
    return next((kind for cls, kind in _KIND_BY_NODE if isinstance(node, cls)), None)


def _annotation_kind(node: ast.AST | None) -> str | None:
    base = node.value if isinstance(node, ast.Subscript) else node
    return _KIND_BY_TYPE.get(base.id) if isinstance(base, ast.Name) else None


class _Function:
    """One function being mutated: its nodes, locals and the text chunk that parses on its own.

    Locals get a coarse kind (number, str, list, ...) from annotations and obvious bindings
    (``acc = 0``, ``for i in range(n)``); ``wrong_variable`` only exchanges names whose kinds do not
    conflict. The relation depends on bindings alone, which the operator never changes, so it stays
    closed under inversion while cutting the candidates that would only raise a TypeError.
    """

    _HIDDEN = frozenset({"self", "cls"})  # replacing self/cls is noise, so never a site nor a candidate

    def __init__(self, src: _Source, fn: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str) -> None:
        self.src, self.fn, self.qualname = src, fn, qualname
        self.visits = _walk(fn)
        self.bound: dict[str, _Pos] = {}  # name -> first position where it is bound
        self.bindings: dict[str, int] = {}
        self.loops: dict[str, list[tuple[_Pos, _Pos]]] = {}  # loop target -> (start, end) of its loop bodies
        self.kind_sources: dict[str, list[str | ast.AST | None]] = {}  # a kind, or the value bound
        self.declared: set[str] = set()
        positional = [*fn.args.posonlyargs, *fn.args.args]
        with_default = positional[len(positional) - len(fn.args.defaults) :]
        defaults = dict(zip(with_default, fn.args.defaults, strict=True))
        defaults.update(zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True))
        for arg in _all_args(fn.args):
            self._bind(arg.arg, (0, 0), _annotation_kind(arg.annotation) or defaults.get(arg))
        for v in self.visits:
            self._record_binding(v)
        # Two rounds: literal kinds first, then values built from names (j = i + 1) using those.
        self.kinds: dict[str, str | None] = {}
        for _ in range(2):
            self.kinds = {name: self._merge(srcs) for name, srcs in self.kind_sources.items()}
        first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
        start, end = src.line_starts[first - 1], src.line_starts[fn.end_lineno]
        # An indented def parses on its own under "if 1:", so equivalence checks parse one function.
        indented = src.lines[first - 1][:1] in (" ", "\t")
        self.chunk = (start, end, "if 1:\n" if indented else "")
        src.tokenize(self.chunk)

    def _record_binding(self, v: _Visit) -> None:
        node, stmt = v.node, v.stmt
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            self.declared.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._bind(node.name, (node.body[0].lineno, node.body[0].col_offset), None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._bind((alias.asname or alias.name).split(".")[0], _end(node), None)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if isinstance(v.parent, ast.NamedExpr):
                self._bind(node.id, _end(node), v.parent.value)
            elif v.nested:
                return  # a comprehension target: bound in the comprehension's own scope
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):  # bound after the statement
                direct = v.parent is stmt and not isinstance(stmt, ast.AugAssign)
                kind = _annotation_kind(stmt.annotation) if isinstance(stmt, ast.AnnAssign) else None
                kind = kind or (stmt.value if direct else None)
                self._bind(node.id, _end(stmt), kind, keep=isinstance(stmt, ast.AugAssign))
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):  # bound after the iterable
                func = stmt.iter.func if isinstance(stmt.iter, ast.Call) else None
                call = func.id if isinstance(func, ast.Name) else ""
                counter = call == "range" and v.parent is stmt or (
                    call == "enumerate" and isinstance(v.parent, ast.Tuple) and v.parent.elts[0] is node
                )
                self._bind(node.id, _end(stmt.iter), "number" if counter else None)
                self.loops.setdefault(node.id, []).append((_end(stmt.iter), _end(stmt)))
            else:
                self._bind(node.id, _end(node), None)

    def _bind(self, name: str, pos: _Pos, kind: str | ast.AST | None, *, keep: bool = False) -> None:
        self.bindings[name] = self.bindings.get(name, 0) + 1
        self.bound[name] = min(pos, self.bound.get(name, pos))
        if not keep:  # x += 1 keeps the kind x already has
            self.kind_sources.setdefault(name, []).append(kind)

    def _merge(self, sources: list[str | ast.AST | None]) -> str | None:
        # Optimistic: bindings of unknown kind (i = end) do not veto the one known kind (i = 0).
        kinds = {s if s is None or isinstance(s, str) else _expr_kind(s, self.kinds) for s in sources}
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None

    def in_scope(self, node: ast.AST, scoped: frozenset[str]) -> list[str]:
        """Local names bound before ``node`` (params, earlier assignments, enclosing comprehensions)."""
        pos = (node.lineno, node.col_offset)
        names = {n for n, p in self.bound.items() if p <= pos and self._live(n, pos)} | scoped
        return sorted(names - self.declared - self._HIDDEN)

    def _live(self, name: str, pos: _Pos) -> bool:
        # A name bound only as a loop target counts inside its loops; its value after the loop is rarely used.
        loops = self.loops.get(name, [])
        return len(loops) < self.bindings[name] or any(lo <= pos <= hi for lo, hi in loops)

    def compatible(self, a: str, b: str) -> bool:
        kind_a, kind_b = self.kinds.get(a), self.kinds.get(b)
        return kind_a is None or kind_b is None or kind_a == kind_b

    def of(self, *types: type) -> Iterator[_Visit]:
        return (v for v in self.visits if isinstance(v.node, types))


# ---------------------------------------------------------------- operators

_Site = tuple[int, int, str, str]  # (start, end, replacement, description)

_COMPARE_SWAPS = {
    "<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<="), "==": ("!=",), "!=": ("==",),
    "in": ("not in",), "not in": ("in",), "is": ("is not",), "is not": ("is",),
}  # fmt: skip
# Symmetric edges, so each swap's inverse is itself a swap of the same family.
_ARITH_EDGES = [("+", "-"), ("*", "/"), ("*", "//"), ("/", "//"), ("//", "%"), ("**", "*"), ("<<", ">>"),
                ("&", "|"), ("|", "^")]  # fmt: skip
_ARITH_SWAPS: dict[str, tuple[str, ...]] = {}
for _a, _b in _ARITH_EDGES:
    _ARITH_SWAPS[_a] = (*_ARITH_SWAPS.get(_a, ()), _b)
    _ARITH_SWAPS[_b] = (*_ARITH_SWAPS.get(_b, ()), _a)
_LOOSER_THAN_ADD = (ast.BoolOp, ast.Compare, ast.IfExp, ast.Lambda, ast.NamedExpr, ast.Starred)
_LOOSER_THAN_NOT = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)
_BITWISE = (ast.BitOr, ast.BitXor, ast.BitAnd, ast.LShift, ast.RShift)
# Values whose negation is a constant or a different tuple; "not" is never added to or removed from them.
_NEVER_BOOL = (ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Set, ast.JoinedStr, ast.Lambda,
               *_COMPREHENSIONS)  # fmt: skip
_NOT_INDEX = (ast.Tuple, ast.Slice, ast.Starred, ast.JoinedStr, ast.Dict, ast.Set, ast.List, ast.Lambda,
              *_COMPREHENSIONS)  # fmt: skip


def _comparison_swap(fx: _Function) -> Iterator[_Site]:
    for v in fx.of(ast.Compare):
        operands = [v.node.left, *v.node.comparators]
        for left, right in itertools.pairwise(operands):
            op = fx.src.op_between(left, right)
            for new in _COMPARE_SWAPS.get(op[2], ()) if op else ():
                yield op[0], op[1], new, f"comparison {op[2]!r} -> {new!r}"


def _arithmetic_swap(fx: _Function) -> Iterator[_Site]:
    for v in fx.of(ast.BinOp, ast.AugAssign):
        binop = isinstance(v.node, ast.BinOp)
        op = fx.src.op_between(*((v.node.left, v.node.right) if binop else (v.node.target, v.node.value)))
        if op is None:
            continue
        suffix = "=" if isinstance(v.node, ast.AugAssign) else ""
        for new in _ARITH_SWAPS.get(op[2].removesuffix(suffix), ()) if op[2].endswith(suffix) else ():
            yield op[0], op[1], new + suffix, f"operator {op[2]!r} -> {new + suffix!r}"


def _boolean_swap(fx: _Function) -> Iterator[_Site]:
    for v in fx.of(ast.BoolOp):
        for left, right in itertools.pairwise(v.node.values):
            op = fx.src.op_between(left, right)
            if op and op[2] in ("and", "or"):
                new = "or" if op[2] == "and" else "and"
                yield op[0], op[1], new, f"boolean {op[2]!r} -> {new!r}"


def _negations(fx: _Function, test: ast.expr, *, skip: tuple[type, ...] = ()) -> Iterator[_Site]:
    """``t`` -> ``not t`` and ``not t`` -> ``t``, each in the usual spellings (parse decides).

    ``skip`` names expression types never negated; the same types are never un-negated, which keeps
    the operator its own inverse.
    """
    start, end = fx.src.span(test)
    text = fx.src.text
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    if isinstance(test.operand if negated else test, skip):
        return
    if negated:
        rest = text[start + 3 : end].lstrip()
        rest_start = end - len(rest)
        operand_start, operand_end = fx.src.span(test.operand)
        if rest.startswith("(") and rest.endswith(")") and operand_start > rest_start and operand_end < end:
            yield start, end, rest[1:-1].strip(), "remove 'not'"
        yield start, end, rest, "remove 'not'"
        return
    seg = text[start:end]
    if not isinstance(test, _LOOSER_THAN_NOT):
        yield start, end, f"not {seg}", "negate with 'not'"
    yield start, end, f"not ({seg})", "negate with 'not'"


def _negate_condition(fx: _Function) -> Iterator[_Site]:
    for v in fx.visits:
        if isinstance(v.node, (ast.If, ast.While, ast.IfExp)):
            yield from _negations(fx, v.node.test)
        elif isinstance(v.node, ast.comprehension):
            for test in v.node.ifs:
                yield from _negations(fx, test)


def _signed_number(node: ast.AST) -> int | float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _signed_number(node.operand) if isinstance(node.operand, ast.Constant) else None
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _indexable(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    return not isinstance(node, _NOT_INDEX)


def _plus_minus_one(fx: _Function, node: ast.expr) -> Iterator[_Site]:
    """Shift a bound or index by one, closed under inversion: ``n`` <-> ``n + 1`` <-> ``n + 2``."""
    if not _indexable(node):
        return
    start, end = fx.src.span(node)
    value = _signed_number(node)
    if isinstance(value, int):
        for new in (value + 1, value - 1):
            yield start, end, str(new), f"bound {value} -> {new}"
        return
    offset = isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))
    k = node.right.value if offset and isinstance(node.right, ast.Constant) else None
    if type(k) is int and k >= 1:
        k_start, k_end = fx.src.span(node.right)
        yield k_start, k_end, str(k + 1), f"bound offset {k} -> {k + 1}"
        if k > 1:
            yield k_start, k_end, str(k - 1), f"bound offset {k} -> {k - 1}"
        elif _indexable(node.left) and (op := fx.src.op_between(node.left, node.right)):
            yield start, end, fx.src.text[start : op[0]].rstrip(), f"bound drops '{op[2]} 1'"
        return
    seg = fx.src.seg(node)
    bitwise = isinstance(node, ast.BinOp) and isinstance(node.op, _BITWISE)
    body = f"({seg})" if bitwise or isinstance(node, _LOOSER_THAN_ADD) else seg
    for spaced in (" ", ""):
        for sign in ("+", "-"):
            yield start, end, f"{body}{spaced}{sign}{spaced}1", f"bound {sign} 1"


def _range_off_by_one(fx: _Function) -> Iterator[_Site]:
    for v in fx.of(ast.Call):
        call = v.node
        if not (isinstance(call.func, ast.Name) and call.func.id == "range") or call.keywords:
            continue
        if 1 <= len(call.args) <= 3 and not any(isinstance(a, ast.Starred) for a in call.args):
            for bound in call.args[:2]:  # start and stop; a changed step is a different bug
                yield from _plus_minus_one(fx, bound)


def _slice_index(fx: _Function) -> Iterator[_Site]:
    for v in fx.of(ast.Subscript):
        index = v.node.slice
        bounds = [index.lower, index.upper] if isinstance(index, ast.Slice) else [index]
        bounds = [b for b in bounds if b is not None]
        for bound in bounds:
            yield from _plus_minus_one(fx, bound)


def _format_number(value: int | float | Decimal) -> str:
    text = str(value)
    return text if isinstance(value, int) or any(c in text for c in ".eEn") else f"{text}.0"


def _constant_change(fx: _Function) -> Iterator[_Site]:
    for v in fx.visits:
        node, parent = v.node, v.parent
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            start, end = fx.src.span(node)
            yield start, end, str(not node.value), f"constant {node.value} -> {not node.value}"
            continue
        value = _signed_number(node)
        if value is None or isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
            continue  # -1 is handled once, at the unary minus
        start, end = fx.src.span(node)
        if isinstance(value, float):
            try:  # Decimal keeps the written digits, so +1 then -1 gives back the same text
                value = Decimal(fx.src.text[start:end].replace(" ", ""))
            except InvalidOperation:
                continue
        # A bare negative would re-associate as the base of ** or of .attr / [i] / (...): -1 ** x is -(1 ** x).
        tight = isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Pow) and parent.left is node
        tight = tight or isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node
        tight = tight or isinstance(parent, ast.Call) and parent.func is node
        # x + 0 / x - 0 would be a useless mutant; range/slice offer dropping "+ 1" instead.
        offset_of_binop = isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Sub))
        offset_of_binop = offset_of_binop and parent.right is node
        for new in (value + 1, value - 1):
            if new == 0 and offset_of_binop:
                continue
            text = _format_number(new)
            yield start, end, f"({text})" if new < 0 and tight else text, f"constant {value} -> {text}"


_DROPPABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Break, ast.Continue)
_TRAILING = re.compile(r"[ \t]*(#[^\n]*)?\r?\n?")


def _droppable(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.AnnAssign):
        return stmt.value is not None
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom))
    return isinstance(stmt, _DROPPABLE)


def _drop_statement(fx: _Function) -> Iterator[_Site]:
    src = fx.src
    for owner in (fx.fn, *(v.node for v in fx.visits)):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(owner, field, None)
            if not isinstance(block, list) or owner is not fx.fn and isinstance(owner, _DEFS):
                continue
            for stmt in block:
                if not _droppable(stmt):
                    continue
                start, end = src.span(stmt)
                first_line = src.seg(stmt).split("\n")[0]
                line_start, next_line = src.line_starts[stmt.lineno - 1], src.line_starts[stmt.end_lineno]
                before, after = src.text[line_start:start], src.text[end:next_line]
                own_lines = not before.strip() and _TRAILING.fullmatch(after)
                if len(block) > 1 and own_lines:
                    yield line_start, next_line, "", f"drop statement {first_line!r}"
                else:  # the only statement of its block, or sharing a line: keep the block valid
                    yield start, end, "pass", f"replace statement {first_line!r} with 'pass'"


def _swap_call_args(fx: _Function) -> Iterator[_Site]:
    text = fx.src.text
    for v in fx.of(ast.Call):
        args = [a for a in v.node.args if not isinstance(a, ast.Starred)]
        for i, j in itertools.combinations(range(len(args)), 2):
            if ast.dump(args[i]) == ast.dump(args[j]):
                continue  # swapping equal arguments changes nothing
            (a_start, a_end), (b_start, b_end) = fx.src.span(args[i]), fx.src.span(args[j])
            swapped = text[b_start:b_end] + text[a_end:b_start] + text[a_start:a_end]
            yield a_start, b_end, swapped, f"swap positional arguments {i + 1} and {j + 1}"


def _wrong_variable(fx: _Function) -> Iterator[_Site]:
    for v in fx.of(ast.Name):
        if not isinstance(v.node.ctx, ast.Load):
            continue
        names = fx.in_scope(v.node, v.scoped)
        if v.node.id not in names:
            continue  # a global, builtin or not-yet-bound name: not a local site
        start, end = fx.src.span(v.node)
        for name in names:
            if name != v.node.id and fx.compatible(name, v.node.id):
                yield start, end, name, f"variable {v.node.id!r} -> {name!r}"


def _wrong_return(fx: _Function) -> Iterator[_Site]:
    """``return x`` / ``return True`` <-> ``return None``, and ``return e`` <-> ``return not e``.

    Only values a fixer can name from the buggy code become ``None`` (a local in scope, or a bool),
    so ``return None`` -> each of those is the complete inverse.
    """
    for v in fx.of(ast.Return):
        value = v.node.value
        if value is None:
            continue
        start, end = fx.src.span(value)
        if isinstance(value, ast.Constant) and value.value is None:
            for name in (*fx.in_scope(value, v.scoped), "True", "False"):
                yield start, end, name, f"return None -> {name}"
            continue
        local = isinstance(value, ast.Name) and value.id in fx.in_scope(value, v.scoped)
        if local or isinstance(value, ast.Constant) and isinstance(value.value, bool):
            yield start, end, "None", "return value -> None"
        yield from _negations(fx, value, skip=_NEVER_BOOL)


_OPERATOR_SITES = {
    "comparison_swap": _comparison_swap,
    "arithmetic_swap": _arithmetic_swap,
    "boolean_swap": _boolean_swap,
    "negate_condition": _negate_condition,
    "range_off_by_one": _range_off_by_one,
    "slice_index": _slice_index,
    "constant_change": _constant_change,
    "drop_statement": _drop_statement,
    "swap_call_args": _swap_call_args,
    "wrong_variable": _wrong_variable,
    "wrong_return": _wrong_return,
}
assert tuple(_OPERATOR_SITES) == OPERATORS


# ---------------------------------------------------------------- enumeration


def _select(src: _Source, qualnames: Sequence[str] | None) -> list[tuple[str, ast.AST]]:
    index = _function_index(src.tree)
    if qualnames is None:
        qualnames = list(index)
    for name in qualnames:
        if name not in index:
            close = difflib.get_close_matches(name, list(index), n=3)
            known = ", ".join(close or index) or "none"
            hint = f"; did you mean {known}?" if close else f"; known: {known}"
            raise EnvError(f"no function {name!r} in module{hint}")
    return [(name, fn) for name in dict.fromkeys(qualnames) for fn in index[name]]


def _edits(src: _Source, qualnames: Sequence[str] | None, operators: Sequence[str]) -> list[_Edit]:
    unknown = sorted(set(operators) - set(OPERATORS))
    if unknown:
        raise EnvError(f"unknown mutation operator(s) {unknown}; known: {', '.join(OPERATORS)}")
    edits = []
    for qualname, fn in _select(src, qualnames):
        fx = _Function(src, fn, qualname)
        for op in operators:
            for start, end, new, description in _OPERATOR_SITES[op](fx):
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


def _checked(src: _Source, edits: list[_Edit], file: str, *, dedupe_by: str) -> list[Mutation]:
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
            tree = ast.parse(mutated_chunk)
        except (SyntaxError, ValueError):
            continue
        if no_op_possible:
            if e.chunk not in baselines:
                baselines[e.chunk] = ast.dump(ast.parse(prefix + text[start:end]))
            if ast.dump(tree) == baselines[e.chunk]:
                continue
        if dedupe_by == "ast" and site in kept:
            dump = ast.dump(tree)
            if any(dump == ast.dump(ast.parse(t)) for t in kept[site]):
                continue
        kept.setdefault(site, []).append(mutated_chunk)
        seen_text.add((e.chunk, mutated_chunk))
        out.append(_to_mutation(src, e, file))
    return out


def _to_mutation(src: _Source, e: _Edit, file: str) -> Mutation:
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
    src = _Source(source)
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
    src = _Source(buggy_source)
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

"""Scope analysis of a module's functions for the mutation operators in :mod:`.mutate`.

:class:`Source` is a parsed module with character offsets for AST positions and an index of operator
tokens; :class:`Function` is one function being mutated: the nodes of its body in field order, the
locals bound before each node with a coarse kind, and the text chunk that parses on its own.
"""

from __future__ import annotations

import ast
import bisect
import io
import itertools
import re
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell import python_ast
from aios_rl.envs.shell.patches import split_lines


class Source:
    """A parsed module with character offsets for AST positions and an operator-token index."""

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            self.tree = python_ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            raise EnvError(f"cannot parse module source: {exc}") from exc
        lone_cr = re.search(r"\r(?!\n)", text)
        if lone_cr:  # Python ends a line there too, so AST positions would not match the "\n" lines
            line = text.count("\n", 0, lone_cr.start()) + 1
            raise EnvError(f"module source has a lone carriage return on line {line} (only \\n and \\r\\n "
                           "line endings are supported); convert its line endings to edit it")
        self.lines = split_lines(text)
        self.line_starts = list(itertools.accumulate((len(x) for x in self.lines), initial=0))
        self.tokens: list[tuple[int, int, str]] = []  # (start, end, string) of OP/NAME tokens but parens
        self._token_starts: list[int] = []
        self._tokenized: set[tuple[int, int, str]] = set()

    def tokenize(self, chunk: tuple[int, int, str]) -> None:
        """Index the operator tokens of one function's text (``chunk`` as in :class:`Function`).

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
        bom = len(python_ast.BOM) if lineno == 1 and line.startswith(python_ast.BOM) else 0  # not parsed
        line = line[bom:]
        col = col_bytes if line.isascii() else len(line.encode()[:col_bytes].decode(errors="replace"))
        return self.line_starts[lineno - 1] + bom + col

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

FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Pos = tuple[int, int]  # (lineno, byte column), compared to order bindings and uses


def _end(node: ast.AST) -> _Pos:
    return node.end_lineno, node.end_col_offset


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def iter_functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(qualname, node)`` of every function and method in ``tree``, outer before inner, in source order.

    Names follow Python's ``__qualname__``: ``f``, ``Class.method``, ``outer.<locals>.inner``.
    """
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, FUNCTION_DEFS):
            yield child.name, child
            yield from ((f"{child.name}.<locals>.{name}", node) for name, node in iter_functions(child))
        elif isinstance(child, ast.ClassDef):
            yield from ((f"{child.name}.{name}", node) for name, node in iter_functions(child))
        elif isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            yield from iter_functions(child)


def function_index(tree: ast.Module) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Functions by Python ``__qualname__``, in source order (a name can repeat, e.g. property setters)."""
    found: dict[str, list] = {}
    for name, node in iter_functions(tree):
        found.setdefault(name, []).append(node)
    return found


def function_qualnames(source: str) -> list[str]:
    """Qualified names of all functions and methods of a module, in source order.

    Names follow Python's ``__qualname__``: ``f``, ``Class.method``, ``outer.<locals>.inner``.

    Raises:
        EnvError: if the source does not parse.
    """
    return list(function_index(Source(source).tree))


@dataclass(frozen=True)
class _Visit:
    node: ast.AST
    parent: ast.AST
    stmt: ast.stmt
    scoped: frozenset[str]  # names bound by enclosing comprehensions and lambdas
    nested: bool  # inside a comprehension or lambda


_NOT_WALKED = (*FUNCTION_DEFS, ast.ClassDef, ast.JoinedStr)


def _walk(fn: ast.AST) -> list[_Visit]:
    """Nodes of a function body in field order; nested defs, classes, f-strings and annotations skipped.

    f-strings are skipped because their inner positions are unreliable before Python 3.12;
    annotations because mutating them cannot change behaviour.
    """
    out: list[_Visit] = []

    def visit(node: ast.AST, parent: ast.AST, stmt: ast.stmt, scoped: frozenset[str], nested: bool) -> None:
        stmt = node if isinstance(node, ast.stmt) else stmt
        out.append(_Visit(node, parent, stmt, scoped, nested))
        if isinstance(node, COMPREHENSIONS):
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
        if not isinstance(stmt, (*FUNCTION_DEFS, ast.ClassDef)):
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


class Function:
    """One function being mutated: its nodes, locals and the text chunk that parses on its own.

    Locals get a coarse kind (number, str, list, ...) from annotations and obvious bindings
    (``acc = 0``, ``for i in range(n)``); ``wrong_variable`` only exchanges names whose kinds do not
    conflict. The relation depends on bindings alone, which the operator never changes, so it stays
    closed under inversion while cutting the candidates that would only raise a TypeError.
    """

    _HIDDEN = frozenset({"self", "cls"})  # replacing self/cls is noise, so never a site nor a candidate

    def __init__(self, src: Source, fn: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str) -> None:
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

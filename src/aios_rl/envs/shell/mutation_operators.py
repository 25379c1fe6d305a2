"""The mutation operators of :mod:`.mutate`: one site generator per operator name.

Each generator takes a :class:`~.mutation_scope.Function` and yields ``(start, end, replacement,
description)`` sites as absolute character offsets into the module text; :data:`OPERATOR_SITES` maps
operator names to them in :data:`~.mutate.OPERATORS` order. Whether a site's mutant parses and
changes the AST is decided by the caller.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation

from aios_rl.envs.shell.mutation_scope import COMPREHENSIONS, FUNCTION_DEFS, Function

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
               *COMPREHENSIONS)  # fmt: skip
_NOT_INDEX = (ast.Tuple, ast.Slice, ast.Starred, ast.JoinedStr, ast.Dict, ast.Set, ast.List, ast.Lambda,
              *COMPREHENSIONS)  # fmt: skip


def _comparison_swap(fx: Function) -> Iterator[_Site]:
    for v in fx.of(ast.Compare):
        operands = [v.node.left, *v.node.comparators]
        for left, right in itertools.pairwise(operands):
            op = fx.src.op_between(left, right)
            for new in _COMPARE_SWAPS.get(op[2], ()) if op else ():
                yield op[0], op[1], new, f"comparison {op[2]!r} -> {new!r}"


def _arithmetic_swap(fx: Function) -> Iterator[_Site]:
    for v in fx.of(ast.BinOp, ast.AugAssign):
        binop = isinstance(v.node, ast.BinOp)
        op = fx.src.op_between(*((v.node.left, v.node.right) if binop else (v.node.target, v.node.value)))
        if op is None:
            continue
        suffix = "=" if isinstance(v.node, ast.AugAssign) else ""
        for new in _ARITH_SWAPS.get(op[2].removesuffix(suffix), ()) if op[2].endswith(suffix) else ():
            yield op[0], op[1], new + suffix, f"operator {op[2]!r} -> {new + suffix!r}"


def _boolean_swap(fx: Function) -> Iterator[_Site]:
    for v in fx.of(ast.BoolOp):
        for left, right in itertools.pairwise(v.node.values):
            op = fx.src.op_between(left, right)
            if op and op[2] in ("and", "or"):
                new = "or" if op[2] == "and" else "and"
                yield op[0], op[1], new, f"boolean {op[2]!r} -> {new!r}"


def _negations(fx: Function, test: ast.expr, *, skip: tuple[type, ...] = ()) -> Iterator[_Site]:
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


def _negate_condition(fx: Function) -> Iterator[_Site]:
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


def _plus_minus_one(fx: Function, node: ast.expr) -> Iterator[_Site]:
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


def _range_off_by_one(fx: Function) -> Iterator[_Site]:
    for v in fx.of(ast.Call):
        call = v.node
        if not (isinstance(call.func, ast.Name) and call.func.id == "range") or call.keywords:
            continue
        if 1 <= len(call.args) <= 3 and not any(isinstance(a, ast.Starred) for a in call.args):
            for bound in call.args[:2]:  # start and stop; a changed step is a different bug
                yield from _plus_minus_one(fx, bound)


def _slice_index(fx: Function) -> Iterator[_Site]:
    for v in fx.of(ast.Subscript):
        index = v.node.slice
        bounds = [index.lower, index.upper] if isinstance(index, ast.Slice) else [index]
        bounds = [b for b in bounds if b is not None]
        for bound in bounds:
            yield from _plus_minus_one(fx, bound)


def _format_number(value: int | float | Decimal) -> str:
    text = str(value)
    return text if isinstance(value, int) or any(c in text for c in ".eEn") else f"{text}.0"


def _constant_change(fx: Function) -> Iterator[_Site]:
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
        # A bare negative would re-associate as the base of ** or of .attr / [i] / (...):
        # -1 ** x is -(1 ** x).
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


def _drop_statement(fx: Function) -> Iterator[_Site]:
    src = fx.src
    for owner in (fx.fn, *(v.node for v in fx.visits)):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(owner, field, None)
            if not isinstance(block, list) or owner is not fx.fn and isinstance(owner, FUNCTION_DEFS):
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


def _swap_call_args(fx: Function) -> Iterator[_Site]:
    text = fx.src.text
    for v in fx.of(ast.Call):
        args = [a for a in v.node.args if not isinstance(a, ast.Starred)]
        for i, j in itertools.combinations(range(len(args)), 2):
            if ast.dump(args[i]) == ast.dump(args[j]):
                continue  # swapping equal arguments changes nothing
            (a_start, a_end), (b_start, b_end) = fx.src.span(args[i]), fx.src.span(args[j])
            swapped = text[b_start:b_end] + text[a_end:b_start] + text[a_start:a_end]
            yield a_start, b_end, swapped, f"swap positional arguments {i + 1} and {j + 1}"


def _wrong_variable(fx: Function) -> Iterator[_Site]:
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


def _wrong_return(fx: Function) -> Iterator[_Site]:
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


OPERATOR_SITES = {
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

"""Parse external input into contract records, reporting every problem on its own line.

Each problem line names the field path, the bad value and what was expected, e.g.::

    trajectory.0.reward: got nan; expected a finite number
"""

from __future__ import annotations

import json
import math
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from aios_rl.contracts.errors import ContractError

M = TypeVar("M", bound=BaseModel)

_MAX_VALUE_CHARS = 80


def _show(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


def _expected(error: dict[str, Any]) -> str:
    kind = error["type"]
    if kind == "missing":
        return "a value (the field is required)"
    if kind == "extra_forbidden":
        return "no such field (unknown fields are not allowed)"
    if kind == "finite_number":
        return "a finite number"
    msg = str(error["msg"])
    return msg[0].lower() + msg[1:] if msg else kind


def problems_from(error: ValidationError) -> list[str]:
    """One line per pydantic error: ``path: got VALUE; expected WHAT``."""
    lines = []
    for err in error.errors():
        path = ".".join(str(part) for part in err["loc"]) or "<root>"
        got = "nothing" if err["type"] == "missing" else _show(err.get("input"))
        lines.append(f"{path}: got {got}; expected {_expected(err)}")
    return lines


def bool_as_number(annotation: Any, value: Any, checks_itself: type[BaseModel] | None = None) -> bool:
    """Whether ``value`` holds a boolean (at any depth of lists and nested records) where ``annotation``
    expects a number: pydantic's lax mode would read true as 1 and false as 0. Nested records of type
    ``checks_itself`` are not looked into (they check their own fields)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return bool_as_number(args[0], value, checks_itself)
    arms = args if origin in (Union, types.UnionType) else (annotation,)
    if isinstance(value, bool):
        return bool not in arms and any(arm in (int, float) for arm in arms)
    if origin in (Union, types.UnionType):
        return any(bool_as_number(arm, value, checks_itself) for arm in arms)
    if origin in (tuple, list) and isinstance(value, (list, tuple)):
        items = args[:1] * len(value) if origin is list or args[-1:] == (...,) else args
        return any(bool_as_number(item, v, checks_itself) for item, v in zip(items, value, strict=False))
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return any(bool_as_number(args[1], v, checks_itself) for v in value.values())
    record = isinstance(annotation, type) and issubclass(annotation, BaseModel)
    if record and not (checks_itself and issubclass(annotation, checks_itself)) and isinstance(value, dict):
        fields = annotation.model_fields
        return any(bool_as_number(fields[k].annotation, v, checks_itself)
                   for k, v in value.items() if k in fields)
    return False


def parse_record(model: type[M], data: Any, *, source: str = "input") -> M:
    """Validate already-decoded data against ``model``; a boolean where a number belongs is refused.

    Raises:
        ContractError: with one problem line per violation.
    """
    problems = [f"{key}: got a boolean (true/false) where a number belongs; expected a number"
                for key, field in model.model_fields.items()
                if isinstance(data, dict) and key in data and bool_as_number(field.annotation, data[key])]
    if problems:  # checked here, on input, not by a validator that every stored record would pay for
        raise ContractError(f"{source} is not a valid {model.__name__}", problems)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ContractError(f"{source} is not a valid {model.__name__}", problems_from(exc)) from None


def _unique_keys(pairs: list[tuple[str, Any]], source: str) -> dict[str, Any]:
    """A decoded JSON object, refusing a key given twice: ``json.loads`` keeps the last value without a
    word, so one of two values the author wrote would silently not count (as YAML config files refuse)."""
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            problem = (f"<json>: got duplicate key {key!r} in one object; expected each key once "
                       "(JSON readers keep only the last value)")
            raise ContractError(f"{source} is not valid JSON", [problem])
        obj[key] = value
    return obj


def parse_json_record(model: type[M], text: str, *, source: str = "input") -> M:
    """Decode JSON text (NaN and Infinity tokens are decoded, then rejected by the model) and validate it.

    Raises:
        ContractError: for malformed JSON (naming line and column), a key given twice in one object, JSON
            the decoder refuses (an integer of more than 4300 digits, nesting deeper than the recursion
            limit) or any contract violation.
    """
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(pairs, source))
    except json.JSONDecodeError as exc:
        problem = f"<json>: got malformed JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); expected a complete JSON document"
        raise ContractError(f"{source} is not valid JSON", [problem]) from None
    except ValueError as exc:  # well-formed, but an integer longer than Python converts (4300 digits)
        problem = f"<json>: got a value the JSON decoder refuses ({exc}); expected at most 4300 digits"
        raise ContractError(f"{source} is not valid JSON", [problem]) from None
    except RecursionError:
        problem = "<json>: got arrays or objects nested deeper than the decoder follows; expected less depth"
        raise ContractError(f"{source} is not valid JSON", [problem]) from None
    return parse_record(model, data, source=source)

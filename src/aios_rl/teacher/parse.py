"""Find the teacher's JSON object in a model reply and validate it into TeacherSignal fields.

Models wrap JSON in prose, code fences and trailing remarks, so extraction is lenient and validation is
strict. The reply must hold one JSON object with these keys (the prompt asks for exactly this)::

    {"critique": str, "reference_actions": [str, ...], "shaping": number, "confidence": number,
     "boundary": bool}

Extraction (:func:`extract_object`), first match wins:

1. the first ```` ```json ```` (or bare ```` ``` ````) fenced block that decodes to an object holding a
   ``shaping`` key;
2. else the first bare ``{...}`` in the text that decodes to an object holding ``shaping`` (a fenced
   example of something else, such as a command's options, does not hide the answer after it);
3. else the first fenced object, then the first bare object at all. Decoding uses
   :meth:`json.JSONDecoder.raw_decode`, so braces inside JSON strings and text after the object are handled,
   and nested objects are skipped as a whole.

Validation (:func:`validate_answer`) — a violation makes the reply invalid, nothing is guessed:

- ``shaping`` (required): a finite number in [-1, 1]. Out of range is **invalid, not clamped**: a teacher
  that answers 5 did not use our scale, and clamping would turn its confusion into a maximal reward.
- ``confidence`` (required): a finite number in [0, 1]; out of range is invalid for the same reason.
- ``critique`` (optional, default ""): a string; truncated to :data:`MAX_CRITIQUE_CHARS` (clamped, since
  length carries no meaning).
- ``reference_actions`` (optional, default []): a list of strings (``null`` means []); only the first
  :data:`MAX_REFERENCE_ACTIONS` are kept, each truncated to :data:`MAX_ACTION_CHARS`.
- ``boundary`` (optional, default false): a JSON boolean.
- Booleans are not numbers here (``"shaping": true`` is invalid) and numeric strings are not numbers.
- Unknown extra keys are ignored: models like to add ``"reasoning"``, which carries nothing we store.
- Strings are made valid UTF-8: a ``\\u`` escape spelling half a surrogate pair decodes to a lone
  surrogate, which the episode store cannot encode, so each one becomes ``?``.

Nothing in this module raises for any input: :func:`parse_reply` takes arbitrary ``str`` or ``bytes``
and returns a :class:`TeacherAnswer` or a :class:`ReplyProblem`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "MAX_ACTION_CHARS",
    "MAX_CRITIQUE_CHARS",
    "MAX_REFERENCE_ACTIONS",
    "MAX_REPLY_CHARS",
    "ReplyProblem",
    "TeacherAnswer",
    "extract_object",
    "parse_reply",
    "utf8_text",
    "validate_answer",
]

MAX_REPLY_CHARS = 200_000
MAX_CRITIQUE_CHARS = 4_000
MAX_REFERENCE_ACTIONS = 8
MAX_ACTION_CHARS = 8_000
# Each failed raw_decode may scan to the end of the text; bounding the attempts bounds the work on
# adversarial replies made of thousands of unclosed braces.
_MAX_DECODE_ATTEMPTS = 64
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class TeacherAnswer:
    """A validated teacher answer: the payload fields of a TeacherSignal."""

    critique: str = ""
    reference_actions: list[str] = field(default_factory=list)
    shaping: float = 0.0
    confidence: float = 0.0
    boundary: bool = False
    step_reference_actions: list[list[str]] = field(default_factory=list)  # the oracle's; replies have none


@dataclass(frozen=True)
class ReplyProblem:
    """Why a reply is not a valid teacher answer.

    Attributes:
        kind: ``no_json`` (no JSON object found) or ``wrong_schema`` (an object, but not ours).
        reason: one line naming the field, the value and what was expected.
    """

    kind: Literal["no_json", "wrong_schema"]
    reason: str


def parse_reply(reply: str | bytes) -> TeacherAnswer | ReplyProblem:
    """Extract and validate the teacher object from a model reply. Never raises.

    Example:
        >>> parse_reply('Sure!\\n```json\\n{"shaping": 0.5, "confidence": 0.9}\\n```').shaping
        0.5
    """
    text = reply.decode("utf-8", errors="replace") if isinstance(reply, bytes | bytearray) else str(reply)
    if len(text) > MAX_REPLY_CHARS:
        return ReplyProblem("no_json", f"reply has {len(text)} characters; expected <= {MAX_REPLY_CHARS}")
    found = extract_object(text)
    if found is None:
        return ReplyProblem("no_json", f"no JSON object in the reply (starts {_show(text.strip()[:60])})")
    return validate_answer(found)


def extract_object(text: str) -> dict[str, Any] | None:
    """The teacher's JSON object in ``text`` (see the module docstring for the order), or None."""
    fenced, bare = _objects_in_blocks(_fenced_blocks(text)), _objects_in(text)
    answer = next((c for c in (*fenced, *bare) if "shaping" in c), None)
    if answer is not None:
        return answer
    return (fenced or bare or [None])[0]


def _fenced_blocks(text: str) -> list[str]:
    """The bodies of closed ```` ``` ```` fences (the info string after the opening fence is dropped)."""
    parts = text.split("```")
    # parts[1], parts[3], ... lie between an opening and a closing fence; an unclosed last fence is not one.
    inside = parts[1:-1:2] if len(parts) % 2 == 1 else parts[1:-2:2]
    return [block.split("\n", 1)[1] if "\n" in block else block for block in inside]


def _objects_in_blocks(blocks: list[str]) -> list[dict[str, Any]]:
    return [obj for block in blocks for obj in _objects_in(block)]


def _objects_in(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object decodable from some ``{`` of ``text``, in order (bounded attempts)."""
    found: list[dict[str, Any]] = []
    pos, attempts = text.find("{"), 0
    while pos != -1 and attempts < _MAX_DECODE_ATTEMPTS:
        attempts += 1
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; deep nesting recurses
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        pos = text.find("{", max(end, pos + 1))
    return found


def validate_answer(obj: Any) -> TeacherAnswer | ReplyProblem:
    """Check a decoded object against the teacher schema (rules in the module docstring). Never raises."""
    if not isinstance(obj, dict):
        return ReplyProblem("wrong_schema", f"<root>: got {type(obj).__name__}; expected a JSON object")
    problems: list[str] = []
    shaping = _number(obj, "shaping", -1.0, 1.0, problems)
    confidence = _number(obj, "confidence", 0.0, 1.0, problems)
    critique = obj.get("critique", "")
    if critique is None:
        critique = ""
    if not isinstance(critique, str):
        problems.append(f"critique: got {_show(critique)}; expected a string")
        critique = ""
    actions = obj.get("reference_actions", [])
    if actions is None:
        actions = []
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        problems.append(f"reference_actions: got {_show(actions)}; expected a list of strings")
        actions = []
    boundary = obj.get("boundary", False)
    if not isinstance(boundary, bool):
        problems.append(f"boundary: got {_show(boundary)}; expected true or false")
    if problems:
        return ReplyProblem("wrong_schema", "; ".join(problems))
    return TeacherAnswer(
        critique=utf8_text(critique[:MAX_CRITIQUE_CHARS]),
        reference_actions=[utf8_text(a[:MAX_ACTION_CHARS]) for a in actions[:MAX_REFERENCE_ACTIONS]],
        shaping=float(shaping),
        confidence=float(confidence),
        boundary=bool(boundary),
    )


def _number(obj: dict[str, Any], key: str, low: float, high: float, problems: list[str]) -> float:
    if key not in obj:
        problems.append(f"{key}: got nothing; expected a number in [{low:g}, {high:g}] (required)")
        return 0.0
    value = obj[key]
    # bool is an int subclass in Python; JSON true must not pass as 1.
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(f"{key}: got {_show(value)}; expected a number in [{low:g}, {high:g}]")
        return 0.0
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        number = math.inf
    if not math.isfinite(number) or not low <= number <= high:
        problems.append(f"{key}: got {_show(value)}; expected a number in [{low:g}, {high:g}]")
        return 0.0
    return number


def utf8_text(text: str) -> str:
    """``text`` with every lone surrogate (from a JSON ``\\ud800``-style escape) replaced by ``?``."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    text = utf8_text(text)  # the reason is stored on the TeacherSignal
    return text if len(text) <= 60 else text[:57] + "..."

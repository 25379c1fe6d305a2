"""Extraction and validation of the teacher JSON object from model replies."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aios_rl.teacher.parse import (
    MAX_CRITIQUE_CHARS,
    MAX_REFERENCE_ACTIONS,
    ReplyProblem,
    TeacherAnswer,
    extract_object,
    parse_reply,
)

GOOD = {"critique": "ok", "reference_actions": ["read a.py"], "shaping": -0.25, "confidence": 0.5}
GOOD |= {"boundary": True}


def answer(reply: str | bytes) -> TeacherAnswer:
    parsed = parse_reply(reply)
    assert isinstance(parsed, TeacherAnswer), parsed
    return parsed


def problem(reply: str | bytes) -> ReplyProblem:
    parsed = parse_reply(reply)
    assert isinstance(parsed, ReplyProblem), parsed
    return parsed


def test_bare_object_with_prose_and_trailing_text() -> None:
    got = answer(f"My verdict: {json.dumps(GOOD)} -- let me know if {{you}} need more.")
    assert got == TeacherAnswer("ok", ["read a.py"], -0.25, 0.5, True)


def test_fenced_block_wins_over_an_earlier_bare_object() -> None:
    example = '{"shaping": 0.9, "confidence": 0.9}'
    reply = f"The format is like {example}.\n```json\n{json.dumps(GOOD)}\n```\nDone."
    assert answer(reply).shaping == -0.25


def test_object_with_the_shaping_key_wins_over_other_objects() -> None:
    reply = 'Context: {"file": "a.py"} and then ' + json.dumps(GOOD)
    assert answer(reply).confidence == 0.5


def test_braces_and_fences_inside_strings_and_nested_objects() -> None:
    obj = GOOD | {"critique": 'use {"x": 1} and ``` fences }}', "reference_actions": ['patch\n{"a": {}}']}
    obj |= {"details": {"nested": {"deep": [1, {"x": "}"}]}}}
    got = answer("noise } { before " + json.dumps(obj) + " } trailing {")
    assert got.critique == obj["critique"] and got.reference_actions == obj["reference_actions"]


def test_unlabelled_fence_and_bytes_with_invalid_utf8() -> None:
    assert answer("```\n" + json.dumps(GOOD) + "\n```").boundary is True
    assert answer(b"\xff\xfe" + json.dumps(GOOD).encode() + b"\x80").shaping == -0.25


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"shaping": 1.5}, "shaping"),  # out of range is invalid, not clamped
        ({"shaping": -1.0001}, "shaping"),
        ({"shaping": True}, "shaping"),  # JSON true is not the number 1
        ({"shaping": "0.5"}, "shaping"),
        ({"confidence": 1.2}, "confidence"),
        ({"confidence": None}, "confidence"),
        ({"critique": 7}, "critique"),
        ({"reference_actions": "read a.py"}, "reference_actions"),
        ({"reference_actions": [1, 2]}, "reference_actions"),
        ({"boundary": 1}, "boundary"),
    ],
)
def test_wrong_values_are_wrong_schema(patch: dict[str, object], field: str) -> None:
    got = problem(json.dumps(GOOD | patch))
    assert got.kind == "wrong_schema" and got.reason.startswith(field)


def test_missing_required_fields_and_defaults() -> None:
    assert problem('{"critique": "x", "confidence": 0.5}').reason.startswith("shaping: got nothing")
    assert problem('{"shaping": 0.5}').reason.startswith("confidence: got nothing")
    minimal = answer('{"shaping": 1, "confidence": 0, "critique": null, "reference_actions": null, "why": 3}')
    assert minimal == TeacherAnswer("", [], 1.0, 0.0, False)


def test_non_finite_numbers_are_invalid() -> None:
    assert problem('{"shaping": NaN, "confidence": 0.5}').kind == "wrong_schema"
    assert problem('{"shaping": 0.1, "confidence": Infinity}').kind == "wrong_schema"
    assert problem('{"shaping": 1e999, "confidence": 0.5}').kind == "wrong_schema"
    assert problem('{"shaping": ' + "9" * 400 + ', "confidence": 0.5}').kind == "wrong_schema"


def test_long_fields_are_truncated() -> None:
    obj = GOOD | {"critique": "c" * (MAX_CRITIQUE_CHARS + 10), "reference_actions": list("abcdefghijkl")}
    got = answer(json.dumps(obj))
    assert len(got.critique) == MAX_CRITIQUE_CHARS
    assert got.reference_actions == list("abcdefghijkl")[:MAX_REFERENCE_ACTIONS]


@pytest.mark.parametrize(
    "reply", ["", "no json here", "[1, 2, 3]", '"a string"', "{not: json}", "```json\n```", "{" * 5000]
)
def test_no_object_is_no_json(reply: str) -> None:
    assert problem(reply).kind == "no_json"


def test_deep_nesting_does_not_recurse_out() -> None:
    assert problem('{"a": ' + "[" * 50_000 + "]" * 50_000 + "}").kind == "no_json"
    assert problem('{"a":' * 20_000 + "1" + "}" * 20_000).kind == "no_json"  # under MAX_REPLY_CHARS


def test_extract_object_returns_first_object_without_shaping() -> None:
    assert extract_object('x {"a": 1} y {"b": 2}') == {"a": 1}
    assert extract_object("nothing") is None


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=3000), st.text(max_size=3000),
                 st.text(alphabet='{}[]":,\\`0123456789.-e truefalsnul\n', max_size=400)))
def test_parse_never_raises(reply: str | bytes) -> None:
    got = parse_reply(reply)
    assert isinstance(got, TeacherAnswer | ReplyProblem)
    if isinstance(got, TeacherAnswer):
        assert -1 <= got.shaping <= 1 and 0 <= got.confidence <= 1


def test_a_fenced_object_without_shaping_does_not_hide_the_bare_answer() -> None:
    reply = 'Run it with\n```json\n{"timeout": 5}\n```\nMy verdict: {"shaping": 0.5, "confidence": 0.8}'
    answer = parse_reply(reply)
    assert isinstance(answer, TeacherAnswer) and answer.shaping == 0.5


def test_lone_surrogate_escapes_in_strings_become_utf8_safe_text() -> None:
    # A JSON \u escape can spell half a surrogate pair: json decodes it to a lone surrogate, which the
    # episode store cannot encode (model_dump_json raises). The answer's text must be plain UTF-8.
    reply = ('{"shaping": 0.5, "confidence": 0.5, "critique": "bad \\ud83d end", '
             '"reference_actions": ["x\\udcff"]}')
    got = answer(reply)
    got.critique.encode("utf-8")
    for action in got.reference_actions:
        action.encode("utf-8")
    assert got.critique.startswith("bad ") and got.critique.endswith(" end")


def test_a_problem_quoting_a_lone_surrogate_is_utf8_safe() -> None:
    # The reason ends up in TeacherSignal.error, stored with the episode.
    problem('{"shaping": "\\ud800", "confidence": 0.5}').reason.encode("utf-8")

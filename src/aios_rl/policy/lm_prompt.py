"""Chat prompts and JSON actions of the causal-LM student (ARCHITECTURE §7).

The student speaks to the model in two messages: a system message that fixes the action format (one JSON
object whose ``"action"`` key names the action) and a user message holding the observation text and, when
scoring candidates, the numbered admissible actions. The model's answer — the continuation after the
tokenizer's generation prompt — is the action.

Pure text helpers and one tokenizer-aware function (:func:`build_prompt_ids`, which left-truncates a long
observation so the prompt fits ``max_prompt_tokens``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

from aios_rl.contracts.errors import PolicyError

__all__ = [
    "TRUNCATION_MARK",
    "system_message",
    "user_message",
    "candidate_response",
    "parse_action_json",
    "is_json_action",
    "render_prompt",
    "build_prompt_ids",
]

TRUNCATION_MARK = "[... earlier text truncated ...]\n"

_FORMAT = (
    'Reply with exactly one JSON object and nothing else, for example {"action": "run", "command": "pytest -q"}. '
    'The "action" key names the action; any other keys are its arguments.'
)
_CHOOSE = (
    "Choose one of the numbered candidate actions and reply with it as "
    '{"action": "<the candidate, copied exactly>"}.'
)


def system_message(environment: str, with_candidates: bool) -> str:
    """The system message: who the model is and the JSON action format it must answer in."""
    text = f"You are an agent acting in the '{environment}' environment. {_FORMAT}"
    return f"{text} {_CHOOSE}" if with_candidates else text


def user_message(text: str, candidates: Sequence[str] = ()) -> str:
    """The observation text, followed by the candidates numbered from 1 when there are any."""
    if not candidates:
        return text
    listed = "\n".join(f"{i}. {candidate}" for i, candidate in enumerate(candidates, start=1))
    return f"{text}\n\nCandidate actions:\n{listed}"


def candidate_response(candidate: str) -> str:
    """The answer text that stands for choosing ``candidate`` in candidate-scoring mode.

    A candidate that already is a JSON action object (``{"action": ...}``) is its own answer; any other
    candidate text is wrapped as ``{"action": "<candidate>"}``.

    Example:
        >>> candidate_response("pytest -q")
        '{"action": "pytest -q"}'
    """
    try:
        loaded = json.loads(candidate)
    except json.JSONDecodeError:
        loaded = None
    if isinstance(loaded, dict) and "action" in loaded:
        return candidate
    return json.dumps({"action": candidate}, ensure_ascii=False)


def is_json_action(text: str) -> bool:
    """Whether ``text`` is what the system message asks for: one JSON object with a string ``"action"`` and
    nothing else, optionally inside one code fence (the shell environment accepts no more; prose or a second
    object around it is an invalid action there).

    Example:
        >>> is_json_action('```json\\n{"action": "stop"}\\n```'), is_json_action('{"action": "stop"} ok')
        (True, False)
    """
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and "\n" in body:  # a fence on one line stays text
        body = body[body.index("\n") + 1 : -3]  # after the fence's info string, e.g. json
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and isinstance(obj.get("action"), str)


def parse_action_json(text: str) -> dict[str, Any] | None:
    """The first JSON object with an ``"action"`` key found in ``text``, or None.

    Tolerates what models wrap around the object: code fences, leading prose, trailing text. Objects
    without an ``"action"`` key are skipped. Returns None for malformed JSON, for no object at all,
    and for an object whose only closing brace is missing — the environment then reports an invalid
    action and ``reward.invalid_action_penalty`` applies in reward fusion.

    Example:
        >>> parse_action_json('```json\\n{"action": "stop"}\\n```')
        {'action': 'stop'}
        >>> parse_action_json('{"action": "run", ') is None
        True
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: absurdly deep nesting
            start = text.find("{", start + 1)  # maybe an object starts later (or nested inside)
            continue
        if isinstance(obj, dict) and "action" in obj:
            return obj
        start = text.find("{", end)  # skip past a complete object that is not an action
    return None


def render_prompt(
    tokenizer: PreTrainedTokenizerBase, environment: str, text: str, candidates: Sequence[str]
) -> list[int]:
    """Token ids of the chat prompt, ending with the generation prompt (the assistant turn's header)."""
    system = system_message(environment, bool(candidates))
    user = user_message(text, candidates)
    if tokenizer.chat_template:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        # The template writes any BOS itself; letting the tokenizer add another would double it.
        return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    # Base models without a chat template get a plain transcript (and the tokenizer's own BOS, if any).
    plain = f"System: {system}\n\nUser: {user}\n\nAssistant:\n"
    return list(tokenizer(plain, add_special_tokens=True)["input_ids"])


def build_prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    environment: str,
    text: str,
    candidates: Sequence[str],
    max_tokens: int,
) -> tuple[list[int], bool]:
    """The prompt's token ids, left-truncating the observation text so at most ``max_tokens`` remain.

    The end of an observation (latest command output, latest test summary) matters most, so the start
    is dropped and replaced by :data:`TRUNCATION_MARK`. The system message and candidates are never cut.

    Returns:
        ``(ids, truncated)``.

    Raises:
        PolicyError: the prompt without any observation text already exceeds ``max_tokens``.
    """
    ids = render_prompt(tokenizer, environment, text, candidates)
    if len(ids) <= max_tokens:
        return ids, False
    text_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    keep = len(text_ids) - (len(ids) - max_tokens)
    # Decoding a token suffix and re-encoding it can change the count slightly (merges at the new
    # boundary, the mark's own tokens), so shrink until the whole prompt fits; keep falls every round.
    while keep > 0:
        kept_text = TRUNCATION_MARK + tokenizer.decode(text_ids[-keep:], clean_up_tokenization_spaces=False)
        ids = render_prompt(tokenizer, environment, kept_text, candidates)
        if len(ids) <= max_tokens:
            return ids, True
        keep -= len(ids) - max_tokens
    # A suffix cut inside a multi-byte character decodes to U+FFFD, which re-encodes to more tokens than
    # were kept, so the loop can step past every suffix that fits; the mark alone is the last resort.
    ids = render_prompt(tokenizer, environment, TRUNCATION_MARK, candidates)
    if len(ids) <= max_tokens:
        return ids, True
    raise PolicyError(
        f"the prompt needs {len(ids)} tokens before any observation text (system message and "
        f"{len(candidates)} candidates) but max_prompt_tokens is {max_tokens}; raise max_prompt_tokens"
    )

"""Teacher prompts: one template per environment family, plus a generic fallback.

Every prompt has the same three parts: what the student was asked (``task.prompt``), what it did (the
trajectory, truncated to a character budget keeping the **most recent** steps, because the end of an
episode is where it succeeded or went wrong) and what the verifier found (``episode.verification``).
It ends by asking for exactly the JSON object :mod:`aios_rl.teacher.parse` reads.

``task.oracle`` (reference patch, mutation metadata) is never put in a prompt: it is ground truth for the
oracle teacher and the verifier only, and an LLM judge that saw it would be an expensive oracle, not a
judge we can calibrate against one.

The whole prompt stays within ``budget_chars`` (default 12,000; budgets under about 5,000 can be exceeded
because the instructions, the evidence and at least one step are always included). CLI backends pass it
as one argv element, which Linux caps at 128 KiB, or on the tool's stdin when it is longer than that.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from aios_rl.contracts.episode import Episode, Step, Task

__all__ = ["ANSWER_SCHEMA", "PROMPTS", "build_prompt", "generic_prompt", "shell_prompt"]

ANSWER_SCHEMA = """Answer with exactly one JSON object and nothing else, with these keys:
{"critique": "<what the agent did well or badly, in at most five sentences>",
 "reference_actions": ["<the action(s) the agent should have taken next, in its action language>"],
 "shaping": <number from -1.0 (harmful or useless) to 1.0 (solved it the right way)>,
 "confidence": <number from 0.0 to 1.0: how sure you are of this judgement>,
 "boundary": <true if the case is borderline and should not be trained on, else false>}"""

_SHELL_ACTIONS = """The agent's action language (one action per step):
  read <path>                     show a file of the repository
  run <command>                   run an allowed read-only command or the task's test command
  patch\\n<unified diff>           apply a unified diff to the repository
  stop <message>                  end the episode"""

_HEADER = (
    "You are the teacher of a reinforcement-learning agent. Judge ONE finished episode: how good were "
    "the agent's actions, given the task and the verifier's objective evidence?"
)
_PROMPT_SHARE = 0.25  # of the budget for the task prompt; the trajectory gets what is left
_EVIDENCE_CHARS = 1_500
_ACTION_CHARS = 1_200
_OBSERVATION_CHARS = 600


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping the head and tail (where errors and results are)."""
    if len(text) <= limit:
        return text
    half = max(0, (limit - 30) // 2)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[len(text) - half:]}"


def _step_text(index: int, step: Step) -> str:
    flags = [k for k in ("invalid_action", "patch_applied") if step.info.get(k)]
    extra = f" [{', '.join(flags)}]" if flags else ""
    return (
        f"--- step {index} (reward {step.reward:+.2f}){extra}\n"
        f"observation: {_clip(step.observation.text, _OBSERVATION_CHARS)}\n"
        f"action: {_clip(step.action, _ACTION_CHARS)}"
    )


def trajectory_text(steps: list[Step], budget: int) -> str:
    """The trajectory as text within ``budget`` characters, keeping the most recent steps whole.

    Steps are numbered from 1 in the original order; a line says how many earlier steps were left out.
    """
    kept: list[str] = []
    used = 40  # room for the "[N earlier step(s) omitted]" line
    for index in range(len(steps), 0, -1):
        text = _step_text(index, steps[index - 1])
        if used + len(text) + 1 > budget and kept:
            break
        kept.append(_clip(text, max(100, budget - used)) if not kept else text)
        used += len(text) + 1
    omitted = len(steps) - len(kept)
    head = [f"[{omitted} earlier step(s) omitted]"] if omitted else []
    return "\n".join(head + kept[::-1]) if steps else "(no steps)"


def _evidence_text(episode: Episode) -> str:
    v = episode.verification
    if v is None:
        return f"outcome: {episode.outcome} (no verifier evidence)"
    facts = _clip(json.dumps(v.evidence, sort_keys=True, default=str), _EVIDENCE_CHARS)
    return f"outcome: {v.outcome}; verifier completed: {v.completed}\nevidence: {facts}"


def _assemble(task: Task, episode: Episode, budget: int, preamble: str) -> str:
    task_text = _clip(task.prompt, max(200, int(budget * _PROMPT_SHARE)))
    before = [_HEADER, preamble, f"TASK ({task.environment}/{task.family}):\n{task_text}"]
    after = [f"VERIFICATION:\n{_evidence_text(episode)}", ANSWER_SCHEMA]
    title = f"TRAJECTORY ({len(episode.trajectory)} steps):\n"
    fixed = sum(len(p) + 2 for p in before + after) + len(title)
    # The trajectory gets what the fixed parts leave, but never so little that no step fits.
    body = trajectory_text(list(episode.trajectory), max(400, budget - fixed))
    return "\n\n".join(p for p in [*before, title + body, *after] if p)


def shell_prompt(task: Task, episode: Episode, budget: int) -> str:
    """Prompt for ``shell`` bug-fix episodes: the agent edits a repository until its failing tests pass."""
    preamble = (
        "The agent works in a Python repository with a bug; its goal is to make the failing target tests "
        "pass without breaking others. Evidence keys: target_unresolved (target tests still failing), "
        "new_failures (tests that passed before and fail now), unrelated_files_modified.\n" + _SHELL_ACTIONS
    )
    return _assemble(task, episode, budget, preamble)


def generic_prompt(task: Task, episode: Episode, budget: int) -> str:
    """Prompt for any environment without its own template."""
    return _assemble(task, episode, budget, "")


PromptBuilder = Callable[[Task, Episode, int], str]
PROMPTS: dict[str, PromptBuilder] = {"shell": shell_prompt}


def build_prompt(task: Task, episode: Episode, *, budget_chars: int = 12_000) -> str:
    """The teacher prompt for ``episode`` of ``task``, by environment family (generic when unknown)."""
    builder = PROMPTS.get(task.environment, generic_prompt)
    return builder(task, episode, budget_chars)


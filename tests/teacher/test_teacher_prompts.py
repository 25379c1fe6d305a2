"""Teacher prompts: per-family templates, recent-steps truncation, budget, no oracle leakage."""

from __future__ import annotations

import pytest
from teacher_fakes import make_episode, make_task

from aios_rl.teacher.prompts import ANSWER_SCHEMA, build_prompt, trajectory_text


def test_shell_prompt_holds_task_trajectory_evidence_and_schema() -> None:
    task = make_task(prompt="Fix the failing test in calc.py.")
    prompt = build_prompt(task, make_episode(task, outcome="failure", steps=3))
    assert "Fix the failing test in calc.py." in prompt
    assert "--- step 3" in prompt and "read file_2.py" in prompt and "[patch_applied]" in prompt
    assert "outcome: failure" in prompt and '"tests_failed": 7' in prompt
    assert "read <path>" in prompt  # the shell action language is explained
    assert prompt.endswith(ANSWER_SCHEMA)


def test_generic_prompt_for_other_environments() -> None:
    task = make_task(environment="browser")
    prompt = build_prompt(task, make_episode(task))
    assert "TASK (browser/failing_tests)" in prompt and "read <path>" not in prompt
    assert prompt.endswith(ANSWER_SCHEMA)


def test_oracle_payload_never_reaches_the_prompt() -> None:
    task = make_task()
    assert "SECRET-REFERENCE-PATCH" not in build_prompt(task, make_episode(task))


def test_long_trajectories_keep_the_most_recent_steps_within_budget() -> None:
    task = make_task()
    episode = make_episode(task, steps=200, action_chars=300)
    prompt = build_prompt(task, episode, budget_chars=8_000)
    assert len(prompt) <= 8_000
    assert "--- step 200" in prompt and "--- step 1 " not in prompt
    kept = [n for n in range(1, 201) if f"--- step {n} " in prompt]
    assert kept == list(range(kept[0], 201))  # a contiguous tail
    assert f"[{kept[0] - 1} earlier step(s) omitted]" in prompt


def test_trajectory_text_keeps_at_least_the_last_step_clipped() -> None:
    task = make_task()
    episode = make_episode(task, steps=3, action_chars=5_000)
    text = trajectory_text(list(episode.trajectory), 1_500)
    assert "--- step 3" in text and "--- step 2" not in text and "characters cut" in text
    assert len(text) <= 1_600
    assert trajectory_text([], 100) == "(no steps)"


@pytest.mark.parametrize("budget", [5_000, 12_000, 40_000])
@pytest.mark.parametrize(
    ("steps", "action_chars", "prompt_chars"), [(1, 50_000, 10), (50, 2_000, 50_000), (400, 10, 100)]
)
def test_budget_is_respected(budget: int, steps: int, action_chars: int, prompt_chars: int) -> None:
    task = make_task(prompt="p" * prompt_chars)
    episode = make_episode(task, steps=steps, action_chars=action_chars)
    prompt = build_prompt(task, episode, budget_chars=budget)
    assert len(prompt) <= budget and f"--- step {steps} " in prompt

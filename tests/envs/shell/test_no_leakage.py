"""The student never sees the oracle: observations are the same with and without it, and never quote it.

Two task directories hold the same buggy repository; one manifest carries the reference patch and
metadata, the other has them removed. The same action sequence runs on both, in the real sandbox.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aios_rl.contracts.episode import Observation, Task
from aios_rl.envs.base import find_oracle_text, oracle_payload_strings
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.mutate import apply_unified_diff, unified_diff
from aios_rl.envs.shell.oracle import reference_action
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig
from aios_rl.envs.shell.task import ShellTaskManifest, write_task

CALC = '''"""Tiny calculator."""


def add(a, b):
    return a - b


def scale(values, factor):
    return [v * factor for v in values]
'''
TESTS = '''from calc import add, scale


def test_add():
    assert add(2, 3) == 5


def test_scale():
    assert scale([1, 2], 3) == [3, 6]
'''
FIXED = CALC.replace("return a - b", "return a + b")
MARKER = "ORACLE-ONLY-7f3a9c"
METADATA = {"operator": "arithmetic_swap", "description": "operator '+' -> '-' in add", "marker": MARKER,
            "qualname": "add", "lineno": 5}


def _task(root: Path, *, with_oracle: bool) -> Task:
    src = root / "src"
    (src / "tests").mkdir(parents=True)
    (src / "calc.py").write_text(CALC)
    (src / "tests" / "test_calc.py").write_text(TESTS)
    manifest = ShellTaskManifest(
        task_id="calc-leak", split="train", prompt="Make the tests pass.",
        test_command=["python", "-m", "pytest", "-q", "tests"],
        reference_patch=unified_diff(CALC, FIXED, "calc.py") if with_oracle else None,
        metadata=METADATA if with_oracle else {},
    )
    return manifest.to_task(write_task(root / "tasks", manifest, src))


def _episode(
    env: ShellBugfixEnv, task: Task, plan: list[str], infos: list[dict[str, Any]]
) -> list[Observation]:
    observations = [env.reset(task, seed=task.seed)]
    for action in plan:
        result = env.step(action)
        observations.append(result.observation)
        infos.append(result.info)
    return observations


def test_observations_do_not_depend_on_or_reveal_the_oracle(tmp_path: Path) -> None:
    sandbox = Sandbox(SandboxConfig())
    with_oracle = _task(tmp_path / "a", with_oracle=True)
    without = _task(tmp_path / "b", with_oracle=False)
    assert with_oracle.oracle["reference_patch"] and not without.oracle["reference_patch"]
    fix = reference_action(with_oracle)
    assert fix is not None

    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        first = env.reset(without, seed=0)
        wrong = next(c for c in first.candidates if c.startswith("patch\n") and c != fix)
        broken = apply_unified_diff({"calc.py": CALC}, wrong.removeprefix("patch\n"))["calc.py"]
        undo = "patch\n" + unified_diff(broken, CALC, "calc.py")
        plan = [first.candidates[0], "run grep -n def calc.py", wrong, undo, fix]
        plain_infos: list[dict[str, Any]] = []
        told_infos: list[dict[str, Any]] = []
        plain = _episode(env, without, plan, plain_infos)
        told = _episode(env, with_oracle, plan, told_infos)
    finally:
        env.close()

    assert len(told) == len(plain) == 6
    for step, (a, b) in enumerate(zip(told, plain, strict=True)):
        assert a.text == b.text, f"observation text differs at step {step}"
        assert a.candidates == b.candidates, f"candidates differ at step {step}"
        assert a.candidate_features == b.candidate_features, f"candidate features differ at step {step}"
        assert a.features == b.features, f"features differ at step {step}"
    assert "Tests: 2 passed, 0 failed (all passed)." in told[-1].text  # the plan really ran to the fix
    # step info (stored with the episode, read by the teacher: e.g. all_tests_passed) is the same too
    assert told_infos == plain_infos and told_infos[-1]["all_tests_passed"] is True

    assert METADATA["description"] in oracle_payload_strings(with_oracle.oracle)
    for step, obs in enumerate(told):
        assert find_oracle_text(with_oracle.oracle, obs.text) is None, f"step {step} shows oracle text"
        for secret in [with_oracle.oracle["reference_patch"], "return a + b", MARKER, "arithmetic_swap"]:
            assert secret not in obs.text, f"step {step} shows oracle text {secret[:60]!r}"
        assert str(tmp_path) not in obs.text  # nor where the task lives on the host
        assert all(MARKER not in c and "arithmetic_swap" not in c for c in obs.candidates)

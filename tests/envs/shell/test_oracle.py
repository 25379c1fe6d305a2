"""The shell oracle teacher: reference action normalisation, shaping, and a real episode on a seed repo."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest

from aios_rl.contracts.episode import Episode, Observation, Step, Task, Verification
from aios_rl.contracts.protocols import Teacher
from aios_rl.envs.shell.candidates import REVERT_CANDIDATE, STOP_CANDIDATE
from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.mutate import apply_mutation, enumerate_mutations, unified_diff
from aios_rl.envs.shell.oracle import ShellOracle, reference_action, reference_fix
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig
from aios_rl.envs.shell.seed_repos import SEEDS_DIR
from aios_rl.envs.shell.task import ShellTaskManifest, write_task

CALC = '''"""Tiny calculator."""


def add(a, b):
    return a - b


def clamp(x, low, high):
    if x < low:
        return low
    return min(x, high)
'''
FIXED = CALC.replace("return a - b", "return a + b")
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _task(root: Path, reference: str | None) -> Task:
    src = root / "src"
    (src / "tests").mkdir(parents=True)
    (src / "calc.py").write_text(CALC)
    (src / "tests" / "test_calc.py").write_text(TESTS)
    manifest = ShellTaskManifest(task_id="calc-oracle", split="train", prompt="Fix it.",
                                 test_command=["python", "-m", "pytest", "-q", "tests"],
                                 reference_patch=reference)
    return manifest.to_task(write_task(root / "tasks", manifest, src))


def _episode(actions: list[tuple[str, bool]], evidence: dict[str, int] | None = None) -> Episode:
    steps = [Step(observation=Observation(text="obs"), action=a, logprob=0.0, entropy=0.0,
                  info={"patch_applied": applied}) for a, applied in actions]
    verification = None
    if evidence is not None:
        verification = Verification(completed=True, outcome="failure", evidence=evidence)
    return Episode(environment="shell", task_id="calc-oracle", trajectory=steps, outcome="failure",
                   reward=-1.0, env_reward=-1.0, policy_version="ckpt-0", verification=verification)


def _patch(before: str, after: str) -> str:
    return "patch\n" + unified_diff(before, after, "calc.py")


def test_reference_action_normalises_a_foreign_diff(tmp_path: Path) -> None:
    # One line of context and bare file names, as `diff -U1` would write it: not the candidate spelling.
    lines = CALC.splitlines(True), FIXED.splitlines(True)
    foreign = "".join(difflib.unified_diff(*lines, "calc.py", "calc.py", n=1))
    task = _task(tmp_path, foreign)
    assert foreign != unified_diff(CALC, FIXED, "calc.py")
    assert reference_action(task) == _patch(CALC, FIXED)
    fix = reference_fix(task)
    assert fix is not None and fix.functions == {"calc.py": frozenset({"add"})}
    assert (tmp_path / "tasks" / "calc-oracle" / "repo" / "calc.py").read_text() == CALC  # never written


def test_shaping_follows_what_the_episode_did(tmp_path: Path) -> None:
    task = _task(tmp_path, unified_diff(CALC, FIXED, "calc.py"))
    oracle = ShellOracle()
    assert isinstance(oracle, Teacher)
    wrong_add = _patch(CALC, CALC.replace("return a - b", "return a * b"))
    wrong_clamp = _patch(CALC, CALC.replace("return low", "return high"))
    cases = [
        ([("read calc.py", False), (_patch(CALC, FIXED), True)], None, 1.0),
        ([("run cat calc.py", False)], None, 0.3),
        ([("read calc.py", False), (wrong_add, True)], None, 0.6),
        ([(wrong_add, False)], None, 0.0),  # a patch that did not apply touched nothing
        ([("read calc.py", False), (wrong_add, True)], {"new_failures": 1}, 0.1),
        ([(wrong_clamp, True)], {"new_failures": 2}, -0.5),
        ([(_patch(CALC, FIXED), True)], {"new_failures": 1}, 0.5),
        ([(json.dumps({"action": "patch", "path": "calc.py", "search": "a - b", "replace": "a + b"}), True)],
         None, 1.0),
    ]
    for actions, evidence, expected in cases:
        signal = oracle.signal(task, _episode(actions, evidence))
        assert signal.status == "complete" and signal.backend == "oracle"
        assert signal.shaping == pytest.approx(expected), (actions, evidence)
        applied = any(ok for _, ok in actions)
        assert signal.reference_actions == [REVERT_CANDIDATE] * applied + [_patch(CALC, FIXED)]
        assert signal.confidence == 1.0 and signal.boundary is False
        assert "calc.py (add)" in signal.critique


def test_critique_says_what_was_done(tmp_path: Path) -> None:
    task = _task(tmp_path, unified_diff(CALC, FIXED, "calc.py"))
    wrong_clamp = _patch(CALC, CALC.replace("return low", "return high"))
    signal = ShellOracle().signal(task, _episode([(wrong_clamp, True)], {"new_failures": 2}))
    assert "touching calc.py:clamp" in signal.critique
    assert "do not hold the reference fix" in signal.critique and "2 test(s)" in signal.critique


def test_task_without_reference_is_shaped_from_evidence(tmp_path: Path) -> None:
    task = _task(tmp_path, None)
    oracle = ShellOracle()
    half = oracle.signal(task, _episode([], {"target_total": 2, "target_unresolved": 1, "new_failures": 0}))
    assert half.status == "complete" and half.reference_actions == [] and half.shaping == pytest.approx(0.5)
    worse = oracle.signal(task, _episode([], {"target_total": 2, "target_unresolved": 2, "new_failures": 3}))
    assert worse.shaping == pytest.approx(-0.5)
    blind = oracle.signal(task, _episode([]))
    assert blind.status == "complete" and blind.shaping == 0.0
    assert "no completed verification" in blind.critique


def test_broken_reference_is_an_invalid_response_not_an_exception(tmp_path: Path) -> None:
    task = _task(tmp_path, unified_diff("x = 1\n", "x = 2\n", "calc.py"))
    signal = ShellOracle().signal(task, _episode([]))
    assert signal.status == "invalid_response" and signal.error and signal.shaping == 0.0
    gone = _task(tmp_path / "other", unified_diff(CALC, FIXED, "calc.py"))
    shutil.rmtree(gone.spec["task_dir"])
    assert ShellOracle().signal(gone, _episode([])).status == "invalid_response"


def test_reference_fix_is_a_candidate_on_a_mutated_seed_repo_and_solves_it(tmp_path: Path) -> None:
    original = (SEEDS_DIR / "roman" / "roman.py").read_text()
    mutations = enumerate_mutations(original, "roman.py", ["to_roman"], operators=["comparison_swap"])
    mutation = next(m for m in mutations if m.original_segment == "<")
    buggy = apply_mutation(original, mutation)
    src = tmp_path / "src"
    shutil.copytree(SEEDS_DIR / "roman", src)
    (src / "roman.py").write_text(buggy)
    manifest = ShellTaskManifest(task_id="roman-lt", split="train", prompt="Fix the bug.",
                                 test_command=["python", "-m", "pytest", "-q", "tests"],
                                 reference_patch=unified_diff(buggy, original, "roman.py"),
                                 metadata={"operator": mutation.operator,
                                           "description": mutation.description})
    task = manifest.to_task(write_task(tmp_path / "tasks", manifest, src))
    fix = reference_action(task)
    assert fix is not None

    env = ShellBugfixEnv(sandbox=Sandbox(SandboxConfig()))
    try:
        obs = env.reset(task, seed=0)
        assert fix in obs.candidates
        row = obs.candidate_features[obs.candidates.index(fix)]
        assert row["kind_patch"] == 1.0 and row["op_comparison_swap"] == 1.0 and row["in_traceback"] == 1.0
        result = env.step(fix)
        assert result.terminated and result.info["stop_reason"] == "tests_passed"
        verification = env.verify()
    finally:
        env.close()
    assert verification.outcome == "success"
    step = Step(observation=obs, action=fix, logprob=0.0, entropy=0.0, info=result.info)
    episode = Episode(environment="shell", task_id=task.task_id, trajectory=[step], outcome="success",
                      reward=1.0, env_reward=1.0, policy_version="ckpt-0", verification=verification)
    signal = ShellOracle().signal(task, episode)
    assert signal.shaping == 1.0 and signal.reference_actions == [REVERT_CANDIDATE, fix]
    assert "roman.py (to_roman)" in signal.critique and "hold the reference fix" in signal.critique


def test_shaping_replays_a_revert(tmp_path: Path) -> None:
    # `revert` puts the working copy back as it was at reset: the replayed files must follow it, or a
    # fix reached after reverting a wrong patch is missed and a fix reverted away still earns FIX_SHAPING.
    task = _task(tmp_path, unified_diff(CALC, FIXED, "calc.py"))
    wrong_add = _patch(CALC, CALC.replace("return a - b", "return a * b"))
    revert = (REVERT_CANDIDATE, False)
    steps = [Step(observation=Observation(text="obs"), action=a, logprob=0.0, entropy=0.0,
                  info={"patch_applied": applied,
                        "action_kind": "revert" if a == REVERT_CANDIDATE else "patch"})
             for a, applied in [(wrong_add, True), revert, (_patch(CALC, FIXED), True)]]
    episode = _episode([]).model_copy(update={"trajectory": steps})
    recovered = ShellOracle().signal(task, episode)
    assert recovered.shaping == pytest.approx(1.0) and "hold the reference fix" in recovered.critique
    undone = episode.model_copy(update={"trajectory": [steps[2], steps[1]]})
    signal = ShellOracle().signal(task, undone)
    assert signal.shaping == pytest.approx(0.3) and "do not hold the reference fix" in signal.critique


def test_per_state_targets_say_stop_once_the_files_hold_the_fix(tmp_path: Path) -> None:
    # wrong patch, revert, fix, then more steps (the environment's stop_on_pass off): the states after the
    # fix get `stop` (revert would undo it); a patch on top of the fix makes `revert` right again.
    task = _task(tmp_path, unified_diff(CALC, FIXED, "calc.py"))
    fix, wrong = _patch(CALC, FIXED), _patch(CALC, CALC.replace("return a - b", "return a * b"))
    on_top = _patch(FIXED, FIXED.replace("return min(x, high)", "return max(x, high)"))
    actions = [(wrong, True), (REVERT_CANDIDATE, False), (fix, True), ("read calc.py", False), (on_top, True),
               ("stop", False)]
    steps = [Step(observation=Observation(text="obs"), action=a, logprob=0.0, entropy=0.0,
                  info={"patch_applied": applied,
                        "action_kind": "revert" if a == REVERT_CANDIDATE else "other"})
             for a, applied in actions]
    signal = ShellOracle().signal(task, _episode([]).model_copy(update={"trajectory": steps}))
    both = [REVERT_CANDIDATE, fix]
    assert signal.reference_actions == both
    assert signal.step_reference_actions == [both, both, both, ["stop done"], ["stop done"], both]
    untouched = ShellOracle().signal(task, _episode([("read calc.py", False)]))
    assert untouched.step_reference_actions == [[fix]]


def _crlf_task(root: Path, task_id: str) -> tuple[Task, str, str]:
    """A task whose calc.py has "\r\n" endings (written as bytes), with its reference patch; and the buggy
    and fixed texts."""
    crlf, fixed = CALC.replace("\n", "\r\n"), FIXED.replace("\n", "\r\n")
    src = root / "src"
    (src / "tests").mkdir(parents=True)
    (src / "calc.py").write_bytes(crlf.encode())
    (src / "tests" / "test_calc.py").write_text(TESTS)
    manifest = ShellTaskManifest(task_id=task_id, split="train", prompt="Fix it.",
                                 test_command=["python", "-m", "pytest", "-q", "tests"],
                                 reference_patch=unified_diff(crlf, fixed, "calc.py"))
    return manifest.to_task(write_task(root / "tasks", manifest, src)), crlf, fixed


def test_reference_of_a_crlf_repository_is_the_environments_candidate(tmp_path: Path) -> None:
    # The environment keeps a file's "\r\n" endings (it reads bytes), and so does a reference patch made
    # from the file; the oracle must read the task's files the same way, not with newline translation.
    task, crlf, fixed = _crlf_task(tmp_path, "calc-crlf")
    assert reference_action(task) == "patch\n" + unified_diff(crlf, fixed, "calc.py")
    episode = _episode([(reference_action(task), True)])
    signal = ShellOracle().signal(task, episode)
    assert signal.status == "complete" and signal.shaping == 1.0


def test_a_search_replace_edit_on_a_crlf_file_is_replayed_as_the_environment_applied_it(
    tmp_path: Path,
) -> None:
    # The environment applies a multi-line search quoted with plain newlines to a CRLF file (taking the
    # file's endings); the oracle's replay must reach the same files.
    task, crlf, fixed = _crlf_task(tmp_path, "calc-crlf-edit")
    edit = json.dumps({"action": "patch", "path": "calc.py", "search": "def add(a, b):\n    return a - b",
                       "replace": "def add(a, b):\n    return a + b"})
    env = ShellBugfixEnv(sandbox=Sandbox(SandboxConfig()))
    try:
        env.reset(task, seed=0)
        result = env.step(edit)
        assert result.info["patch_applied"] and env.verify().outcome == "success"
    finally:
        env.close()
    signal = ShellOracle().signal(task, _episode([(edit, True)]))
    assert signal.shaping == 1.0 and "hold the reference fix" in signal.critique


def test_per_state_targets_say_stop_after_an_alternative_fix_that_passes_every_test(tmp_path: Path) -> None:
    # With stop_on_pass off, a patch other than the reference that makes every test pass ends the work just
    # as the reference does: the state after it gets `stop`, not the `revert` that would undo a correct fix.
    # The environment's verdict (all tests passed, as the observation says) is what tells the oracle.
    task = _task(tmp_path, unified_diff(CALC, FIXED, "calc.py"))
    fix = _patch(CALC, FIXED)
    other = _patch(CALC, CALC.replace("return a - b", "return b + a"))
    assert other != fix
    env = ShellBugfixEnv(ShellEnvConfig(stop_on_pass=False), sandbox=Sandbox(SandboxConfig()))
    try:
        obs = env.reset(task, seed=0)
        steps = []
        for action in [other, "read calc.py", "stop done"]:
            result = env.step(action)
            steps.append(Step(observation=obs, action=action, logprob=0.0, entropy=0.0, info=result.info))
            obs = result.observation
        verification = env.verify()
    finally:
        env.close()
    assert steps[0].info["patch_applied"] and not steps[0].info.get("stop_reason")
    assert "(all passed)" in steps[1].observation.text and verification.outcome == "success"
    assert [s.info["all_tests_passed"] for s in steps] == [True, True, True]
    episode = _episode([]).model_copy(update={"trajectory": steps, "verification": verification})
    signal = ShellOracle().signal(task, episode)
    assert signal.reference_actions == [REVERT_CANDIDATE, fix]  # at the opening state, revert is not offered
    assert signal.step_reference_actions == [[REVERT_CANDIDATE, fix], [STOP_CANDIDATE], [STOP_CANDIDATE]]


def test_a_pass_won_by_editing_the_tests_is_not_a_state_to_stop_at(tmp_path: Path) -> None:
    # The verifier judges with the tests as they were at reset, so tests that pass only because the episode
    # changed them do not make `stop` the right target: `revert` (then the fix) stays.
    task = _task(tmp_path, unified_diff(CALC, FIXED, "calc.py"))
    fix, other = _patch(CALC, FIXED), _patch(CALC, CALC.replace("return a - b", "return b + a"))
    cheat = "patch\n" + unified_diff(TESTS, TESTS.replace("== 5", "== -1"), "tests/test_calc.py")
    passed = {"patch_applied": True, "action_kind": "patch", "all_tests_passed": True}
    steps = [Step(observation=Observation(text="obs"), action=a, logprob=0.0, entropy=0.0, info=info)
             for a, info in [(cheat, passed), ("read calc.py", {"all_tests_passed": True}),
                             (REVERT_CANDIDATE, {"action_kind": "revert", "all_tests_passed": False}),
                             (other, passed), ("stop", {"all_tests_passed": True})]]
    signal = ShellOracle().signal(task, _episode([]).model_copy(update={"trajectory": steps}))
    both = [REVERT_CANDIDATE, fix]
    assert signal.step_reference_actions == [both, both, both, both, [STOP_CANDIDATE]]

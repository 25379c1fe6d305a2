"""shell/bugfix-v1 end to end on tiny task repositories, every command in the real bubblewrap sandbox."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from aios_rl.contracts.episode import Task
from aios_rl.contracts.errors import ConfigError, EnvError
from aios_rl.envs.base import check_env, make
from aios_rl.envs.shell.candidates import (
    ATTEMPT_WINDOW,
    FEATURE_NAMES,
    Attempt,
    History,
    assemble,
    attempts_of,
    localize,
    patch_pool,
)
from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig, ShellSnapshot
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.patches import edited_lines
from aios_rl.envs.shell.pytest_output import display_output, parse_pytest
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig
from aios_rl.envs.shell.task import ShellTaskManifest, write_task

CALC = '''"""Tiny calculator."""


def add(a, b):
    return a - b


def clamp(x, low, high):
    if x < low:
        return low
    if x > high:
        return high
    return x
'''
TESTS = '''from calc import add, clamp


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-1, 1) == 0


def test_clamp():
    assert clamp(5, 0, 3) == 3 and clamp(-1, 0, 3) == 0 and clamp(2, 0, 3) == 2
'''
FIXED = CALC.replace("return a - b", "return a + b")


def with_parametrised_tests(tests: str, count: int, check: str = "i >= 0") -> str:
    """``tests`` plus one test parametrised ``count`` times under a long name (``assert check``): a suite
    whose -rA summary, spectrum or report is large."""
    return tests + (
        f"\n\nimport pytest\n\n\n@pytest.mark.parametrize('i', range({count}))\n"
        f"def test_one_of_a_very_large_suite_with_a_long_name(i):\n    assert {check}\n"
    )


TEST_COMMAND = ["python", "-m", "pytest", "-q", "tests"]
TARGETS = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_add_negative"]


def make_task(root: Path, *, files: dict[str, str] | None = None, command: list[str] | None = None,
              timeout_s: float = 60.0, oracle: bool = True, task_id: str = "calc-1") -> Task:
    """A task directory with the buggy calc repo (or ``files``) and, optionally, its reference fix."""
    src = root / f"src-{task_id}"
    for rel, text in (files or {"calc.py": CALC, "tests/test_calc.py": TESTS}).items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    manifest = ShellTaskManifest(
        task_id=task_id, split="train", prompt="Fix the bug so that the tests pass.",
        test_command=command or TEST_COMMAND, timeout_s=timeout_s,
        reference_patch=unified_diff(CALC, FIXED, "calc.py") if oracle else None,
        metadata={"operator": "arithmetic_swap", "description": "operator '+' -> '-'"} if oracle else {},
    )
    return manifest.to_task(write_task(root / "tasks", manifest, src))


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig())


@pytest.fixture()
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


@pytest.fixture()
def env(sandbox: Sandbox):
    env = ShellBugfixEnv(sandbox=sandbox)
    yield env
    env.close()


def _files(env: ShellBugfixEnv) -> dict[str, bytes]:
    return {path: entry.data for path, entry in env.snapshot().files if entry.kind == "file"}


def test_check_env_passes_on_a_real_task(task: Task, sandbox: Sandbox) -> None:
    env = make("shell/bugfix-v1", sandbox=sandbox)
    check_env(env, task)


def test_reset_runs_the_baseline_and_never_touches_the_task_dir(env: ShellBugfixEnv, task: Task) -> None:
    task_repo = Path(task.spec["task_dir"]) / "repo"
    before = sorted((p.relative_to(task_repo), p.read_bytes()) for p in task_repo.rglob("*") if p.is_file())
    obs = env.reset(task, seed=0)
    assert "Fix the bug so that the tests pass." in obs.text
    assert "Tests: 1 passed, 2 failed" in obs.text
    assert all(t in obs.text for t in TARGETS)
    assert "<duration>" in obs.text and " in 0." not in obs.text  # timings masked: observations repeat
    assert obs.candidates[:2] == ["read calc.py", "run python -m pytest -q tests"]
    assert obs.candidates[-1] == "stop done"
    assert "patch\n" + unified_diff(CALC, FIXED, "calc.py") in obs.candidates
    assert all(list(f) == list(FEATURE_NAMES) for f in obs.candidate_features)
    assert obs.features["tests_failed"] == 2.0
    env.step("patch\n" + unified_diff(CALC, FIXED, "calc.py"))
    after = sorted((p.relative_to(task_repo), p.read_bytes()) for p in task_repo.rglob("*") if p.is_file())
    assert after == before


def test_read_run_and_invalid_actions(env: ShellBugfixEnv, task: Task) -> None:
    env.reset(task, seed=0)
    read = env.step("read calc.py")
    assert "calc.py (13 lines):" in read.observation.text and "return a - b" in read.observation.text
    assert read.info["invalid_action"] is False and read.reward == 0.0
    assert read.observation.candidate_features[0]["already_read"] == 1.0  # the `read calc.py` candidate

    grep = env.step('{"action": "run", "command": "grep -n return calc.py"}')
    assert "5:    return a - b" in grep.observation.text and "[exit code 0]" in grep.observation.text
    assert grep.info["invalid_action"] is False

    for action, fragment in [
        ("run rm calc.py", "not allowed"),
        ("run cat calc.py > copy.txt", "operator '>'"),
        ("run cat /etc/passwd", "leaves the repository"),
        ("read ../manifest.json", "leaves the repository"),
        ('{"action": "read", "path": "calc.py"', "malformed JSON"),
        ("make it work", "unknown action"),
    ]:
        result = env.step(action)
        assert result.info["invalid_action"] is True, action
        assert fragment in result.info["error"] and f"Invalid action: " in result.observation.text
        assert not result.terminated and not result.truncated
    missing = env.step("read nope.py")
    assert "no file 'nope.py'" in missing.observation.text and missing.info["invalid_action"] is False
    assert missing.observation.features["step"] == 9.0
    assert _files(env)["calc.py"] == CALC.encode() and "copy.txt" not in _files(env)


def test_correct_patch_passes_terminates_and_verifies_success(env: ShellBugfixEnv, task: Task) -> None:
    env.reset(task, seed=0)
    edit = {"action": "patch", "path": "calc.py", "search": "return a - b", "replace": "return a + b"}
    result = env.step(json.dumps(edit))
    assert result.info["patch_applied"] is True and result.info["files_changed"] == ["calc.py"]
    assert result.terminated and not result.truncated and result.info["stop_reason"] == "tests_passed"
    assert "Tests: 3 passed, 0 failed (all passed)." in result.observation.text
    with pytest.raises(EnvError, match="episode ended"):
        env.step("stop done")
    verification = env.verify()
    assert verification.completed and verification.outcome == "success"
    ev = verification.evidence
    counts = ("tests_passed", "tests_failed", "target_unresolved", "new_failures", "target_total")
    assert [ev[k] for k in counts] == [3, 0, 0, 0, 2]
    assert [ev[k] for k in ("files_modified", "unrelated_files_modified", "steps")] == [1, 0, 1]


def test_wrong_patch_branches_and_partial_fix(env: ShellBugfixEnv, task: Task, sandbox: Sandbox) -> None:
    env.reset(task, seed=0)
    env.step("read calc.py")  # step k = 1
    snap = env.snapshot()
    assert isinstance(snap, ShellSnapshot)
    wrong = "patch\n" + unified_diff(CALC, CALC.replace("return low\n", "return high\n"), "calc.py")
    first = env.step(wrong)
    assert first.info["patch_applied"] and not first.terminated
    assert "Failing:" in first.observation.text and "test_clamp" in first.observation.text
    failed = env.verify()
    assert failed.outcome == "failure" and failed.completed
    assert (failed.evidence["new_failures"], failed.evidence["target_unresolved"]) == (1, 2)

    reverted = env.step("revert")  # the wrong patch left its mark on the candidates at its line
    marked = {t for t, f in zip(reverted.observation.candidates, reverted.observation.candidate_features)
              if f["attempt_same_line"]}
    assert marked and all("return low" in t or "return high" in t for t in marked)
    assert all(f["attempt_broke"] == 1.0 and f["attempt_fixed"] == 0.0
               for t, f in zip(reverted.observation.candidates, reverted.observation.candidate_features)
               if t in marked)

    env.restore(snap)
    assert _files(env)["calc.py"] == CALC.encode()  # the wrong patch is gone
    second = env.step(wrong)
    assert second.observation == first.observation

    # A second instance restored from the same snapshot has its own working copy.
    other = ShellBugfixEnv(sandbox=sandbox)
    try:
        other.restore(snap)
        partial = CALC.replace("return a - b", "return a + b if a > 0 else a - b")
        other.step("patch\n" + unified_diff(CALC, partial, "calc.py"))
        assert _files(other)["calc.py"] == partial.encode()
        assert _files(env)["calc.py"] != partial.encode()
        verdict = other.verify()
        assert verdict.outcome == "partial" and verdict.evidence["target_unresolved"] == 1
    finally:
        other.close()


def test_no_progress_and_unrelated_files_are_counted(env: ShellBugfixEnv, task: Task) -> None:
    env.reset(task, seed=0)
    env.step("read calc.py")
    env.step("read calc.py")
    edit = {"action": "patch", "path": "tests/test_calc.py", "search": "    assert add(-1, 1) == 0\n",
            "replace": "    assert True\n"}
    env.step(json.dumps(edit))  # "fixing" a test by weakening it
    env.step("stop giving up")
    ev = env.verify().evidence
    assert ev["no_progress_steps"] == 3  # two reads and the stop changed neither files nor tests
    assert (ev["files_modified"], ev["unrelated_files_modified"]) == (1, 1)
    assert ev["target_unresolved"] == 2 and ev["steps"] == 4  # the verifier judges with the task's own tests


def test_the_verdict_ignores_edits_to_the_tests_and_their_set_up(env: ShellBugfixEnv, task: Task) -> None:
    env.reset(task, seed=0)
    weakened = TESTS.replace("assert add(2, 3) == 5", "assert True")
    weakened = weakened.replace("assert add(-1, 1) == 0", "assert True")
    hack = env.step(json.dumps({"action": "patch", "path": "tests/test_calc.py", "search": TESTS,
                                "replace": weakened}))
    assert "Tests: 3 passed" in hack.observation.text and hack.terminated  # the student's own run sees it
    verification = env.verify()
    assert verification.outcome == "failure", verification.evidence
    ev = verification.evidence
    assert (ev["target_unresolved"], ev["files_modified"], ev["unrelated_files_modified"]) == (2, 1, 1)
    assert _files(env)["tests/test_calc.py"] == TESTS.encode()  # put back for the verdict


CHEAT_PLUGIN = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


@pytest.mark.parametrize("config", [".pytest.ini", "pytest.toml", ".pytest.toml"])
def test_the_verdict_ignores_every_pytest_config_file_the_student_adds(
    env: ShellBugfixEnv, task: Task, config: str
) -> None:
    # pytest reads these as it reads pytest.ini (before pyproject.toml); one added by the student that
    # loads a plugin of its own reporting every test as passed must not reach the verdict.
    env.reset(task, seed=0)
    ini = config.endswith(".ini")
    text = "[pytest]\naddopts = -p cheat\n" if ini else '[pytest]\naddopts = ["-p", "cheat"]\n'
    diff = "".join(unified_diff("", body, path).replace(f"--- a/{path}", "--- /dev/null")
                   for path, body in [("cheat.py", CHEAT_PLUGIN), (config, text)])
    hacked = env.step("patch\n" + diff)
    assert hacked.info["patch_applied"] and "Tests: 3 passed" in hacked.observation.text  # the student's run
    verification = env.verify()
    assert verification.outcome == "failure", verification.evidence


def test_with_restored_puts_protected_paths_back_exactly() -> None:
    from aios_rl.envs.shell.candidates import judge_file
    from aios_rl.envs.shell.workspace import FileEntry, with_restored

    def tree(files: dict[str, str]) -> tuple:
        entries = {path: FileEntry("file", text.encode()) for path, text in files.items()}
        for path in list(entries):
            for parent in Path(path).parents:
                if str(parent) != ".":
                    entries.setdefault(parent.as_posix(), FileEntry("dir", mode=0o755))
        return tuple(sorted(entries.items()))

    initial = tree({"calc.py": "bug", "tests/test_calc.py": "strict", "pyproject.toml": "[tool]"})
    edited = dict(tree({"calc.py": "fix", "pytest.ini": "addopts", "sub/conftest.py": "hook"}))
    edited["tests"] = FileEntry("file", b"a file where the directory was")
    restored = dict(with_restored(tuple(sorted(edited.items())), initial, judge_file))
    kept = {"calc.py": FileEntry("file", b"fix"), "sub": FileEntry("dir", mode=0o755)}
    assert restored == dict(initial) | kept


def test_truncated_after_max_steps(env: ShellBugfixEnv, task: Task) -> None:
    env.reset(task, seed=0)
    results = [env.step("read calc.py") for _ in range(12)]
    assert [r.truncated for r in results] == [False] * 11 + [True]
    assert not any(r.terminated for r in results) and results[-1].info["stop_reason"] == "max_steps"
    assert "Step 12 of 12." in results[-1].observation.text
    with pytest.raises(EnvError, match="episode ended at step 12"):
        env.step("read calc.py")


def test_stop_terminates(env: ShellBugfixEnv, task: Task) -> None:
    env.reset(task, seed=0)
    result = env.step("stop I cannot find it")
    assert result.terminated and result.info["stop_reason"] == "student_stop"
    assert "Stopped: I cannot find it" in result.observation.text


def test_timeout_is_blocked(tmp_path: Path, sandbox: Sandbox) -> None:
    slow = "def test_forever():\n    while True:\n        pass\n"
    files = {"calc.py": CALC, "tests/test_slow.py": slow}
    task = make_task(tmp_path, files=files, timeout_s=1.5, oracle=False)
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        obs = env.reset(task, seed=0)
        assert "Tests: the test run timed out." in obs.text
        verification = env.verify()
        assert verification.outcome == "blocked" and not verification.completed
        assert verification.evidence["timed_out"] is True
    finally:
        env.close()


def test_non_pytest_command_is_judged_by_exit_code(tmp_path: Path, sandbox: Sandbox) -> None:
    check = "from calc import add\nraise SystemExit(0 if add(2, 3) == 5 else 1)\n"
    task = make_task(tmp_path, files={"calc.py": CALC, "check.py": check}, command=["python", "check.py"])
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        obs = env.reset(task, seed=0)
        assert "Tests: 0 passed, 1 failed (exit code 1)." in obs.text
        assert "Failing: python check.py" in obs.text
        assert "read check.py" in obs.candidates and "run python check.py" in obs.candidates
        assert env.verify().outcome == "failure"
        result = env.step("patch\n" + unified_diff(CALC, FIXED, "calc.py"))
        assert result.terminated
        verification = env.verify()
        assert verification.outcome == "success" and verification.evidence["tests_passed"] == 1
    finally:
        env.close()


def test_step_before_reset_and_bad_spec_raise(env: ShellBugfixEnv, task: Task) -> None:
    with pytest.raises(EnvError, match="call reset"):
        env.step("read calc.py")
    bad = task.model_copy(update={"spec": {**task.spec, "test_command": []}})
    with pytest.raises(EnvError, match="test_command"):
        env.reset(bad, seed=0)
    with pytest.raises(EnvError, match="ShellSnapshot"):
        env.restore({"files": {}})


def test_a_reset_that_fails_ends_the_previous_episode_and_raises_env_error(
    env: ShellBugfixEnv, task: Task, tmp_path: Path
) -> None:
    env.reset(task, seed=0)
    other = make_task(tmp_path / "other", task_id="calc-2")
    os.mkfifo(Path(other.spec["task_dir"]) / "repo" / "pipe")  # a repository that cannot be copied
    with pytest.raises(EnvError, match="calc-2"):
        env.reset(other, seed=0)
    with pytest.raises(EnvError, match="call reset"):  # not the old episode on a half-copied repository
        env.step("read calc.py")


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="max_steps"):
        ShellEnvConfig(max_steps=0)
    for few in (1, 2):  # run, revert and stop are always offered: fewer could not be honoured
        with pytest.raises(ConfigError, match="max_candidates"):
            ShellEnvConfig(max_candidates=few)


def test_candidates_rank_suspicious_functions_first_and_respect_the_cap() -> None:
    # Pure: a canned -rA summary is what the sandbox run would print; no environment needed.
    output = ("FAILED tests/test_calc.py::test_add - assert -1 == 5\n"
              "FAILED tests/test_calc.py::test_add_negative\n"
              "PASSED tests/test_calc.py::test_clamp\n2 failed, 1 passed in 0.01s\n")
    run = parse_pytest(output, 1)
    files = {"calc.py": CALC, "tests/test_calc.py": TESTS}
    sites = localize(files, run, small_repo_functions=0)
    assert sites["calc.py"]["add"].suspicion == 1.0 and sites["calc.py"]["add"].tests == 2
    assert "clamp" not in sites["calc.py"]  # only a passing test reaches it, and the repo is not "small"
    pool = patch_pool(files, run, small_repo_functions=20)
    assert {c.qualname for c in pool[:3]} == {"add"} and any(c.qualname == "clamp" for c in pool)
    history = History(step=3, max_steps=12, files_read=frozenset({"calc.py"}),
                      tried=frozenset({pool[0].text}))
    texts, features = assemble(pool, files, run, TEST_COMMAND, history, max_candidates=6)
    assert len(texts) == len(features) == 6
    assert texts[:2] == ["read calc.py", "run python -m pytest -q tests"] and texts[-1] == "stop done"
    assert texts[2:5] == [c.text for c in pool[:3]]
    assert features[2]["already_tried"] == 1.0 and features[3]["already_tried"] == 0.0
    assert features[2]["already_read"] == 1.0 and features[2]["suspicion"] == 1.0
    modified = replace(history, modified=True)
    for cap in (3, 4):  # the smallest caps the config allows hold run, revert and stop
        texts, _ = assemble(pool, files, run, TEST_COMMAND, modified, max_candidates=cap)
        assert len(texts) <= cap and {"revert", "stop done"} <= set(texts)
    assert all(f["step_fraction"] == 0.25 and f["failing_tests"] == 2.0 for f in features)


def test_attempt_features_describe_earlier_patches_near_a_candidate() -> None:
    output = ("FAILED tests/test_calc.py::test_add\nFAILED tests/test_calc.py::test_add_negative\n"
              "PASSED tests/test_calc.py::test_clamp\n2 failed, 1 passed in 0.01s\n")
    run = parse_pytest(output, 1)
    after = parse_pytest("PASSED tests/test_calc.py::test_add\nFAILED tests/test_calc.py::test_add_negative\n"
                         "FAILED tests/test_calc.py::test_clamp\n2 failed, 1 passed in 0.01s\n", 1)
    assert attempts_of([("calc.py", 5)], run, after) == (Attempt("calc.py", 5, fixed=0.5, broke=1.0),)
    files = {"calc.py": CALC, "tests/test_calc.py": TESTS}
    pool = patch_pool(files, run, small_repo_functions=20)
    attempts = (Attempt("calc.py", 5, fixed=0.5, broke=1.0), Attempt("other.py", 5, fixed=1.0, broke=0.0))
    history = History(step=2, max_steps=12, attempts=attempts)
    texts, features = assemble(pool, files, run, TEST_COMMAND, history, max_candidates=64)
    rows = dict(zip(texts, features))
    by_line = {c.lineno: rows[c.text] for c in pool if c.text in rows}
    assert by_line[5]["attempt_same_line"] == 1.0 and by_line[5]["attempt_nearby"] == 1.0
    assert (by_line[5]["attempt_fixed"], by_line[5]["attempt_broke"]) == (0.5, 1.0)
    assert by_line[9]["attempt_same_line"] == 0.0 and by_line[9]["attempt_nearby"] == 1.0 - 4 / ATTEMPT_WINDOW
    assert by_line[13]["attempt_nearby"] == 0.0 and by_line[13]["attempt_fixed"] == 0.0  # 8 lines away
    assert all(rows[t]["attempt_nearby"] == 0.0 for t in texts if not t.startswith("patch"))
    _, before = assemble(pool, files, run, TEST_COMMAND, replace(history, attempts=()), max_candidates=64)
    assert all(f[k] == 0.0 for f in before for k in FEATURE_NAMES if k.startswith("attempt_"))


def test_edited_lines_name_each_hunks_first_change() -> None:
    assert edited_lines(unified_diff(CALC, FIXED, "calc.py")) == [("calc.py", 5)]
    added = CALC.replace("    return x\n", "    x = int(x)\n    return x\n")
    assert edited_lines(unified_diff(CALC, added, "calc.py")) == [("calc.py", 13)]  # goes before line 13
    both = added.replace("return a - b", "return a + b")
    assert edited_lines(unified_diff(CALC, both, "calc.py")) == [("calc.py", 5), ("calc.py", 13)]


def test_pytest_summary_parsing() -> None:
    output = "\n".join([
        "tests/test_x.py:7: in test_a",
        "    assert f(1) == 2",
        "pkg/mod.py:19: in f",
        "    raise ValueError(x)",
        "E   ValueError: 1",
        "=========================== short test summary info ============================",
        "PASSED tests/test_x.py::test_ok",
        "PASSED tests/test_x.py::test_param[a - b]",
        "FAILED tests/test_x.py::test_a - ValueError: 1",
        "FAILED tests/test_x.py::TestK::test_b[1-2] - assert 0",
        "ERROR tests/test_y.py - ImportError: no module",
        "XFAIL tests/test_x.py::test_later - not yet",
        "== 3 failed, 2 passed, 1 xfailed, 1 warning, 1 error in 0.52s (0:00:00) ==",
    ])  # fmt: skip
    run = parse_pytest(output, 1)
    assert run.passing == ("tests/test_x.py::test_ok", "tests/test_x.py::test_param[a - b]")
    assert run.failing == ("tests/test_x.py::test_a", "tests/test_x.py::TestK::test_b[1-2]",
                           "tests/test_y.py")
    assert run.counts == {"failed": 3, "passed": 2, "xfailed": 1, "warning": 1, "error": 1}
    assert run.complete and not run.passed
    assert [(f.path, f.lineno, f.function) for f in run.frames] == [("tests/test_x.py", 7, "test_a"),
                                                                     ("pkg/mod.py", 19, "f")]
    crashed = parse_pytest("PASSED tests/test_x.py::test_ok\n", 0)
    assert not crashed.complete and not crashed.passed  # exit 0 without pytest's verdict is not a pass
    assert not parse_pytest("1 passed in 0.1s\n", 0, timed_out=True).complete
    shown = display_output("PASSED tests/t.py::x\n=== PASSES ===\nobj at 0x7f3a2b1c9d80\n1 passed in 0.52s\n")
    assert shown == "obj at 0x<address>\n1 passed in <duration>"


def test_wall_budget_truncates_without_running(task: Task, sandbox: Sandbox) -> None:
    env = ShellBugfixEnv(ShellEnvConfig(episode_wall_s=1e-6), sandbox=sandbox)
    try:
        env.reset(task, seed=0)
        opening = env.snapshot()
        first = env.step("run python -m pytest -q tests")  # runs (nothing spent yet), and spends the budget
        assert first.info["tests_run"] and first.truncated and first.info["stop_reason"] == "wall_budget"
        env.restore(replace(opening, state=replace(opening.state, elapsed_s=1e-6)))  # spent, not yet stepped
        result = env.step("run python -m pytest -q tests")
        assert result.truncated and result.info["stop_reason"] == "wall_budget"
        assert result.info["tests_run"] is False and "budget is spent" in result.observation.text
    finally:
        env.close()


def test_wall_budget_counts_only_the_episodes_own_steps(task: Task, sandbox: Sandbox) -> None:
    """Time between steps (a batch's other environments stepping, the policy) is not the episode's: a
    budget shorter than the pause still lets the episode step, and a snapshot carries the time spent."""
    env, other = (ShellBugfixEnv(ShellEnvConfig(episode_wall_s=0.5), sandbox=sandbox) for _ in range(2))
    try:
        env.reset(task, seed=0)
        time.sleep(0.6)
        read = env.step("read calc.py")
        assert not read.truncated and "stop_reason" not in read.info
        taken = env.snapshot()
        assert 0.0 < taken.state.elapsed_s < 0.5
        other.restore(taken)
        assert other.snapshot().state.elapsed_s == taken.state.elapsed_s
        other.restore(replace(taken, state=replace(taken.state, elapsed_s=0.5)))
        assert other.step("read calc.py").info["stop_reason"] == "wall_budget"
    finally:
        env.close()
        other.close()


def test_a_patch_that_makes_the_suite_hang_is_a_failure_and_costs_seconds(tmp_path: Path, sandbox: Sandbox) -> None:
    looping = "def count(n):\n    i = 0\n    while i < n:\n        i += 1\n    return i + 1\n"
    tests = "from looping import count\n\n\ndef test_count():\n    assert count(3) == 3\n\n\ndef test_zero():\n    assert count(0) == 0\n"
    task = make_task(tmp_path, files={"looping.py": looping, "tests/test_looping.py": tests}, oracle=False)
    env = ShellBugfixEnv(ShellEnvConfig(min_test_timeout_s=2.0), sandbox=sandbox)
    try:
        env.reset(task, seed=0)
        edit = json.dumps({"action": "patch", "path": "looping.py", "search": "i += 1", "replace": "i += 0"})
        started = time.monotonic()
        result = env.step(edit)
        assert time.monotonic() - started < 15  # the scaled timeout, not the task's 60 s
        assert "timed out" in result.observation.text
        verification = env.verify()
        assert verification.completed and verification.outcome == "failure"
        assert verification.evidence["timed_out"] is True
    finally:
        env.close()


def test_a_search_replace_edit_keeps_the_files_line_endings(tmp_path: Path, sandbox: Sandbox) -> None:
    crlf = CALC.replace("\n", "\r\n")
    task = make_task(tmp_path, files={"calc.py": crlf, "tests/test_calc.py": TESTS})
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        env.reset(task, seed=0)
        env.step(json.dumps({"action": "patch", "path": "calc.py", "search": "return a - b",
                             "replace": "return a - b  # still wrong"}))
        noted = crlf.replace("return a - b", "return a - b  # still wrong")
        assert _files(env)["calc.py"] == noted.encode()  # every other line keeps its CRLF
        # a multi-line edit quoted with plain newlines, as an agent reads the file, takes its CRLF endings
        env.step(json.dumps({"action": "patch", "path": "calc.py",
                             "search": "def add(a, b):\n    return a - b  # still wrong",
                             "replace": "def add(a, b):\n    # fixed\n    return a + b"}))
        assert _files(env)["calc.py"] == crlf.replace("return a - b", "# fixed\r\n    return a + b").encode()
    finally:
        env.close()


def test_a_command_that_fills_the_working_copy_has_its_files_undone(tmp_path: Path, sandbox: Sandbox) -> None:
    big = "open('blob', 'wb').write(b'x' * 3_000_000)\n"
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_calc.py": TESTS, "big.py": big})
    env = ShellBugfixEnv(ShellEnvConfig(max_copy_bytes=2_000_000), sandbox=sandbox)
    try:
        env.reset(task, seed=0)
        result = env.step("run python big.py")
        assert "its file changes were undone" in result.observation.text
        assert "blob" not in _files(env) and not (env._repo / "blob").exists()
        assert env.verify().outcome == "failure"  # the episode goes on, on the copy as it was
    finally:
        env.close()
    small = ShellBugfixEnv(ShellEnvConfig(max_copy_bytes=100), sandbox=sandbox)  # the repo itself is bigger
    try:
        small.reset(task, seed=0)
        assert "undone" not in small.step("run cat calc.py").observation.text  # it did not grow the copy
    finally:
        small.close()


def test_a_search_in_the_lf_part_of_a_mixed_file_matches_as_quoted(tmp_path: Path, sandbox: Sandbox) -> None:
    mixed = "# header\r\n" + CALC  # one CRLF line, the rest LF
    task = make_task(tmp_path, files={"calc.py": mixed, "tests/test_calc.py": TESTS})
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        env.reset(task, seed=0)
        result = env.step(json.dumps({"action": "patch", "path": "calc.py",
                                      "search": "def add(a, b):\n    return a - b",
                                      "replace": "def add(a, b):\n    return a + b"}))
        assert result.info["patch_applied"] is True
        assert _files(env)["calc.py"] == mixed.replace("return a - b", "return a + b").encode()
    finally:
        env.close()


def test_a_suite_with_more_output_than_the_cap_is_still_judged(tmp_path: Path, sandbox: Sandbox) -> None:
    # pytest's verdict (the -rA summary and the final line) comes last; a suite whose tests print more
    # than the sandbox keeps of stdout (64 KiB) must still be judged by it, not read as "no verdict".
    chatty = "from calc import add\n\n" + "".join(
        f"def test_chatty_{i}():\n    print('x' * 10000)\n    assert add({i}, 1) == {i} + 1\n\n"
        for i in range(10)
    )
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_calc.py": chatty}, oracle=False)
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        assert "Tests: 0 passed, 10 failed" in env.reset(task, seed=0).text
        result = env.step("patch\n" + unified_diff(CALC, FIXED, "calc.py"))
        assert result.terminated and "Tests: 10 passed, 0 failed (all passed)." in result.observation.text
        assert env.verify().outcome == "success"
    finally:
        env.close()


def test_a_suite_whose_summary_alone_passes_the_sandbox_cap_is_judged_whole(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    # -rA lists every test: 900 ids are about 60 KiB, more than the sandbox keeps of a command's output
    # (64 KiB, its first and last halves), so a test run keeps more (test_output_cap_bytes).
    many = with_parametrised_tests(TESTS, 900)
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_calc.py": many})
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        env.reset(task, seed=0)
        env.step("patch\n" + unified_diff(CALC, FIXED, "calc.py"))
        verdict = env.verify()
        assert verdict.outcome == "success" and verdict.evidence["new_failures"] == 0
    finally:
        env.close()


def test_a_module_starting_with_a_utf8_bom_gets_patch_candidates() -> None:
    output = ("FAILED tests/test_calc.py::test_add\nPASSED tests/test_calc.py::test_clamp\n"
              "1 failed, 1 passed\n")
    run = parse_pytest(output, 1)
    plain = patch_pool({"calc.py": CALC, "tests/test_calc.py": TESTS}, run, small_repo_functions=20)
    bom = patch_pool({"calc.py": "\ufeff" + CALC, "tests/test_calc.py": TESTS}, run, small_repo_functions=20)
    assert plain and [(c.qualname, c.lineno) for c in bom] == [(c.qualname, c.lineno) for c in plain]


def test_a_suite_whose_summary_passes_the_test_output_cap_is_judged_by_its_report(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    # The -rA summary of 400 long ids is about 30 KiB: with an 8 KiB cap the sandbox keeps its first and
    # last 4 KiB, so most PASSED lines never reach the host. The verdict comes from the run's report file.
    many = with_parametrised_tests(TESTS, 400)
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_calc.py": many})
    env = ShellBugfixEnv(ShellEnvConfig(test_output_cap_bytes=8192), sandbox=sandbox)
    try:
        obs = env.reset(task, seed=0)
        assert "Tests: 401 passed, 2 failed" in obs.text
        result = env.step("patch\n" + unified_diff(CALC, FIXED, "calc.py"))
        assert result.terminated and "Tests: 403 passed, 0 failed (all passed)." in result.observation.text
        verdict = env.verify()
        assert verdict.outcome == "success", verdict.evidence
        assert (verdict.evidence["tests_passed"], verdict.evidence["new_failures"]) == (403, 0)
        assert not any(p.name.startswith(".aios-test-report") for p in env._repo.iterdir())
    finally:
        env.close()


def test_a_failing_parametrised_id_holding_a_dash_is_read_exactly(tmp_path: Path, sandbox: Sandbox) -> None:
    # Both failures print 20 KB, so with an 8 KiB cap the section header "____ test_y[c] - d] ____" (which
    # the text parser needs to tell where such an id ends) is in the discarded middle of the output.
    loud = TESTS.replace("    assert add(2, 3) == 5", "    print('x' * 20000)\n    assert add(2, 3) == 5")
    chatty = loud + (
        "\n\nimport pytest\n\n\n@pytest.mark.parametrize('case', ['c] - d'])\n"
        "def test_y(case):\n    print('y' * 20000)\n    assert add(1, 1) == 2, case\n"
    )
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_calc.py": chatty})
    env = ShellBugfixEnv(ShellEnvConfig(test_output_cap_bytes=8192), sandbox=sandbox)
    try:
        obs = env.reset(task, seed=0)
        dashed = "tests/test_calc.py::test_y[c] - d]"
        assert f"Failing: {TARGETS[0]}, {TARGETS[1]}, {dashed}" in obs.text
        env.step("patch\n" + unified_diff(CALC, FIXED, "calc.py"))
        verdict = env.verify()
        assert verdict.outcome == "success", verdict.evidence
        assert (verdict.evidence["target_total"], verdict.evidence["target_unresolved"]) == (3, 0)
    finally:
        env.close()

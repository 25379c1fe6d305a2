"""The run memo: a test run on the same files is recalled, never one that timed out or changed the files."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from test_env import CALC, TESTS, make_task, with_parametrised_tests

from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.run_memo import TIMEOUT_MARGIN, RunMemo
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig


class CountingSandbox(Sandbox):
    """The real sandbox, counting the commands it runs."""

    def __init__(self, config: SandboxConfig) -> None:
        self.runs = 0
        super().__init__(config)

    def run(self, *args, **kwargs):
        self.runs += 1
        return super().run(*args, **kwargs)


@pytest.fixture(scope="module")
def sandbox() -> CountingSandbox:
    return CountingSandbox(SandboxConfig())


def _unique(text: str) -> str:
    # The memo is process-wide: files no other test uses keep this test's counts its own.
    return f"# {uuid.uuid4().hex}\n{text}"


def test_lru_evicts_the_least_recently_used_and_honours_the_timeout_margin() -> None:
    memo = RunMemo(2)
    memo.put("a", 1, duration_s=1.0)
    memo.put("b", 2, duration_s=1.0)
    assert memo.get("a", timeout_s=10) == 1  # "a" is now the most recent
    memo.put("c", 3, duration_s=1.0)
    assert memo.get("b", timeout_s=10) is None and memo.get("a", timeout_s=10) == 1
    assert memo.get("c", timeout_s=1.0 / TIMEOUT_MARGIN) == 3
    assert memo.get("c", timeout_s=0.99 / TIMEOUT_MARGIN) is None  # too close to the limit: run again
    assert (memo.hits, memo.misses) == (3, 2)
    empty = RunMemo(0)
    empty.put("a", 1, duration_s=0.0)
    assert len(empty) == 0 and empty.get("a", timeout_s=10) is None
    with pytest.raises(ValueError):
        RunMemo(-1)


def test_a_second_episode_on_the_same_files_recalls_the_runs_and_sees_the_same(
    tmp_path: Path, sandbox: CountingSandbox
) -> None:
    calc = _unique(CALC)
    task = make_task(tmp_path, files={"calc.py": calc, "tests/test_calc.py": TESTS})
    fix = "patch\n" + unified_diff(calc, calc.replace("return a - b", "return a + b"), "calc.py")
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        sandbox.runs = 0
        first = env.reset(task, seed=0)
        first_patch = env.step(fix)
        assert sandbox.runs == 3  # baseline, traced run, the patch's test run
        second = env.reset(task, seed=1)
        second_patch = env.step(fix)
        assert sandbox.runs == 3  # all three recalled
        assert (second.text, second.candidates) == (first.text, first.candidates)
        assert second_patch.observation.text == first_patch.observation.text
        assert second_patch.terminated and second_patch.info == first_patch.info
        assert env.verify().outcome == "success"
        assert sandbox.runs == 4  # the verifier always runs afresh
    finally:
        env.close()


def test_memo_off_runs_every_time(tmp_path: Path, sandbox: CountingSandbox) -> None:
    task = make_task(tmp_path, files={"calc.py": _unique(CALC), "tests/test_calc.py": TESTS})
    env = ShellBugfixEnv(ShellEnvConfig(run_memo=0), sandbox=sandbox)
    try:
        sandbox.runs = 0
        env.reset(task, seed=0)
        env.reset(task, seed=0)
        assert sandbox.runs == 4
    finally:
        env.close()


def test_a_run_that_changes_the_files_or_times_out_is_not_recalled(
    tmp_path: Path, sandbox: CountingSandbox
) -> None:
    writer = "from pathlib import Path\n\n\ndef test_writes():\n    Path('out.txt').write_text('x')\n"
    files = {"calc.py": _unique(CALC), "tests/test_writes.py": writer}
    task = make_task(tmp_path, files=files, oracle=False)
    env = ShellBugfixEnv(ShellEnvConfig(line_spectrum=False), sandbox=sandbox)
    try:
        sandbox.runs = 0
        env.reset(task, seed=0)
        env.reset(task, seed=0)
        assert sandbox.runs == 2  # the suite writes out.txt into the working copy: never stored
    finally:
        env.close()
    slow = "def test_forever():\n    while True:\n        pass\n"
    task = make_task(tmp_path, files={"calc.py": _unique(CALC), "tests/test_slow.py": slow},
                     timeout_s=1.5, oracle=False, task_id="slow-1")
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        sandbox.runs = 0
        env.reset(task, seed=0)
        env.reset(task, seed=0)
        assert sandbox.runs == 2  # timed out both times (no traced run: nothing fails)
    finally:
        env.close()


def test_different_files_are_different_runs(tmp_path: Path, sandbox: CountingSandbox) -> None:
    calc = _unique(CALC)
    task = make_task(tmp_path, files={"calc.py": calc, "tests/test_calc.py": TESTS})
    fixed = make_task(tmp_path, files={"calc.py": calc.replace("a - b", "a + b"), "tests/test_calc.py": TESTS},
                      oracle=False, task_id="calc-fixed")
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        assert "2 failed" in env.reset(task, seed=0).text
        assert "3 passed" in env.reset(fixed, seed=0).text
    finally:
        env.close()


def test_runs_under_another_sandbox_are_not_recalled(tmp_path: Path, sandbox: CountingSandbox) -> None:
    # Environments share the memo; one given a sandbox of other settings (here an extra variable the
    # tests read) must not be handed the runs of the other, though their ShellEnvConfig is the same.
    flag = "import os\n\n\ndef test_flag():\n    assert os.environ.get('FLAG') == '1'\n"
    task = make_task(tmp_path, files={"calc.py": _unique(CALC), "tests/test_flag.py": flag}, oracle=False)
    flagged = Sandbox(SandboxConfig(env=(("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1"), ("FLAG", "1"))))
    plain, other = ShellBugfixEnv(sandbox=sandbox), ShellBugfixEnv(sandbox=flagged)
    try:
        assert "1 failed" in plain.reset(task, seed=0).text
        assert "1 passed" in other.reset(task, seed=0).text
    finally:
        plain.close()
        other.close()


def test_a_run_with_more_output_than_the_memo_keeps_is_run_again(
    tmp_path: Path, sandbox: CountingSandbox
) -> None:
    chatty = "def test_chatty():\n    print('x' * 300_000)\n    assert False\n"  # shown by pytest: it fails
    task = make_task(tmp_path, files={"calc.py": _unique(CALC), "tests/test_chatty.py": chatty}, oracle=False)
    env = ShellBugfixEnv(ShellEnvConfig(line_spectrum=False), sandbox=sandbox)
    try:
        sandbox.runs = 0
        env.reset(task, seed=0)
        env.reset(task, seed=0)
        assert sandbox.runs == 2  # 300 KB of output: remembering it would break the memo's memory bound
    finally:
        env.close()


def test_a_recalled_run_brings_its_test_report_back(tmp_path: Path, sandbox: CountingSandbox) -> None:
    # 400 passing ids are more than an 8 KiB output cap keeps: only the report counts them all, so a recall
    # that handed back the output alone would see fewer passing tests than the run it recalls.
    many = with_parametrised_tests(TESTS, 400)
    task = make_task(tmp_path, files={"calc.py": _unique(CALC), "tests/test_calc.py": many}, oracle=False)
    env = ShellBugfixEnv(ShellEnvConfig(line_spectrum=False, test_output_cap_bytes=8192), sandbox=sandbox)
    try:
        sandbox.runs = 0
        first = env.reset(task, seed=0)
        second = env.reset(task, seed=0)
        assert sandbox.runs == 1 and "Tests: 401 passed, 2 failed" in second.text
        assert second.text == first.text
    finally:
        env.close()

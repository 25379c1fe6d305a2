"""Line spectra (traced suite at reset → line suspicion features) and the ``revert`` action."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell import actions as act
from aios_rl.envs.shell.candidates import REVERT_CANDIDATE
from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig
from aios_rl.envs.shell.spectrum import LineSpectrum, parse_spectrum, rank_fractions, spectrum_argv
from test_env import CALC, FIXED, TESTS, make_task, with_parametrised_tests


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig())


def test_ochiai_by_hand() -> None:
    text = json.dumps({
        "t::a": {"failed": True, "lines": [["m.py", 1], ["m.py", 2]]},
        "t::b": {"failed": True, "lines": [["m.py", 1]]},
        "t::c": {"failed": False, "lines": [["m.py", 1], ["m.py", 3]]},
    })  # fmt: skip
    s = parse_spectrum(text)
    assert s.failed_total == 2 and s.counts[("m.py", 1)] == (2, 1)
    assert s.ochiai("m.py", 1) == pytest.approx(2 / (2 * 3) ** 0.5)
    assert s.ochiai("m.py", 2) == pytest.approx(1 / (2 * 1) ** 0.5)
    assert s.ochiai("m.py", 3) == 0.0 and s.ochiai("other.py", 1) == 0.0
    assert s.file_max("m.py") == pytest.approx(s.ochiai("m.py", 1))
    assert LineSpectrum(0).ochiai("m.py", 1) == 0.0


@pytest.mark.parametrize("bad", ["[]", "{", '{"t": {"lines": []}}', '{"t": {"failed": true, "lines": [1]}}',
                                 '{"t": {"failed": true, "lines": [["m.py", 1e999]]}}'])
def test_malformed_spectrum_is_an_env_error(bad: str) -> None:
    with pytest.raises(EnvError, match="malformed"):
        parse_spectrum(bad)


def test_rank_fractions_and_argv() -> None:
    assert rank_fractions([0.5, 1.0, 0.5, 0.0]) == [1 / 3, 0.0, 1 / 3, 1.0]
    assert rank_fractions([0.7]) == [0.0] and rank_fractions([]) == []
    assert spectrum_argv(["make", "test"]) is None
    argv = spectrum_argv(["python", "-m", "pytest", "-q", "tests"])
    assert argv is not None and argv[:2] == ["python", "-c"] and argv[3:5] == ["-q", "tests"]
    # Any python the reporter accepts is traced too (a python3 task got a report but no line features).
    for python in ("python3", "/usr/bin/python3.11"):
        argv = spectrum_argv([python, "-m", "pytest", "tests"])
        assert argv is not None and argv[:2] == [python, "-c"] and argv[3] == "tests"
    assert spectrum_argv(["python3", "-m", "unittest"]) is None


def test_revert_parses_in_text_and_json_forms() -> None:
    assert isinstance(act.parse_action("revert"), act.Revert)
    assert isinstance(act.parse_action('{"action": "revert"}'), act.Revert)
    assert isinstance(act.parse_action("revert calc.py"), act.Invalid)
    assert isinstance(act.parse_action('{"action": "revert", "path": "x"}'), act.Invalid)


def test_the_buggy_line_is_the_most_suspicious_patch_site(tmp_path: Path, sandbox: Sandbox) -> None:
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        obs = env.reset(make_task(tmp_path), seed=0)
        assert not (env._repo / ".aios-line-spectrum.json").exists()  # read and removed
        feats = dict(zip(obs.candidates, obs.candidate_features))
        fix = "patch\n" + unified_diff(CALC, FIXED, "calc.py")
        assert feats[fix]["line_suspicion"] == pytest.approx(1.0)  # both failing tests, no passing one
        assert feats[fix]["line_suspicion_rank"] == 0.0
        clamp = [f for c, f in feats.items() if c.startswith("patch") and "return high" in c]
        assert clamp and all(f["line_suspicion"] < 1.0 for f in clamp)
        assert feats["read calc.py"]["line_suspicion"] == pytest.approx(1.0)
    finally:
        env.close()
    off = ShellBugfixEnv(ShellEnvConfig(line_spectrum=False), sandbox=sandbox)
    try:
        obs = off.reset(make_task(tmp_path / "off"), seed=0)
        assert all(f["line_suspicion"] == 0.0 for f in obs.candidate_features)
    finally:
        off.close()


def test_revert_restores_the_reset_state_without_rerunning(tmp_path: Path, sandbox: Sandbox) -> None:
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        opening = env.reset(make_task(tmp_path), seed=0)
        assert REVERT_CANDIDATE not in opening.candidates
        wrong = "patch\n" + unified_diff(CALC, CALC.replace("return low\n", "return high\n"), "calc.py")
        after = env.step(wrong)
        assert REVERT_CANDIDATE in after.observation.candidates
        feats = dict(zip(after.observation.candidates, after.observation.candidate_features))
        assert feats[REVERT_CANDIDATE]["kind_revert"] == 1.0
        assert feats[REVERT_CANDIDATE]["modified"] == 1.0 and feats[REVERT_CANDIDATE]["last_patch_failed"] == 1.0
        reverted = env.step(REVERT_CANDIDATE)
        assert reverted.info["action_kind"] == "revert" and not reverted.info.get("patch_applied")
        assert (env._repo / "calc.py").read_text() == CALC
        assert REVERT_CANDIDATE not in reverted.observation.candidates
        assert "restored to its state at reset" in reverted.observation.text
        assert "[at reset; restored at step 2]" in reverted.observation.text
        assert reverted.info["tests_failed"] == 2  # the results at reset
        # The wrong patch was applied to this very working copy before: it is not offered again.
        assert wrong not in reverted.observation.candidates
        assert all(f["modified"] == 0.0 for f in reverted.observation.candidate_features)
        # The same environment state as at reset (files and test results), though the text differs: one
        # GiGPO anchor state; the patched working copy is another.
        assert reverted.observation.state_key == opening.state_key is not None
        assert reverted.observation.text != opening.text
        assert after.observation.state_key != opening.state_key
        fixed = env.step("patch\n" + unified_diff(CALC, FIXED, "calc.py"))
        assert fixed.terminated and env.verify().outcome == "success"
    finally:
        env.close()


def test_every_reset_of_a_task_starts_from_the_same_files_when_the_traced_run_writes(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    # The suite appends to a log in the working copy on every run, the traced one included. A traced run
    # that changed the files must not be recalled from the memo: the next reset would skip its writes and
    # start from other files than the first.
    logging_tests = 'open("runs.log", "a").write("run\\n")\n' + TESTS
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_calc.py": logging_tests})
    logs = []
    for _ in range(2):
        env = ShellBugfixEnv(sandbox=sandbox)
        try:
            env.reset(task, seed=0)
            logs.append((env._repo / "runs.log").read_text())
        finally:
            env.close()
    assert logs[0] == logs[1]


def _fix_suspicion(env: ShellBugfixEnv, task) -> float:
    obs = env.reset(task, seed=0)
    feats = dict(zip(obs.candidates, obs.candidate_features, strict=True))
    return feats["patch\n" + unified_diff(CALC, FIXED, "calc.py")]["line_suspicion"]


def test_a_test_that_changes_directory_is_traced_as_it_runs(tmp_path: Path, sandbox: Sandbox) -> None:
    # The first test moves into tests/ and stays there (until pytest returns); the next ones import calc
    # when they run. Under python -m pytest the copy's root is on sys.path by its absolute name, so they
    # find it; the traced run must too, or it traces failures the real run does not have.
    leaves = "import os\n\n\ndef test_a_moves_away():\n    os.chdir('tests')\n"
    lazy = TESTS.replace("from calc import add, clamp\n", "").replace(
        "():\n", "():\n    from calc import add, clamp\n\n")
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_a.py": leaves, "tests/test_calc.py": lazy})
    env = ShellBugfixEnv(sandbox=sandbox)
    try:
        assert "Tests: 2 passed, 2 failed" in env.reset(task, seed=0).text
        assert _fix_suspicion(env, task) == pytest.approx(1.0)
        assert env._state is not None and env._state.spectrum is not None
        assert env._state.spectrum.failed_total == 2
    finally:
        env.close()


def test_a_spectrum_bigger_than_the_copy_cap_leaves_is_still_read(tmp_path: Path, sandbox: Sandbox) -> None:
    # 400 traced tests make a spectrum of about 60 KB, more than the room the 40 KB copy cap leaves: the
    # spectrum is the environment's file, read before the size check undoes what the run left in the copy.
    many = with_parametrised_tests(TESTS, 400, check="clamp(i, 0, 3) <= 3")
    task = make_task(tmp_path, files={"calc.py": CALC, "tests/test_calc.py": many})
    env = ShellBugfixEnv(ShellEnvConfig(max_copy_bytes=40_000), sandbox=sandbox)
    try:
        assert _fix_suspicion(env, task) == pytest.approx(1.0)
        assert not list(env._repo.rglob(".aios-line-spectrum.json"))
    finally:
        env.close()

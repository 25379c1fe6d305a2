"""check_task on hand-made tasks in the real bubblewrap sandbox, and the pytest-output parser it uses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_env import with_parametrised_tests

from aios_rl.contracts.errors import ContractError
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.pytest_output import is_pytest, parse_pytest
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import ShellTaskManifest, load_tasks, read_manifest, write_task
from aios_rl.envs.shell.validation import (
    PYTEST_COMMAND,
    SuiteRun,
    check_task,
    check_tasks,
    judge,
    run_suite,
    validation_sandbox,
)

GOOD = "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"
BUGGY = GOOD.replace("a + b", "a - b")
TESTS = (
    "from calc import add, neg\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_neg():\n    assert neg(2) == -2\n"
)
ADD_ID = "tests/test_calc.py::test_add"


@pytest.fixture(scope="module")
def sandbox():
    return validation_sandbox()


def make_task(root: Path, task_id: str, source: str, patch: str | None, **fields) -> Path:
    """A task directory ``root/task_id`` holding calc.py (``source``) and its tests."""
    repo = root / f"src-{task_id}"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(source)
    (repo / "tests" / "test_calc.py").write_text(fields.pop("tests", TESTS))
    manifest = ShellTaskManifest(task_id=task_id, split="train", prompt="Fix the failing tests.",
                                 test_command=list(PYTEST_COMMAND), reference_patch=patch, **fields)
    root.joinpath("tasks").mkdir(exist_ok=True)
    return write_task(root / "tasks", manifest, repo)


def failed_and_counts(output: str) -> tuple[list[str], dict[str, int]]:
    """What :func:`run_suite` keeps of a run's output (pytest's default summary, no ``-rA``)."""
    run = parse_pytest(output, 1)
    return list(run.failing), run.counts


def test_parse_pytest_output_ids_and_counts() -> None:
    out = "\n".join([
        ".F.E",
        "=========================== short test summary info ============================",
        "FAILED tests/test_a.py::test_x - AssertionError: assert 1 == 2",
        "FAILED tests/test_a.py::test_p[1-2]",
        "FAILED tests/test_a.py::test_p[e - f] - assert 'e - f' == 'c-d'",
        "ERROR tests/test_b.py::test_y - RuntimeError: boom",
        "3 failed, 1 passed, 1 error, 3 warnings in 0.12s",
    ])
    failed, counts = failed_and_counts(out)
    assert failed == [
        "tests/test_a.py::test_x",
        "tests/test_a.py::test_p[1-2]",
        "tests/test_a.py::test_p[e - f]",  # a " - " inside the brackets is part of the id
        "tests/test_b.py::test_y",
    ]
    assert counts == {"failed": 3, "passed": 1, "error": 1, "warnings": 3}


def test_parse_pytest_output_verbose_summary_and_no_tests() -> None:
    assert failed_and_counts("==== 27 passed in 0.04s ====")[1] == {"passed": 27}
    assert failed_and_counts("==== 2 errors in 0.04s ====")[1] == {"error": 2}
    assert failed_and_counts("no tests ran in 0.01s") == ([], {})
    assert failed_and_counts("random text\nFAILED: build broke") == ([], {})


def test_judge_rules() -> None:
    fail = SuiteRun(returncode=1, timed_out=False, failed=[ADD_ID], counts={"failed": 1, "passed": 1})
    ok = SuiteRun(returncode=0, timed_out=False, counts={"passed": 2})
    hang = SuiteRun(returncode=-9, timed_out=True, limit_hit="timeout")
    empty = SuiteRun(returncode=5, timed_out=False)
    cmd = list(PYTEST_COMMAND)
    assert judge(fail, ok, cmd, 9) == ("valid",
                                       "fails as given (1 failing) and passes with the reference patch")
    assert judge(fail, None, cmd, 9)[0] == "valid"
    assert judge(ok, ok, cmd, 9)[1].startswith("tests already pass as given")
    assert judge(fail, fail, cmd, 9)[1] == f"tests still fail with the reference patch: {ADD_ID}"
    assert judge(hang, ok, cmd, 9)[1] == "as given: timed out after 9s"
    assert judge(fail, hang, cmd, 9)[1] == "with the reference patch: timed out after 9s"
    assert judge(empty, ok, cmd, 9)[1] == "as given: the test command collects no tests (exit 5)"
    assert judge(empty, None, ["make", "test"], 9)[0] == "valid"  # not pytest: any failure counts


def test_valid_task(tmp_path: Path, sandbox) -> None:
    task = make_task(tmp_path, "good", BUGGY, unified_diff(BUGGY, GOOD, "calc.py"), target_tests=[ADD_ID])
    check = check_task(task, sandbox)
    assert check.verdict == "valid", check.reason
    assert check.failing_tests == [ADD_ID] and check.passing_tests == [ADD_ID]
    assert check.given is not None and check.given.passed == 1 and check.given.n_failed == 1
    assert check.patched is not None and check.patched.returncode == 0 and check.patched.passed == 2


def test_invalid_tasks_say_why(tmp_path: Path, sandbox) -> None:
    tasks = [
        make_task(tmp_path, "passes", GOOD, None),
        make_task(tmp_path, "never", BUGGY, unified_diff(BUGGY, BUGGY.replace("-a", "a"), "calc.py")),
        make_task(tmp_path, "noapply", BUGGY, unified_diff(GOOD.replace("a + b", "b + a"), GOOD, "calc.py")),
        make_task(tmp_path, "target", BUGGY, unified_diff(BUGGY, GOOD, "calc.py"),
                  target_tests=["tests/test_calc.py::test_neg"]),
        make_task(tmp_path, "nopatch", BUGGY, None),
    ]
    checks = {c.task_id: c for c in check_tasks(tasks, sandbox, workers=2)}
    assert checks["passes"].reason == "tests already pass as given; a task must fail before its fix"
    still = "tests/test_calc.py::test_add, tests/test_calc.py::test_neg"
    assert checks["never"].reason == f"tests still fail with the reference patch: {still}"
    assert checks["noapply"].reason.startswith("reference patch does not apply: hunk at line 1 of calc.py")
    assert checks["target"].reason == "target tests do not fail as given: tests/test_calc.py::test_neg"
    assert checks["nopatch"].verdict == "valid" and checks["nopatch"].patched is None
    assert [c.verdict for c in checks.values()] == ["invalid"] * 4 + ["valid"]


def test_a_reference_patch_is_judged_without_its_test_changes(tmp_path: Path, sandbox) -> None:
    weaken = unified_diff(TESTS, TESTS.replace("assert add(2, 3) == 5", "assert True"), "tests/test_calc.py")
    check = check_task(make_task(tmp_path, "weakens", BUGGY, weaken), sandbox)
    assert check.verdict == "invalid"
    assert check.reason.startswith("reference patch changes only tests/test_calc.py")
    # a fix that also adds a regression test is valid: the verifier judges the code with the task's tests
    regression = "def test_add_zero():\n    from calc import add\n    assert add(0, 0) == 0\n"
    with_test = unified_diff(BUGGY, GOOD, "calc.py") + unified_diff("", regression, "tests/test_more.py")
    assert check_task(make_task(tmp_path, "adds-a-test", BUGGY, with_test), sandbox).verdict == "valid"
    # a fix that only works with its test edit is invalid, and says why
    both = unified_diff(BUGGY, BUGGY.replace("-a", "a"), "calc.py") + weaken
    mixed = check_task(make_task(tmp_path, "needs-the-edit", BUGGY, both), sandbox)
    assert mixed.verdict == "invalid" and "left out, as the verifier" in mixed.reason


def test_timeout_is_invalid(tmp_path: Path, sandbox) -> None:
    looping = GOOD.replace("return -a", "while True:\n        pass")
    task = make_task(tmp_path, "loops", looping, unified_diff(looping, GOOD, "calc.py"), timeout_s=3)
    check = check_task(task, sandbox)
    assert check.reason == "as given: timed out after 3s"
    assert check.given is not None and check.given.timed_out


def test_broken_directories_are_invalid_without_running(tmp_path: Path, sandbox) -> None:
    good = make_task(tmp_path, "ok", BUGGY, None)
    (tmp_path / "nomanifest" / "repo").mkdir(parents=True)
    norepo = tmp_path / "norepo"
    norepo.mkdir()
    (norepo / "manifest.json").write_text((good / "manifest.json").read_text())
    badjson = tmp_path / "badjson"
    (badjson / "repo").mkdir(parents=True)
    (badjson / "manifest.json").write_text('{"task_id": "x",')
    badfield = tmp_path / "badfield"
    (badfield / "repo").mkdir(parents=True)
    data = json.loads((good / "manifest.json").read_text())
    (badfield / "manifest.json").write_text(json.dumps({**data, "split": "dev"}))
    dirs = (tmp_path / "nomanifest", norepo, badjson, badfield)
    reasons = {d.name: check_task(d, sandbox).reason for d in dirs}
    assert reasons["nomanifest"] == "missing manifest.json"
    assert reasons["norepo"] == "missing repo/ directory"
    assert reasons["badjson"].startswith("invalid manifest: <json>: got malformed JSON at line 1")
    assert reasons["badfield"].startswith("invalid manifest: split: got \"dev\"")
    # a key given twice: JSON readers keep the last, so the first "split" was silently dropped
    twice = tmp_path / "twice"
    (twice / "repo").mkdir(parents=True)
    text = json.dumps(data).replace('"split":', '"split": "train", "split":', 1)
    (twice / "manifest.json").write_text(text)
    assert check_task(twice, sandbox).reason.startswith("invalid manifest: <json>: got duplicate key 'split'")


def test_a_repo_that_cannot_be_copied_is_invalid_not_a_crash(tmp_path: Path, sandbox) -> None:
    broken = make_task(tmp_path, "fifo", BUGGY, None)
    os.mkfifo(broken / "repo" / "pipe")  # copytree refuses named pipes
    good = make_task(tmp_path, "ok", BUGGY, None)
    checks = check_tasks([broken, good], sandbox)
    assert [c.verdict for c in checks] == ["invalid", "valid"]
    assert checks[0].reason.startswith("cannot copy repo/:") and "named pipe" in checks[0].reason


def test_unreadable_manifests_are_contract_errors(tmp_path: Path, sandbox) -> None:
    latin = tmp_path / "tasks" / "latin"
    (latin / "repo").mkdir(parents=True)
    text = '{"task_id": "latin", "split": "train", "prompt": "Réparez", "test_command": ["true"]}'
    (latin / "manifest.json").write_bytes(text.encode("latin-1"))
    check = check_task(latin, sandbox)
    assert check.verdict == "invalid" and "not UTF-8" in check.reason
    with pytest.raises(ContractError, match="not UTF-8"):
        load_tasks(tmp_path / "tasks")
    (latin / "manifest.json").unlink()
    (latin / "manifest.json").mkdir()
    with pytest.raises(ContractError, match="manifest.json"):
        read_manifest(latin)


def test_run_suite_leaves_the_source_untouched(tmp_path: Path, sandbox) -> None:
    task = make_task(tmp_path, "src", GOOD, None)
    repo = task / "repo"

    def state() -> dict[str, tuple[bytes, int]]:  # every path with its content and owner
        return {str(p.relative_to(repo)): (p.read_bytes() if p.is_file() else b"", p.stat().st_uid)
                for p in sorted(repo.rglob("*"))}

    before = state()
    run = run_suite(repo, PYTEST_COMMAND, 30, sandbox, files={"calc.py": BUGGY})
    assert run.returncode == 1 and run.failed == [ADD_ID] and run.passed == 1
    assert state() == before  # the mutant went to a copy; nothing chowned, cached or written here
    assert set(before) == {"calc.py", "tests", "tests/test_calc.py"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["pytest", "-q"], True),
        (["/usr/bin/pytest-3"], True),
        (["py.test"], True),
        (["python", "-m", "pytest", "tests"], True),
        (["python3", "-X", "dev", "-m", "pytest"], True),
        (["python", "-m", "unittest"], False),
        (["make", "test"], False),
        (["python", "-m"], False),
        ([], False),
    ],
)
def test_one_rule_decides_whether_a_command_runs_pytest(argv: list[str], expected: bool) -> None:
    assert is_pytest(argv) is expected


def test_parse_pytest_final_line_with_subtests() -> None:
    # pytest 9 reports subtests (its own and unittest's subTest) with two-word counts on the final line.
    out = "\n".join([
        "PASSED tests/test_u.py::T::test_a",
        "1 passed, 3 subtests passed in 0.60s",
    ])
    run = parse_pytest(out, 0)
    assert run.complete and run.passed
    assert run.counts == {"passed": 1, "subtests passed": 3}
    failed, counts = failed_and_counts(
        "FAILED tests/t.py::test_sub - contains 1 failed subtest\n"
        "3 failed, 5 passed, 1 xfailed, 1 warning, 2 subtests passed in 1.17s"
    )
    assert failed == ["tests/t.py::test_sub"]
    assert counts == {"failed": 3, "passed": 5, "xfailed": 1, "warning": 1, "subtests passed": 2}


def test_parse_pytest_failed_unittest_subtest_fails_its_test() -> None:
    # pytest 9 reports a unittest test whose subTest failed as PASSED, plus a SUBFAILED line naming it.
    out = "\n".join([
        "PASSED tests/test_u.py::T::test_a",
        "PASSED tests/test_u.py::T::test_b",
        "SUBFAILED(i=1) tests/test_u.py::T::test_a - AssertionError: False is not true",
        "SUBFAILED[a - b] (x=(1, 2)) tests/test_u.py::T::test_c[p q] - AssertionError",
        "SUBFAILED(<subtest>) tests/test_u.py::T::test_d",
        "3 failed, 2 passed, 2 subtests passed in 0.70s",
    ])
    run = parse_pytest(out, 1)
    assert run.passing == ("tests/test_u.py::T::test_b",)
    assert run.failing == ("tests/test_u.py::T::test_a", "tests/test_u.py::T::test_c[p q]",
                           "tests/test_u.py::T::test_d")


def test_parse_pytest_keeps_a_parametrised_id_holding_a_dash_whole() -> None:
    # Real pytest 9 output (-rA --tb=short) for ids=["a] - b", "ok", "c] - d"] and a method with "e] - f".
    out = "\n".join([
        "..FF",
        "=================================== FAILURES ===================================",
        "________________________________ test_y[c] - d] ________________________________",
        "test_x.py:5: in test_y",
        "    assert v != 3",
        "E   assert 3 != 3",
        "____________________________ TestBox.test_z[e] - f] ____________________________",
        "test_x.py:11: in test_z",
        "E   assert 4 == 5",
        "=========================== short test summary info ============================",
        "PASSED test_x.py::test_y[a] - b]",
        "PASSED test_x.py::test_y[ok]",
        "FAILED test_x.py::test_y[c] - d] - assert 3 != 3",
        "FAILED test_x.py::TestBox::test_z[e] - f] - assert 4 == 5",
        "2 failed, 2 passed in 1.52s",
    ])
    run = parse_pytest(out, 1)
    assert run.passing == ("test_x.py::test_y[a] - b]", "test_x.py::test_y[ok]")
    assert run.failing == ("test_x.py::test_y[c] - d]", "test_x.py::TestBox::test_z[e] - f]")
    long_id = "test_w.py::test_w[g] - " + "h" * 80 + "]"  # its header is too long for more than one "_"
    errored = parse_pytest(f"_ ERROR at setup of {long_id[11:]} _\nERROR {long_id}\n1 error in 0.1s\n", 1)
    assert errored.failing == (long_id,)


def test_a_suite_whose_summary_passes_the_output_cap_is_judged_by_its_report(tmp_path: Path) -> None:
    # 400 failing ids with long names make a short summary of about 50 KiB: an 8 KiB cap keeps its last
    # 4 KiB only, so test_add's FAILED line (the first) never reaches the host. The report file names it.
    many = with_parametrised_tests(TESTS, 400, check="add(i, 1) == i + 1")
    small = Sandbox(validation_sandbox().config.model_copy(update={"output_cap_bytes": 8192}))
    task = make_task(tmp_path, "large", BUGGY, unified_diff(BUGGY, GOOD, "calc.py"), target_tests=[ADD_ID],
                     tests=many)
    check = check_task(task, small)
    assert check.verdict == "valid", check.reason
    assert check.given is not None and check.given.output_truncated
    assert len(check.failing_tests) == 401 and check.failing_tests[0] == ADD_ID
    assert check.passing_tests == check.failing_tests

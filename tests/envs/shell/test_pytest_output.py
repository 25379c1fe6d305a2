"""The test report: what REPORTER writes, read as the -rA summary would be, in the real sandbox."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.pytest_output import (
    PYTEST_REPORT_ARGS,
    RunReport,
    parse_pytest,
    parse_report,
    reported_run,
    reporter_argv,
)
from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig

# Every outcome the -rA summary lists: the report must give the same passing and failing ids, in order.
OUTCOMES = '''import unittest

import pytest


@pytest.fixture
def broken():
    raise RuntimeError("setup")


@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown")


def test_pass():
    pass


def test_fail():
    assert 1 == 2


def test_setup_error(broken):
    pass


def test_teardown_error(bad_teardown):
    pass


def test_fail_and_teardown_error(bad_teardown):
    assert 0


@pytest.mark.skip(reason="no")
def test_skipped():
    pass


def test_skipped_inside():
    pytest.skip("inside")


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert 0


@pytest.mark.xfail(reason="fixed")
def test_xpass():
    pass


@pytest.mark.xfail(strict=True)
def test_xpass_strict():
    pass


@pytest.mark.parametrize("case", ["a] - b", "ok", "c] - d"])
def test_dash(case):
    assert case != "c] - d"


class TestBox:
    @pytest.mark.parametrize("case", ["e] - f"])
    def test_z(self, case):
        assert case == "g"


def test_subtests(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i != 1


def test_subtests_all_pass(subtests):
    with subtests.test(i=0):
        pass


class T(unittest.TestCase):
    def test_sub_fails(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(i, 0)

    def test_sub_passes(self):
        with self.subTest(i=0):
            pass
'''


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(output_cap_bytes=4 * 1024 * 1024))


def _run(sandbox: Sandbox, files: dict[str, str], args: list[str]) -> tuple[str, RunReport | None, int]:
    """The text, report and exit status of ``python -m pytest ARGS`` run through the reporter."""
    root = Path(tempfile.mkdtemp(prefix="aios-rl-report-test-"))
    try:
        repo = root / "repo"
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        argv = reporter_argv(["python", "-m", "pytest", *args], ".report.json")
        assert argv is not None
        result = sandbox.run(argv, repo, timeout_s=120)
        report_file = repo / ".report.json"
        report = parse_report(report_file.read_text()) if report_file.exists() else None
        return result.stdout + result.stderr, report, result.returncode
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_report_reads_every_outcome_as_the_summary_does(sandbox: Sandbox) -> None:
    output, report, code = _run(sandbox, {"tests/test_outcomes.py": OUTCOMES}, ["-q", "tests"])
    assert report is not None and report.exitstatus == code == 1
    text, reported = parse_pytest(output, code), reported_run(report, output)
    assert (reported.passing, reported.failing) == (text.passing, text.failing)
    assert (reported.counts, reported.frames, reported.complete) == (text.counts, text.frames, True)
    node = "tests/test_outcomes.py::"
    assert reported.passing == tuple(node + n for n in (
        "test_pass", "test_dash[a] - b]", "test_dash[ok]", "test_subtests_all_pass", "T::test_sub_passes",
        "test_xpass"))
    assert set(reported.failing) == {node + n for n in (
        "test_fail", "test_setup_error", "test_teardown_error", "test_fail_and_teardown_error",
        "test_xpass_strict", "test_dash[c] - d]", "TestBox::test_z[e] - f]", "test_subtests",
        "T::test_sub_fails")}
    assert report.outcomes[node + "test_xfail"] == "xfailed"
    assert {report.outcomes[node + n] for n in ("test_skipped", "test_skipped_inside")} == {"skipped"}


def test_the_report_names_a_module_that_fails_to_collect(sandbox: Sandbox) -> None:
    files = {"tests/test_ok.py": "def test_ok():\n    pass\n", "tests/test_bad.py": "import nope\n"}
    output, report, code = _run(sandbox, files, ["-q", "tests"])
    assert report is not None and report.exitstatus == code == 2
    text, reported = parse_pytest(output, code), reported_run(report, output)
    assert reported.failing == text.failing == ("tests/test_bad.py",)
    assert reported.passing == text.passing == ()


def test_the_report_ids_are_as_printed_from_a_sub_directory_root(sandbox: Sandbox) -> None:
    # An ini file in tests/ makes it pytest's rootdir; ids are still printed relative to the invocation dir.
    files = {"tests/pytest.ini": "[pytest]\n", "tests/test_ok.py": "def test_ok():\n    pass\n"}
    output, report, code = _run(sandbox, files, ["-q", "tests"])
    assert report is not None and code == 0
    passing = ("tests/test_ok.py::test_ok",)
    assert reported_run(report, output).passing == parse_pytest(output, 0).passing == passing


def test_a_run_the_tests_cut_short_writes_no_report(sandbox: Sandbox) -> None:
    files = {"tests/test_exit.py": "import os\n\n\ndef test_exit():\n    os._exit(0)\n"}
    _, report, code = _run(sandbox, files, ["-q", "tests"])
    assert report is None and code == 0


def test_reporter_argv_takes_python_m_pytest_only() -> None:
    assert reporter_argv(["python3", "-m", "pytest", "-q"], "r.json")[:2] == ["python3", "-c"]
    assert reporter_argv(["python", "-m", "pytest", "-q"], "r")[3:] == ["r", "-q", *PYTEST_REPORT_ARGS]
    for other in (["pytest", "tests"], ["py.test"], ["python", "-X", "dev", "-m", "pytest"], ["make"]):
        assert reporter_argv(other, "r.json") is None


def test_parse_report_rejects_what_the_reporter_does_not_write() -> None:
    report = parse_report('{"exitstatus": 1, "outcomes": {"t.py::b": "failed", "t.py::a": "error"}}')
    run = reported_run(report, "")
    assert run.failing == ("t.py::a", "t.py::b") and run.returncode == 1 and run.complete
    for text in ("", "[]", '{"exitstatus": true, "outcomes": {}}', '{"exitstatus": 0, "outcomes": []}',
                 '{"exitstatus": 0, "outcomes": {"t.py::a": "fine"}}', '{"outcomes": {}}', "[" * 100_000):
        with pytest.raises(EnvError, match="test report is malformed"):
            parse_report(text)

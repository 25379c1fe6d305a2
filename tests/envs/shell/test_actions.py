"""Parsing the shell environment's actions (text and JSON forms) and the command allow-list."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aios_rl.envs.shell.actions import (
    Invalid,
    Patch,
    Read,
    Revert,
    Run,
    Stop,
    action_kind,
    check_command,
    file_arguments,
    parse_action,
    split_command,
)

TEST_COMMAND = ["python", "-m", "pytest", "-q", "tests"]
REPO_FILES = {"calc.py", "pkg/util.py", "tests/test_calc.py"}


def _allowed(command: str) -> str | None:
    argv = split_command(command)
    assert not isinstance(argv, Invalid), argv
    return check_command(argv, TEST_COMMAND, REPO_FILES.__contains__)


def test_text_forms_parse_to_typed_actions() -> None:
    assert parse_action("read calc.py") == Read("calc.py")
    assert parse_action("  read pkg/util.py  ") == Read("pkg/util.py")
    assert parse_action("run grep -n 'a b' calc.py") == Run(("grep", "-n", "a b", "calc.py"))
    assert parse_action("stop done") == Stop("done")
    assert parse_action("stop") == Stop("")
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert parse_action("patch\n" + diff) == Patch(diff=diff)


def test_search_replace_text_form() -> None:
    text = "patch calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n"
    action = parse_action(text)
    assert isinstance(action, Patch) and action.edit is not None and action.diff is None
    assert (action.edit.path, action.edit.search, action.edit.replace) == (
        "calc.py", "    return a - b\n", "    return a + b\n")
    assert isinstance(parse_action("patch calc.py\nno markers here"), Invalid)


def test_json_forms_parse_like_text_forms() -> None:
    assert parse_action('{"action": "read", "path": "calc.py"}') == Read("calc.py")
    assert parse_action('{"action": "run", "command": "ls -la"}') == Run(("ls", "-la"))
    assert parse_action('{"action": "stop", "message": "done"}') == Stop("done")
    assert parse_action('{"action": "stop"}') == Stop("")
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert parse_action(json.dumps({"action": "patch", "diff": diff})) == Patch(diff=diff)
    edit = parse_action(json.dumps({"action": "patch", "path": "calc.py", "search": "a", "replace": "b"}))
    assert isinstance(edit, Patch) and edit.edit is not None and edit.edit.replace == "b"
    fenced = '```json\n{"action": "read", "path": "calc.py"}\n```'
    assert parse_action(fenced) == Read("calc.py")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"action": "read", "path": ', "malformed JSON"),
        ('{"action": "read"}', "read takes"),
        ('{"action": "read", "path": "a", "extra": 1}', "read takes"),
        ('{"action": "fly", "path": "a"}', "unknown action"),
        ('["read", "a"]', "must be an object"),
        ('{"action": "patch", "diff": ""}', "patch needs"),
        ('{"action": "patch", "path": "../x", "search": "a", "replace": "b"}', "leaves the repository"),
        ("read ../secret", "leaves the repository"),
        ("read /etc/passwd", "leaves the repository"),
        ("read", "a path is required"),
        ("patch", "unified diff"),
        ("dance now", "unknown action"),
        ("", "unknown action"),
        ("run", "needs a command"),
        ("run cat calc.py | head", "operator '|'"),
        ("run cat calc.py > out.txt", "operator '>'"),
        ("run ls; rm -rf .", "operator ';'"),
        ("run echo $(whoami)", "command substitution"),
        ("run cat 'unbalanced", "cannot split"),
    ],
)
def test_invalid_actions_are_values_with_reasons(text: str, fragment: str) -> None:
    action = parse_action(text)
    assert isinstance(action, Invalid)
    assert fragment in action.reason
    assert action_kind(action) == "invalid"


def test_quoted_operators_are_plain_arguments() -> None:
    assert split_command("grep -n 'a|b' calc.py") == ["grep", "-n", "a|b", "calc.py"]
    assert split_command('grep ">" calc.py') == ["grep", ">", "calc.py"]
    assert split_command(r"grep \; calc.py") == ["grep", ";", "calc.py"]


@pytest.mark.parametrize(
    "command",
    [
        "python -m pytest -q tests",
        "python -m pytest -q tests -k add",
        "cat calc.py",
        "grep -rn return .",
        "ls -la pkg",
        "head -n 5 calc.py",
        "tail -n 5 calc.py",
        "wc -l calc.py",
        "find . -name '*.py'",
        "diff calc.py pkg/util.py",
        "sed -n '1,20p' calc.py",
        "sed -n 5p calc.py",
        "python calc.py",
        "python pkg/util.py --flag",
    ],
)
def test_allow_list_accepts(command: str) -> None:
    assert _allowed(command) is None


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("rm calc.py", "not allowed"),
        ("bash -c ls", "not allowed"),
        ("/bin/cat calc.py", "not allowed"),
        ("cat /etc/passwd", "leaves the repository"),
        ("cat ../other/file", "leaves the repository"),
        ("grep -f/etc/passwd calc.py", "leaves the repository"),
        ("grep --file=../x calc.py", "leaves the repository"),
        ("python -m pytest -q tests /abs", "leaves the repository"),
        ("find . -exec rm {} +", "only list files"),
        ("find . -delete", "only list files"),
        ("tail -f calc.py", "wait forever"),
        ("sed -i s/a/b/ calc.py", "sed -n"),
        ("sed -n 's/a/b/w out' calc.py", "sed -n"),
        ("python -c 'print(1)'", "file of the repository"),
        ("python missing.py", "file of the repository"),
        ("python -m pip list", "file of the repository"),
    ],
)
def test_allow_list_rejects(command: str, fragment: str) -> None:
    problem = _allowed(command)
    assert problem is not None and fragment in problem


def test_file_arguments_names_the_files_a_command_reads() -> None:
    assert file_arguments(["cat", "calc.py", "pkg/util.py"]) == ["calc.py", "pkg/util.py"]
    assert file_arguments(["head", "-n", "5", "calc.py"]) == ["calc.py"]
    assert file_arguments(["sed", "-n", "1,5p", "calc.py"]) == ["calc.py"]
    assert file_arguments(["ls", "calc.py"]) == []


@given(st.text(max_size=300))
def test_parse_never_raises(text: str) -> None:
    action = parse_action(text)
    assert isinstance(action, (Read, Run, Patch, Revert, Stop, Invalid))


_SAFE_PATH = st.from_regex(r"[a-z][a-z0-9_]{0,8}(/[a-z][a-z0-9_]{0,8}){0,2}\.py", fullmatch=True)


@given(_SAFE_PATH)
def test_json_and_text_read_agree(path: str) -> None:
    as_json = json.dumps({"action": "read", "path": path})
    assert parse_action(f"read {path}") == parse_action(as_json) == Read(path)


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00\n\r", blacklist_categories=("Cs",)),
                        min_size=1, max_size=12), min_size=1, max_size=5))
def test_run_round_trips_through_shlex_quoting(argv: list[str]) -> None:
    action = parse_action("run " + shlex.join(argv))
    if any("`" in a or "$(" in a for a in argv):  # rejected anywhere, quoted or not
        assert isinstance(action, Invalid)
    else:  # quoted operators, spaces and quotes are plain argument text
        assert action == Run(tuple(argv))

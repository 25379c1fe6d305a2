"""The shell task generator: determinism, validity of what it keeps, splits, no leakage, repo mining."""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell import generator as generator_module
from aios_rl.envs.shell import task_set
from aios_rl.envs.shell.generator import (
    NON_INVERTIBLE_EVERY,
    SUMMARY_FILE,
    GeneratorConfig,
    KeptMutant,
    SourceRepo,
    candidate_queue,
    covered_functions,
    generate_benchmark,
    generate_from_repo,
    holdout_splits,
    prepare_out_dir,
    referenced_names,
    snapshot_repo,
)
from aios_rl.envs.shell.mining import _quotas, _RepoState
from aios_rl.envs.shell.mutant_candidates import discover
from aios_rl.envs.shell.mutate import NON_INVERTIBLE_OPERATORS, OPERATORS, Mutation
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.seed_repos import SEEDS_DIR
from aios_rl.envs.shell.task import read_manifest
from aios_rl.envs.shell.validation import PYTEST_COMMAND, SuiteRun, check_task, validation_sandbox

COUNT = 8


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file of a generated task set, by relative path."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def sandbox():
    return validation_sandbox()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, sandbox):
    """The same seed twice and another seed once."""
    root = tmp_path_factory.mktemp("gen")
    runs = {}
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        runs[name] = generate_benchmark(root / name, GeneratorConfig(count=COUNT, seed=seed), sandbox)
    return root, runs


def test_same_seed_same_task_set(generated) -> None:
    root, runs = generated
    a, b = snapshot(root / "a"), snapshot(root / "b")
    assert runs["a"].generated == COUNT
    assert a == b  # ids, manifests, repo files and benchmark.json, byte for byte
    assert len([k for k in a if k.endswith("/manifest.json")]) == COUNT


def test_different_seed_different_task_set(generated) -> None:
    root, runs = generated
    ids = {name: {p.name for p in (root / name).iterdir() if p.is_dir()} for name in ("a", "c")}
    assert ids["a"] != ids["c"]
    assert runs["c"].generated == COUNT


def test_generated_tasks_are_valid_in_the_sandbox(generated, sandbox) -> None:
    root, _ = generated
    tasks = sorted(p for p in (root / "a").iterdir() if p.is_dir())[:6]
    for task in tasks:
        manifest = read_manifest(task)
        check = check_task(task, sandbox)
        assert check.verdict == "valid", (task.name, check.reason)
        assert check.given is not None and check.given.passed >= 1  # the mutant still passes some tests
        assert sorted(check.failing_tests) == sorted(manifest.target_tests or [])
        assert check.passing_tests == check.failing_tests  # the reference patch fixes every one
        meta = manifest.metadata
        assert meta["operator"] in OPERATORS and meta["failing_count"] == len(check.failing_tests)
        assert (task / "repo" / meta["file"]).is_file() and not (task / "repo" / ".git").exists()
        assert 0 <= meta["difficulty"] <= 1 and meta["seed_repo"] == task.name.rsplit("-", 1)[0]


def test_holdout_repos_never_in_train(generated) -> None:
    root, runs = generated
    for name in ("a", "c"):
        manifests = [read_manifest(p) for p in (root / name).iterdir() if p.is_dir()]
        repos = {"train": set(), "holdout": set()}
        for m in manifests:
            repos[m.split].add(m.metadata["seed_repo"])
        unseen = repos["holdout"] - repos["train"]
        assert len(unseen) >= 2 and set(runs[name].holdout_repos) <= unseen
        summary = json.loads((root / name / SUMMARY_FILE).read_text())
        assert summary["train"] + summary["holdout"] == COUNT == len(summary["tasks"])
        assert summary["holdout"] == sum(m.split == "holdout" for m in manifests)


def test_prompt_leaks_nothing_but_failing_tests(generated) -> None:
    root, _ = generated
    for task in sorted(p for p in (root / "a").iterdir() if p.is_dir()):
        m = read_manifest(task)
        prompt = m.prompt
        assert "python -m pytest -q tests" in prompt
        assert all(t in prompt for t in m.target_tests or [])
        assert m.metadata["description"] not in prompt and f"line {m.metadata['line']}" not in prompt
        for op in OPERATORS:
            assert op not in prompt and op.replace("_", " ") not in prompt
        changed = [line[1:].strip() for line in (m.reference_patch or "").splitlines()
                   if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        assert changed and not any(code in prompt for code in changed if len(code) > 3)
        assert m.test_command == list(PYTEST_COMMAND) and m.family == "failing_tests"


def test_quotas_deal_round_robin_and_redistribute() -> None:
    def state(name: str, kept: int, closed: bool) -> _RepoState:
        s = _RepoState(SourceRepo(name, Path("."), PYTEST_COMMAND, (), ()), random.Random(0), closed=closed)
        s.kept = [None] * kept  # type: ignore[list-item]
        return s

    states = [state("h", 0, False), state("a", 0, False), state("b", 0, False)]
    assert _quotas(states, 7) == {"h": 3, "a": 2, "b": 2}
    states[1] = state("a", 1, True)  # a ran out of candidates with one task
    assert _quotas(states, 7) == {"a": 1, "h": 3, "b": 3}


def _kept(repo: str, line: int, n: int) -> KeptMutant:
    mutation = Mutation("comparison_swap", "m.py", "f", line, 0, "<", "<=", "x")
    run = SuiteRun(returncode=1, timed_out=False)
    source = SourceRepo(repo, Path("."), PYTEST_COMMAND, (), ())
    return KeptMutant(source, mutation, "", "", run, f"{repo}-{line}-{n}")


def test_holdout_splits_by_line_and_keeps_a_training_task() -> None:
    kept = [_kept("h", 1, 0), _kept("a", 1, 0), _kept("a", 1, 1), _kept("a", 2, 0), _kept("b", 5, 0),
            *(_kept("c", line, 0) for line in range(10))]
    splits = holdout_splits(kept, ["h"], 0.5, random.Random(0))
    assert splits["h-1-0"] == "holdout" and splits["b-5-0"] == "train"  # b's only task stays in train
    assert splits["a-1-0"] == splits["a-1-1"]  # one line, one split
    assert sum(s == "holdout" for k, s in splits.items() if not k.startswith("h")) >= round(0.5 * 14) - 1
    assert any(s == "train" for k, s in splits.items() if k.startswith("a-"))


def test_covered_functions_follow_tests_and_calls() -> None:
    source = (
        "def _helper(x):\n    return x + 1\n\n\ndef api(x):\n    return _helper(x)\n\n\n"
        "def unused(x):\n    return x - 1\n\n\nclass Box:\n    def __init__(self, v):\n        self.v = v\n\n"
        "    def get(self):\n        return self.v\n\n    def other(self):\n        return 0\n"
    )
    tests = "from mod import api, Box\n\ndef test_a():\n    assert Box(1).get() == api(0)\n"
    names = referenced_names([tests])
    assert {"api", "Box", "get"} <= names and "unused" not in names
    assert covered_functions(source, names) == ["_helper", "api", "Box.__init__", "Box.get"]


def test_candidate_queue_alternates_operators() -> None:
    repo = SourceRepo("roman", SEEDS_DIR / "roman", PYTEST_COMMAND, ("roman.py",), ("tests/test_roman.py",))
    queue = list(candidate_queue(repo, OPERATORS, random.Random(0)))
    invertible = [op for op in OPERATORS if op not in NON_INVERTIBLE_OPERATORS]
    first = [m.operator for m in queue[: len(invertible)]]
    assert sorted(first) == sorted(invertible)  # the first round covers every invertible operator kind
    rounds = NON_INVERTIBLE_EVERY * len(OPERATORS)
    dropped = [i for i, m in enumerate(queue[:rounds]) if m.operator in NON_INVERTIBLE_OPERATORS]
    assert dropped and min(dropped) >= len(invertible)  # dealt, but never in the first round
    assert queue == list(candidate_queue(repo, OPERATORS, random.Random(0)))
    assert {m.qualname for m in queue} <= {"to_roman", "parse_roman", "from_roman", "is_roman", "add_roman",
                                          "subtract_roman", "sort_numerals"}


def test_out_dir_refused_unless_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "t1").mkdir(parents=True)
    (out / "t1" / "manifest.json").write_text("{}")
    with pytest.raises(EnvError, match="not empty"):
        prepare_out_dir(out, force=False)
    prepare_out_dir(out, force=True)
    assert list(out.iterdir()) == []
    (out / "notes.txt").write_text("mine")
    with pytest.raises(EnvError, match="notes.txt is not a task"):
        prepare_out_dir(out, force=True)
    assert (out / "notes.txt").exists()


SHAPES = '''"""Tiny geometry helpers."""


def area(width, height):
    if width < 0 or height < 0:
        raise ValueError("negative size")
    return width * height


def perimeter(width, height):
    return 2 * (width + height)


def scale(points, factor):
    return [(x * factor, y * factor) for x, y in points]
'''
SHAPES_TESTS = '''import pytest

from shapes import area, perimeter, scale


def test_area():
    assert area(2, 3) == 6


def test_area_negative():
    with pytest.raises(ValueError):
        area(-1, 2)


def test_perimeter():
    assert perimeter(2, 3) == 10


def test_scale():
    assert scale([(1, 2), (3, 4)], 2) == [(2, 4), (6, 8)]
'''


def _shapes_repo(repo: Path) -> Path:
    """A repository of one module (SHAPES) and its tests (SHAPES_TESTS) at ``repo``."""
    (repo / "tests").mkdir(parents=True)
    (repo / "shapes.py").write_text(SHAPES)
    (repo / "tests" / "test_shapes.py").write_text(SHAPES_TESTS)
    return repo


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def test_tasks_from_a_git_repo(tmp_path: Path, sandbox) -> None:
    repo = _shapes_repo(tmp_path / "my proj")
    (repo / ".gitignore").write_text("junk/\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    (repo / "junk").mkdir()
    (repo / "junk" / "big.py").write_text("def huge():\n    return 1\n")
    (repo / "notes.py").write_text("def note():\n    return 'uncommitted but not ignored'\n")
    out = tmp_path / "mined"
    config = GeneratorConfig(count=3, seed=1)
    summary = generate_from_repo(repo, list(PYTEST_COMMAND), out, config, sandbox=sandbox)
    tasks = sorted(p for p in out.iterdir() if p.is_dir())
    assert summary.generated == 3 == len(tasks) and summary.train == 3 and summary.holdout == 0
    for task in tasks:
        m = read_manifest(task)
        assert task.name.startswith("my-proj-") and m.split == "train"
        assert m.metadata["file"] == "shapes.py" and m.metadata["qualname"] in {"area", "perimeter", "scale"}
        files = {p.relative_to(task / "repo").as_posix() for p in (task / "repo").rglob("*")}
        assert ".git" not in files and "junk" not in files and "notes.py" in files
    assert check_task(tasks[0], sandbox).verdict == "valid"
    assert (repo / ".git").is_dir() and (repo / "shapes.py").read_text() == SHAPES  # source untouched


def test_tasks_from_a_repo_whose_tests_fail(tmp_path: Path, sandbox) -> None:
    repo = tmp_path / "broken"
    (repo / "tests").mkdir(parents=True)
    (repo / "shapes.py").write_text(SHAPES.replace("2 * (", "3 * ("))
    (repo / "tests" / "test_shapes.py").write_text(SHAPES_TESTS)
    with pytest.raises(EnvError, match="do not pass as given"):
        generate_from_repo(repo, list(PYTEST_COMMAND), tmp_path / "o", GeneratorConfig(count=2),
                           sandbox=sandbox)


def test_a_module_linked_from_outside_the_repo_is_never_written(tmp_path: Path) -> None:
    # shapes.py is a link to a file elsewhere that the sandbox can read; writing a mutant into the
    # copy's shapes.py would go through the link and overwrite the user's file outside the repository.
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "shapes.py").write_text(SHAPES)
    repo = tmp_path / "proj"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_shapes.py").write_text(SHAPES_TESTS)
    (repo / "notes.py").write_text("def note():\n    return 1\n")  # a module the tests never reach
    (repo / "shapes.py").symlink_to(shared / "shapes.py")
    seeing_shared = Sandbox(validation_sandbox().config.model_copy(update={"extra_ro_paths": (str(shared),)}))
    summary = generate_from_repo(repo, list(PYTEST_COMMAND), tmp_path / "out", GeneratorConfig(count=2),
                                 sandbox=seeing_shared)
    assert (shared / "shapes.py").read_text() == SHAPES
    assert summary.generated == 0  # the only covered module is not the repository's own to mutate


def test_discover_leaves_linked_modules_out(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    assert discover(tmp_path, "r", PYTEST_COMMAND).modules == ("a.py",)


def test_mutants_run_in_the_sandbox_the_caller_configured(tmp_path: Path) -> None:
    # One test needs a host directory that only the caller's sandbox binds; mutants must see it too, or
    # every mutant "fails" that test, which then becomes a target test that never fails in the task.
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("42\n")
    repo = _shapes_repo(tmp_path / "proj")
    (repo / "tests" / "test_data.py").write_text(
        f"def test_data():\n    assert open({str(shared / 'data.txt')!r}).read() == '42\\n'\n"
    )
    binding = Sandbox(validation_sandbox().config.model_copy(update={"extra_ro_paths": (str(shared),)}))
    out = tmp_path / "out"
    summary = generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=2, seed=3),
                                 sandbox=binding)
    assert summary.generated == 2
    for task in sorted(p for p in out.iterdir() if p.is_dir()):
        assert "tests/test_data.py::test_data" not in (read_manifest(task).target_tests or [])
        assert check_task(task, binding).valid


def test_force_keeps_the_old_task_set_when_nothing_replaces_it(tmp_path: Path, sandbox) -> None:
    out = tmp_path / "out"
    (out / "t1").mkdir(parents=True)
    (out / "t1" / "manifest.json").write_text("{}")
    no_tests = tmp_path / "typo"
    no_tests.mkdir()
    (no_tests / "shapes.py").write_text(SHAPES)
    with pytest.raises(EnvError, match="no test files"):
        generate_from_repo(no_tests, list(PYTEST_COMMAND), out, GeneratorConfig(count=2), sandbox=sandbox,
                           force=True)
    broken = tmp_path / "broken"
    (broken / "tests").mkdir(parents=True)
    (broken / "shapes.py").write_text(SHAPES.replace("2 * (", "3 * ("))
    (broken / "tests" / "test_shapes.py").write_text(SHAPES_TESTS)
    with pytest.raises(EnvError, match="do not pass as given"):
        generate_from_repo(broken, list(PYTEST_COMMAND), out, GeneratorConfig(count=2), sandbox=sandbox,
                           force=True)
    assert (out / "t1" / "manifest.json").read_text() == "{}"  # the failed runs replaced nothing


def test_candidate_queue_mutates_a_module_starting_with_a_utf8_bom(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text("\ufeffdef add(a, b):\n    return a + b\n", encoding="utf-8")
    (tmp_path / "tests" / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n"
                                                     "    assert add(1, 2) == 3\n")
    repo = discover(tmp_path, "calc", PYTEST_COMMAND)
    queue = list(candidate_queue(repo, OPERATORS, random.Random(0)))
    assert queue and {m.qualname for m in queue} == {"add"}


def test_snapshot_of_a_non_git_tree_leaves_special_files_out(tmp_path: Path) -> None:
    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    os.mkfifo(src / "pkg" / "events.fifo")  # a named pipe a tool left in the working tree
    snapshot_repo(src, tmp_path / "copy")
    assert (tmp_path / "copy" / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert not (tmp_path / "copy" / "pkg" / "events.fifo").exists()


def test_tasks_from_a_repo_whose_passing_tests_are_not_pytest_say_so(tmp_path: Path, sandbox) -> None:
    repo = _shapes_repo(tmp_path / "proj")
    with pytest.raises(EnvError) as caught:
        generate_from_repo(repo, ["python", "-c", "print('OK')"], tmp_path / "o", GeneratorConfig(count=2),
                           sandbox=sandbox)
    message = str(caught.value)
    assert "do not pass" not in message and "exit 0" in message
    assert "pytest" in message and "--test-cmd" in message


@pytest.mark.parametrize("is_git", [False, True])
def test_tasks_from_a_repo_into_its_own_subdirectory_leave_earlier_tasks_out(
    tmp_path: Path, sandbox, is_git: bool
) -> None:
    # `tasks-from-repo . --out tasks --force` again: the previous task set lies in the working tree, with
    # its manifests (reference patches) and whole repository copies; none of it belongs in the new tasks.
    repo = _shapes_repo(tmp_path / "proj")
    if is_git:
        git(repo, "init", "-q")
    out = repo / "tasks"
    first = generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=1), sandbox=sandbox)
    second = generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=1, seed=1),
                                sandbox=sandbox, force=True)
    assert first.generated == second.generated == 1
    (task,) = [p for p in out.iterdir() if p.is_dir()]
    assert not (task / "repo" / "tasks").exists()


def _killed_after(monkeypatch: pytest.MonkeyPatch, tasks: int) -> None:
    """Make the generation stop like a killed process once ``tasks`` tasks are written."""
    real = task_set.write_task
    written = []

    def write_task(*args, **kwargs):
        if len(written) == tasks:
            raise KeyboardInterrupt  # Ctrl-C, or a kill, in the middle of writing the task set
        written.append(real(*args, **kwargs))
        return written[-1]

    monkeypatch.setattr(task_set, "write_task", write_task)


@pytest.mark.parametrize("force", [False, True])
def test_a_generation_killed_while_writing_leaves_no_partial_task_set(
    tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    # Tasks were written one by one into --out itself: a kill after two of three left a task set of two
    # without benchmark.json, which `shell train --tasks` and the benchmarks then used as if complete.
    repo = _shapes_repo(tmp_path / "proj")
    out = tmp_path / "out"
    if force:  # a previous task set that --force replaces
        (out / "t1").mkdir(parents=True)
        (out / "t1" / "manifest.json").write_text("{}")
    _killed_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=3), sandbox=sandbox,
                           force=force)
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert left == (["t1"] if force else []), "a half-written task set was left in --out"
    monkeypatch.undo()
    summary = generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=3), sandbox=sandbox,
                                 force=force)  # the next run is not refused, and replaces what was left
    assert summary.generated == 3 and summary.out == str(out)
    assert len([p for p in out.iterdir() if p.is_dir()]) == 3 and (out / SUMMARY_FILE).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "proj"]  # nothing left beside it



@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_force_generation_killed_while_replacing_the_old_set_leaves_no_part_of_it(
    tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch, kill_at: int
) -> None:
    # --force cleared the previous set entry by entry before the rename: a kill in between left some of its
    # tasks (and here its benchmark.json, which sorts after them) as if they were the whole set.
    repo = _shapes_repo(tmp_path / "proj")
    out = tmp_path / "out"
    old = ["aio-1", "aio-2", "aio-3"]
    for name in old:
        (out / name).mkdir(parents=True)
        (out / name / "manifest.json").write_text("{}")
    (out / SUMMARY_FILE).write_text("{}")
    publishing, changes = [], []

    def dying(real):
        def call(*args, **kwargs):
            if publishing:
                changes.append(args[0])
                if len(changes) == kill_at:
                    raise KeyboardInterrupt  # killed at this change of the file system
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(task_set.shutil, "rmtree", dying(task_set.shutil.rmtree))
    monkeypatch.setattr(task_set.os, "replace", dying(task_set.os.replace))
    publish = generator_module.publish_task_set
    monkeypatch.setattr(generator_module, "publish_task_set",
                        lambda *args: (publishing.append(True), publish(*args)))
    with pytest.raises(KeyboardInterrupt):
        generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=2), sandbox=sandbox,
                           force=True)
    monkeypatch.undo()
    left = sorted(p.name for p in out.iterdir() if p.is_dir()) if out.exists() else []
    assert left in ([], old) or not set(left) & set(old), f"part of the old set is left: {left}"
    generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=2), sandbox=sandbox, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "proj"]  # nothing left beside it


def test_tasks_into_a_mount_point_are_written_inside_it(
    tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container's volume (docker run -v ...:/tasks, --out /tasks) is a mount point: renaming a directory
    # onto it or away from it fails with EBUSY, so the set built beside it could not be put in place (an
    # OSError traceback after the whole mining). As the kernel does (a real tmpfs mount behaves the same):
    repo = _shapes_repo(tmp_path / "proj")
    out = tmp_path / "volume"
    out.mkdir()
    real_ismount, real_replace = os.path.ismount, os.replace

    def replace(src, dst, *args, **kwargs):
        if out.resolve() in (Path(src).resolve(), Path(dst).resolve()):
            raise OSError(errno.EBUSY, "Device or resource busy")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(task_set.os.path, "ismount", lambda p: Path(p) == out.resolve() or real_ismount(p))
    monkeypatch.setattr(task_set.os, "replace", replace)
    for force in (False, True, True):
        summary = generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=2),
                                     sandbox=sandbox, force=force)
        assert summary.generated == 2 and (out / SUMMARY_FILE).is_file()
        assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
        assert len([p for p in out.iterdir() if (p / "manifest.json").is_file()]) == 2
        (out / ".tmp-generating" / "t").mkdir(parents=True)  # what a killed generation leaves in it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj", "volume"]


def test_tasks_into_a_directory_whose_parent_is_not_writable_are_written_inside_it(
    tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --out /srv/tasks, the user's own, in a /srv they cannot write: the set cannot be built beside it (a
    # PermissionError after the whole mining), so it is built inside it, as for a mount point. Root may
    # write anywhere, so the parent's permission is what os.access answers here.
    repo = _shapes_repo(tmp_path / "proj")
    parent = tmp_path / "srv"
    out = parent / "tasks"
    out.mkdir(parents=True)
    real_access = os.access
    monkeypatch.setattr(task_set.os, "access",
                        lambda p, mode, **kw: Path(p) != parent.resolve() and real_access(p, mode, **kw))
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args, **kwargs) -> None:
        if self.resolve().parent == parent.resolve() and self.name != "tasks":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    for force in (False, True):
        summary = generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=2),
                                     sandbox=sandbox, force=force)
        assert summary.generated == 2 and (out / SUMMARY_FILE).is_file()
        assert len([p for p in out.iterdir() if (p / "manifest.json").is_file()]) == 2
    assert sorted(p.name for p in parent.iterdir()) == ["tasks"]


def _out_gains_a_file_while_mining(monkeypatch: pytest.MonkeyPatch, out: Path) -> None:
    """Another process writes into ``out`` while the tasks are mined, so publishing them is refused."""
    real = generator_module.mine

    def mine(*args, **kwargs):
        mined = real(*args, **kwargs)
        (out / "notes.txt").write_text("not a task")
        return mined

    monkeypatch.setattr(generator_module, "mine", mine)


def _disk_full_after(monkeypatch: pytest.MonkeyPatch, tasks: int) -> None:
    """Writing the task set fails with ENOSPC once ``tasks`` tasks are written."""
    real = task_set.write_task
    written = []

    def write_task(*args, **kwargs):
        if len(written) == tasks:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(real(*args, **kwargs))
        return written[-1]

    monkeypatch.setattr(task_set, "write_task", write_task)


@pytest.mark.parametrize("mount_point", [False, True])
@pytest.mark.parametrize("failure", ["out gains a file", "disk full"])
def test_a_generation_that_fails_removes_its_staging_directory(
    tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch, mount_point: bool, failure: str
) -> None:
    # A generation that raised part-way left its hidden staging directory (.out.tmp-generating beside
    # --out, or .tmp-generating inside a mount point), with every task written so far, until the next
    # generation into the same --out happened to clear it.
    repo = _shapes_repo(tmp_path / "proj")
    out = tmp_path / "out"
    out.mkdir()
    if mount_point:  # as in test_tasks_into_a_mount_point_are_written_inside_it
        ismount = os.path.ismount
        monkeypatch.setattr(task_set.os.path, "ismount", lambda p: Path(p) == out.resolve() or ismount(p))
    if failure == "out gains a file":
        _out_gains_a_file_while_mining(monkeypatch, out)
        expected: tuple[type[BaseException], str] = (EnvError, "is not empty")
    else:
        _disk_full_after(monkeypatch, 1)
        expected = (OSError, "No space left")
    with pytest.raises(expected[0], match=expected[1]):
        generate_from_repo(repo, list(PYTEST_COMMAND), out, GeneratorConfig(count=2), sandbox=sandbox)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "proj"]
    assert sorted(p.name for p in out.iterdir()) == (["notes.txt"] if failure == "out gains a file" else [])


def test_a_benchmark_generation_that_fails_removes_its_staging_directory(
    tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _out_gains_a_file_while_mining(monkeypatch, out)
    out.mkdir()
    with pytest.raises(EnvError, match="is not empty"):
        generate_benchmark(out, GeneratorConfig(count=2, seed=3), sandbox)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_a_failed_rename_of_the_new_set_puts_the_previous_set_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The previous set is renamed aside before the new one is renamed onto --out; when that second rename
    # failed, --out was left missing and the previous set hidden beside it, where the next generation
    # deleted it.
    out, staging = tmp_path / "out", tmp_path / ".out.tmp-generating"
    (out / "aio-old").mkdir(parents=True)
    (out / "aio-old" / "manifest.json").write_text("{}")
    (out / SUMMARY_FILE).write_text("{}")
    (staging / "aio-new").mkdir(parents=True)
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(src) == staging:
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(task_set.os, "replace", replace)
    with pytest.raises(EnvError, match="previous task set is left in place"):
        task_set.publish_task_set(staging, out, force=True)
    assert sorted(p.name for p in out.iterdir()) == ["aio-old", SUMMARY_FILE]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.tmp-generating", "out"]

"""import_tasks on a directory mixing valid tasks with every kind of broken one (real sandbox)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aios_rl.contracts.errors import ContractError, EnvError
from aios_rl.envs.shell.importer import escaping_symlinks, import_tasks
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.task import ShellTaskManifest, read_manifest
from aios_rl.envs.shell.validation import PYTEST_COMMAND, check_task, validation_sandbox

GOOD = "def mul(a, b):\n    return a * b\n\n\ndef inc(a):\n    return a + 1\n"
TESTS = (
    "from ops import inc, mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\n"
    "def test_inc():\n    assert inc(1) == 2\n"
)


def put_task(
    src: Path, dirname: str, source: str | None, patch: str | None, task_id: str | None = None
) -> Path:
    """A task directory written by hand (not with write_task: some are meant to be broken)."""
    task = src / dirname
    if source is not None:
        (task / "repo" / "tests").mkdir(parents=True)
        (task / "repo" / "ops.py").write_text(source)
        (task / "repo" / "tests" / "test_ops.py").write_text(TESTS)
    task.mkdir(parents=True, exist_ok=True)
    manifest = ShellTaskManifest(task_id=task_id or dirname, split="holdout", prompt="Tests fail; fix them.",
                                 test_command=list(PYTEST_COMMAND), reference_patch=patch, timeout_s=30)
    (task / "manifest.json").write_text(json.dumps(manifest.model_dump(mode="json")))
    return task


def bug(old: str, new: str) -> tuple[str, str]:
    buggy = GOOD.replace(old, new)
    return buggy, unified_diff(buggy, GOOD, "ops.py")


@pytest.fixture(scope="module")
def sandbox():
    return validation_sandbox()


@pytest.fixture
def mixed_src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    put_task(src, "good-mul", *bug("a * b", "a + b"))
    put_task(src, "good-inc", *bug("a + 1", "a - 1"))
    put_task(src, "dup-of-mul", *bug("a * b", "a ** b"), task_id="good-mul")
    put_task(src, "passes", GOOD, None)
    buggy, _ = bug("a * b", "a + b")
    put_task(src, "never-fixed", buggy, unified_diff(buggy, buggy.replace("a + 1", "a + 2"), "ops.py"))
    put_task(src, "patch-mismatch", buggy, unified_diff(GOOD.replace("mul", "times"), GOOD, "ops.py"))
    put_task(src, "no-repo", None, None)
    put_task(src, "bad-json", *bug("a + 1", "a - 1"))
    (src / "bad-json" / "manifest.json").write_text('{"task_id": "bad-json", "split": ')
    leak = put_task(src, "leaky-link", *bug("a + 1", "a + 2"))
    os.symlink("/etc/hostname", leak / "repo" / "host.txt")
    (src / "README.txt").write_text("not a task")
    return src


def test_import_mixed_directory(mixed_src: Path, tmp_path: Path, sandbox) -> None:
    out = tmp_path / "out"
    report = import_tasks(mixed_src, out, sandbox)
    assert report.imported == ["good-mul", "good-inc"]  # source-directory order: dup-of-mul, good-inc
    reasons = {r.task_id: r.reason for r in report.rejected}
    assert sorted(reasons) == ["bad-json", "good-mul", "leaky-link", "never-fixed", "no-repo", "passes",
                               "patch-mismatch"]
    # Directories are taken in name order, so dup-of-mul (task_id good-mul) wins over good-mul/.
    assert reasons["good-mul"] == "duplicate task_id: already imported from dup-of-mul"
    assert reasons["passes"] == "tests already pass as given; a task must fail before its fix"
    assert reasons["never-fixed"] == (
        "tests still fail with the reference patch: tests/test_ops.py::test_mul, tests/test_ops.py::test_inc")
    assert reasons["patch-mismatch"].startswith("reference patch does not apply: ")
    assert reasons["no-repo"] == "missing repo/ directory"
    assert reasons["bad-json"].startswith("invalid manifest: <json>: got malformed JSON")
    assert reasons["leaky-link"] == "repo/ has symlinks leading outside it: host.txt"
    # Exactly the imported tasks exist, complete, and nothing half-written or temporary is left.
    assert sorted(p.name for p in out.iterdir()) == ["good-inc", "good-mul"]
    for task_id, dirname in (("good-inc", "good-inc"), ("good-mul", "dup-of-mul")):
        assert read_manifest(out / task_id).split == "holdout"
        source = (mixed_src / dirname / "repo" / "ops.py").read_text()
        assert (out / task_id / "repo" / "ops.py").read_text() == source


def test_import_rejects_ids_already_in_out(mixed_src: Path, tmp_path: Path, sandbox) -> None:
    out = tmp_path / "out"
    only = tmp_path / "only"
    only.mkdir()
    (mixed_src / "good-inc").rename(only / "good-inc")
    first = import_tasks(only, out, sandbox)
    second = import_tasks(only, out, sandbox)
    assert first.imported == ["good-inc"] and first.rejected == []
    assert second.imported == []
    assert [r.reason for r in second.rejected] == [f"task_id already exists in {out}"]


def test_import_refuses_bad_locations(tmp_path: Path, sandbox) -> None:
    with pytest.raises(ContractError, match="is not a directory"):
        import_tasks(tmp_path / "missing", tmp_path / "out", sandbox)
    (tmp_path / "src").mkdir()
    with pytest.raises(EnvError, match="lies inside"):
        import_tasks(tmp_path / "src", tmp_path / "src" / "out", sandbox)


def test_escaping_symlinks(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("")
    os.symlink("a.py", tmp_path / "pkg" / "inside.py")
    os.symlink("../../outside", tmp_path / "pkg" / "out")
    assert escaping_symlinks(tmp_path) == ["pkg/out"]


def test_import_keeps_links_inside_the_repo_as_links(tmp_path: Path, sandbox) -> None:
    # The check runs on a copy that keeps symlinks; the imported copy must be the same task, or a link
    # that a fix changes through (ops_alias.py -> ops.py) turns into a stale copy and the task breaks.
    task = put_task(tmp_path / "src", "alias", *bug("a * b", "a + b"))
    os.symlink("ops.py", task / "repo" / "ops_alias.py")
    os.symlink("missing.txt", task / "repo" / "dangling.txt")  # dangling, but inside the repo
    (task / "repo" / "tests" / "test_alias.py").write_text(
        "from ops_alias import mul\n\n\ndef test_alias():\n    assert mul(2, 3) == 6\n"
    )
    report = import_tasks(tmp_path / "src", tmp_path / "out", sandbox)
    assert report.imported == ["alias"] and report.rejected == []
    imported = tmp_path / "out" / "alias"
    assert os.readlink(imported / "repo" / "ops_alias.py") == "ops.py"
    assert os.readlink(imported / "repo" / "dangling.txt") == "missing.txt"
    check = check_task(imported, sandbox)
    assert check.valid, check.reason


def test_escaping_symlinks_survives_link_loops(tmp_path: Path) -> None:
    os.symlink("self", tmp_path / "self")  # a loop: resolving it fails, but it points nowhere outside
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    os.symlink("/etc/hostname", tmp_path / "host")
    assert escaping_symlinks(tmp_path) == ["host"]


def test_a_manifest_not_in_utf8_is_rejected_with_its_reason(tmp_path: Path, sandbox) -> None:
    src = tmp_path / "src"
    put_task(src, "good-inc", *bug("a + 1", "a - 1"))
    latin = put_task(src, "latin", *bug("a * b", "a + b"))
    manifest = latin / "manifest.json"
    manifest.write_bytes(manifest.read_text().replace("fix them.", "fix them, café.").encode("latin-1"))
    with pytest.raises(ContractError, match="UTF-8"):
        read_manifest(latin)
    report = import_tasks(src, tmp_path / "out", sandbox)
    assert report.imported == ["good-inc"]
    assert [r.task_id for r in report.rejected] == ["latin"] and "UTF-8" in report.rejected[0].reason

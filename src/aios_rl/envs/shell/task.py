"""The on-disk shell task format: a directory holding ``manifest.json`` and ``repo/``.

This is how users bring their own bug sets (``aios-rl shell import-tasks``) and what the generator writes.
``prompt`` is all the student is told; ``reference_patch`` and ``metadata`` (mutation operator, location,
difficulty...) reach only the oracle teacher and the verifier, never the student's observations.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from aios_rl.contracts.episode import SCHEMA_VERSION, Record, Split, Task
from aios_rl.contracts.errors import ContractError
from aios_rl.contracts.validate import parse_json_record

MANIFEST = "manifest.json"
REPO = "repo"


class ShellTaskManifest(Record):
    """``manifest.json`` of one shell task."""

    schema_version: int = SCHEMA_VERSION
    task_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", description="Unique id (safe as a directory name).")
    environment: Literal["shell"] = Field(default="shell", description='Always "shell".')
    family: str = Field(default="failing_tests", min_length=1, description="Task family, e.g. failing_tests.")
    split: Split = Field(description="train or holdout.")
    prompt: str = Field(min_length=1, description="The text the student sees.")
    test_command: list[str] = Field(
        min_length=1,
        description='argv run inside repo/, where `python` has pytest, e.g. ["python", "-m", "pytest", "-q", "tests"].',
    )
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Wall limit for one test run, in seconds.")
    target_tests: list[str] | None = Field(
        default=None, description="Test node ids that fail now and must pass when the bug is fixed."
    )
    reference_patch: str | None = Field(
        default=None, description="Unified diff against repo/ that fixes the bug (oracle and verifier only)."
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Free-form facts (operator, location, difficulty); never shown to the student."
    )

    @field_validator("test_command")
    @classmethod
    def _no_empty_args(cls, argv: list[str]) -> list[str]:
        if any(not isinstance(a, str) or a == "" for a in argv):
            raise ValueError("every test_command argument must be a non-empty string")
        return argv

    def to_task(self, task_dir: Path) -> Task:
        """The environment-neutral Task: what the env needs in ``spec``, ground truth in ``oracle``."""
        spec = {
            "task_dir": str(task_dir),
            "test_command": list(self.test_command),
            "timeout_s": self.timeout_s,
            "target_tests": list(self.target_tests or []),
        }
        oracle = {"reference_patch": self.reference_patch, "metadata": dict(self.metadata)}
        return Task(
            task_id=self.task_id,
            environment="shell",
            family=self.family,
            split=self.split,
            prompt=self.prompt,
            spec=spec,
            oracle=oracle,
            seed=_stable_seed(self.task_id),
        )


def _stable_seed(text: str) -> int:
    # A seed derived from the id (not Python's salted hash) so a task reruns identically across processes.
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def read_manifest(task_dir: Path) -> ShellTaskManifest:
    """Read and validate ``task_dir/manifest.json`` and check ``repo/`` exists.

    Raises:
        ContractError: missing or invalid manifest, or missing repo directory.
    """
    path = task_dir / MANIFEST
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ContractError(f"{task_dir}: no {MANIFEST}", [f"{MANIFEST}: got nothing; expected a task manifest"]) from None
    except IsADirectoryError:
        problem = f"{MANIFEST}: got a directory; expected a task manifest file"
        raise ContractError(f"{task_dir}: {MANIFEST} is a directory", [problem]) from None
    except UnicodeDecodeError as exc:
        problem = (f"{MANIFEST}: got byte {exc.object[exc.start]:#04x} at offset {exc.start}, which is not "
                   "UTF-8; expected a UTF-8 JSON document")
        raise ContractError(f"{path} is not UTF-8 text", [problem]) from None
    manifest = parse_json_record(ShellTaskManifest, text, source=str(path))
    if not (task_dir / REPO).is_dir():
        raise ContractError(f"{task_dir}: no {REPO}/ directory", [f"{REPO}: got nothing; expected the repository copy"])
    return manifest


def write_task(out_dir: Path, manifest: ShellTaskManifest, repo_src: Path) -> Path:
    """Write a task directory atomically (built beside, then renamed) so it is never half-written.

    ``.git`` and caches are not copied: a task never carries history that could reveal the fix. Symlinks
    stay links, as in the copies the checks and the environment run on, so the task written is the task
    checked (a followed link would copy host files in, or freeze a file aliased inside the repo).
    """
    final = out_dir / manifest.task_id
    if final.exists():
        raise ContractError(f"task {manifest.task_id} already exists in {out_dir}", [f"task_id: got {manifest.task_id!r}; expected an id not yet in {out_dir}"])
    tmp = out_dir / f".tmp-{manifest.task_id}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        shutil.copytree(repo_src, tmp / REPO, ignore=IGNORED_IN_COPIES, symlinks=True)
        (tmp / MANIFEST).write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


IGNORED_IN_COPIES = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", "*.pyc", ".hypothesis")


def iter_task_dirs(root: Path) -> list[Path]:
    """Task directories directly under ``root`` (those holding a manifest), sorted by name."""
    if not root.is_dir():
        raise ContractError(f"{root} is not a directory", [f"{root}: got nothing; expected a directory of tasks"])
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def require_task_dirs(root: Path) -> list[Path]:
    """:func:`iter_task_dirs`, refusing a directory that holds none (checking or importing nothing is a
    mistake: a wrong path, or tasks not yet generated).

    Raises:
        ContractError: ``root`` is not a directory or holds no task directories.
    """
    task_dirs = iter_task_dirs(root)
    if not task_dirs:
        raise ContractError(f"{root} holds no task directories; a task is a directory <task_id>/ holding "
                            f"{MANIFEST} and {REPO}/ (the buggy repository), e.g. {root}/calc-1/{MANIFEST}; "
                            "create tasks with `aios-rl shell benchmark-generate` or `tasks-from-repo`")
    return task_dirs


def load_tasks(root: Path, split: str | None = None) -> list[Task]:
    """Every valid task under ``root`` (optionally one split) as a Task; invalid ones raise ContractError."""
    tasks = []
    for task_dir in iter_task_dirs(root):
        manifest = read_manifest(task_dir)
        if split is None or manifest.split == split:
            tasks.append(manifest.to_task(task_dir))
    return tasks

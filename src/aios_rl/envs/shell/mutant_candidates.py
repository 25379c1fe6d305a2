"""Candidate mutants for the shell task generator: what the tests cover, and the order mutants are tried in.

:func:`discover` finds a repository's source modules and test files, :func:`covered_functions` the
functions its tests reach, and :func:`candidate_queue` deals their mutations round-robin over operators;
:func:`task_id_for` names the task a mutant would become.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell import python_ast
from aios_rl.envs.shell.mutate import (
    NON_INVERTIBLE_OPERATORS,
    Mutation,
    apply_mutation,
    enumerate_mutations,
    function_qualnames,
)

logger = logging.getLogger(__name__)

_TEST_DIRS = frozenset({"tests", "test", "testing"})
_SKIP_DIRS = frozenset({"venv", "env", "site-packages", "node_modules", "build", "dist", "__pycache__"})


@dataclass(frozen=True)
class SourceRepo:
    """A repository to mutate: ``root`` is only ever copied, never run in place."""

    name: str
    root: Path
    test_command: tuple[str, ...]
    modules: tuple[str, ...]  # source files to mutate, relative POSIX paths
    test_files: tuple[str, ...]


def _is_test_path(rel: PurePosixPath) -> bool:
    name = rel.name
    in_test_dir = bool(_TEST_DIRS & set(rel.parts[:-1]))
    return in_test_dir or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def discover(root: Path, name: str, test_command: Sequence[str]) -> SourceRepo:
    """Source modules (``*.py`` outside test directories) and test files of a repository.

    A module that is a symlink is not mutated: its text is not the repository's own, and a mutant written
    into a copy of the link would go through it to the file it names, outside the repository.

    Raises:
        EnvError: there are no test files or no source modules.
    """
    modules, tests = [], []
    for path in sorted(root.rglob("*.py")):
        rel = PurePosixPath(path.relative_to(root).as_posix())
        if any(p.startswith(".") or p in _SKIP_DIRS for p in rel.parts[:-1]):
            continue
        if _is_test_path(rel):
            tests.append(str(rel))
        elif rel.name != "setup.py" and not path.is_symlink():
            modules.append(str(rel))
    if not tests:
        raise EnvError(f"{root}: no test files (tests/, test_*.py or *_test.py); tasks need tests that fail")
    if not modules:
        raise EnvError(f"{root}: no Python source files outside the test directories to mutate")
    return SourceRepo(name, root, tuple(test_command), tuple(modules), tuple(tests))


def referenced_names(test_sources: Sequence[str]) -> set[str]:
    """Identifiers the tests mention: names, attributes, imported names and identifier-like strings."""
    names: set[str] = set()
    for text in test_sources:
        try:
            tree = python_ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.update((node.asname or node.name).split("."))
                names.update(node.name.split("."))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)  # getattr(obj, "name"), parametrized method names
    return names


def covered_functions(source: str, test_names: set[str]) -> list[str]:
    """Qualnames of functions the tests reach: named by the tests, dunders of named classes, and every
    module function those call by name (transitively), so private helpers count too."""
    tree = python_ast.parse(source)
    qualnames = function_qualnames(source)
    bodies: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            used |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            bodies.setdefault(node.name, set()).update(used)

    def named(qualname: str) -> bool:
        parts = qualname.split(".<locals>.")[0].split(".")
        last = parts[-1]
        dunder = last.startswith("__") and last.endswith("__")
        return last in test_names or (dunder and len(parts) > 1 and parts[-2] in test_names)

    reached = {q.split(".<locals>.")[0].split(".")[-1] for q in qualnames if named(q)}
    frontier = list(reached)
    while frontier:  # names called from reached functions are reached too
        for used in sorted(bodies.get(frontier.pop(), ())):
            if used in bodies and used not in reached:
                reached.add(used)
                frontier.append(used)
    return [q for q in qualnames if named(q) or q.split(".<locals>.")[0].split(".")[-1] in reached]


NON_INVERTIBLE_EVERY = 3


def candidate_queue(repo: SourceRepo, operators: Sequence[str], rng: random.Random) -> deque[Mutation]:
    """The repo's mutations in trial order: shuffled per operator, then dealt round-robin over operators
    (starting at a seeded operator) so a short prefix already covers many operator kinds."""
    test_names = referenced_names([(repo.root / t).read_text(encoding="utf-8", errors="replace")
                                   for t in repo.test_files])
    by_operator: dict[str, list[Mutation]] = {op: [] for op in operators}
    for rel in repo.modules:
        try:
            source = (repo.root / rel).read_text(encoding="utf-8")
            qualnames = covered_functions(source, test_names)
            mutations = enumerate_mutations(source, rel, qualnames, operators=operators) if qualnames else []
        except (UnicodeDecodeError, SyntaxError, ValueError, EnvError) as exc:
            logger.debug("skipping %s/%s: %s", repo.name, rel, exc)
            continue
        seen: set[str] = set()
        for m in mutations:  # equivalent mutants: a resulting source already queued is dropped
            digest = hashlib.sha256(apply_mutation(source, m).encode()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                by_operator[m.operator].append(m)
    lanes = []
    for op in operators:
        rng.shuffle(by_operator[op])
        lanes.append((op, deque(by_operator[op])))
    start = rng.randrange(len(lanes)) if lanes else 0
    lanes = lanes[start:] + lanes[:start]
    queue: deque[Mutation] = deque()
    round_ = 0
    while any(lane for _, lane in lanes):
        for op, lane in lanes:
            # Non-invertible operators (a dropped statement) are dealt only in the second round of every
            # NON_INVERTIBLE_EVERY (never the first): they stay in the benchmark (a few percent of a
            # 200-task set) but cannot crowd out the tasks the candidate list can fix.
            rare = op in NON_INVERTIBLE_OPERATORS and round_ % NON_INVERTIBLE_EVERY != 1
            if lane and not (rare and any(other for o, other in lanes if o not in NON_INVERTIBLE_OPERATORS)):
                queue.append(lane.popleft())
        round_ += 1
    return queue


def task_id_for(repo_name: str, mutation: Mutation) -> str:
    """Deterministic id from the mutation itself (never its operator, which the id must not reveal)."""
    key = "\0".join(map(str, (repo_name, mutation.file, mutation.lineno, mutation.col,
                              mutation.original_segment, mutation.mutated_segment)))
    return f"{repo_name}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"

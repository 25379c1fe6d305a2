"""Checks on the bundled seed repositories of the shell bug-fix benchmark.

Every seed suite runs in a temporary copy so that no bytecode or pytest cache
lands inside the package tree.
"""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aios_rl.envs.shell import seed_repos
from aios_rl.envs.shell.seed_repos import SEEDS_DIR, list_seed_repos

SEEDS = list_seed_repos()
MIN_SOURCE_LINES = 50
MAX_SOURCE_LINES = 300
FORBIDDEN_CONFIG = ("conftest.py", "pytest.ini", "setup.py", "setup.cfg", "pyproject.toml", "tox.ini")


def _source_files(repo: Path) -> list[Path]:
    return sorted(p for p in repo.rglob("*.py") if "tests" not in p.relative_to(repo).parts)


def _test_text(repo: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((repo / "tests").rglob("*.py")))


def _public_names(path: Path) -> list[str]:
    """Top-level public functions and public methods of top-level classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_"):
                    names.append(item.name)
    return names


def test_list_seed_repos_has_enough_seeds():
    assert len(SEEDS) >= 12
    assert SEEDS == sorted(SEEDS)


def test_list_seed_repos_requires_tests_dir(tmp_path, monkeypatch):
    (tmp_path / "withtests" / "tests").mkdir(parents=True)
    (tmp_path / "notests").mkdir()
    (tmp_path / "stray.txt").write_text("x")
    monkeypatch.setattr(seed_repos, "SEEDS_DIR", tmp_path)
    assert seed_repos.list_seed_repos() == ["withtests"]


def test_seeds_dir_is_next_to_module():
    assert SEEDS_DIR == Path(seed_repos.__file__).parent / "seeds"
    assert SEEDS_DIR.is_dir()


@pytest.mark.parametrize("name", SEEDS)
def test_seed_source_line_count(name):
    repo = SEEDS_DIR / name
    files = _source_files(repo)
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files)
    assert files, f"{name} has no source files"
    assert MIN_SOURCE_LINES <= lines <= MAX_SOURCE_LINES, f"{name}: {lines} source lines"


@pytest.mark.parametrize("name", SEEDS)
def test_seed_layout(name):
    repo = SEEDS_DIR / name
    tests_dir = repo / "tests"
    assert list(tests_dir.glob("test_*.py")), f"{name} has no test_*.py files"
    assert (repo / "README.md").is_file()
    assert not (tests_dir / "__init__.py").exists()
    present = [f for f in FORBIDDEN_CONFIG if (repo / f).exists() or (tests_dir / f).exists()]
    assert present == []


@pytest.mark.parametrize("name", SEEDS)
def test_seed_public_api_referenced_by_tests(name):
    repo = SEEDS_DIR / name
    tests = _test_text(repo)
    missing = [
        f"{path.name}:{fn}"
        for path in _source_files(repo)
        for fn in _public_names(path)
        if not re.search(rf"\b{re.escape(fn)}\b", tests)
    ]
    assert missing == []


@pytest.mark.parametrize("name", SEEDS)
def test_seed_suite_passes_in_copy(name, tmp_path):
    work = tmp_path / name
    shutil.copytree(SEEDS_DIR / name, work, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # Seeds need only core pytest; plugins installed here (hypothesis, xdist, ...)
    # would only slow the run down and could change its behaviour.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    passed = re.search(r"(\d+) passed", output)
    assert passed is not None, output
    assert int(passed.group(1)) >= 10
    assert not re.search(r"\d+ (failed|error)", output), output


def test_seed_tree_has_no_caches():
    leftovers = [
        str(p.relative_to(SEEDS_DIR))
        for p in SEEDS_DIR.rglob("*")
        if p.name in ("__pycache__", ".pytest_cache") or p.suffix == ".pyc"
    ]
    assert leftovers == []

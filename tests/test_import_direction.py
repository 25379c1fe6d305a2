"""ARCHITECTURE §3: a package may import only from packages to its left in the chain."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "aios_rl"

# contracts → storage → control → teacher/envs/policy → algos → rollout → campaign/exec → report → cli
LAYERS: list[set[str]] = [
    {"contracts"},
    {"storage"},
    {"control"},
    {"teacher", "envs", "policy"},
    {"algos"},
    {"rollout"},
    {"campaign", "exec"},
    {"report"},
    {"cli"},
]
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "aios_rl" and len(parts) > 1:
                found.add(parts[1])
    return found


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "seeds" not in p.relative_to(SRC).parts)


def test_every_package_is_ranked() -> None:
    packages = {p.relative_to(SRC).parts[0] for p in modules() if len(p.relative_to(SRC).parts) > 1}
    assert packages <= set(RANK), f"unranked packages: {packages - set(RANK)}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_go_left(path: Path) -> None:
    rel = path.relative_to(SRC).parts
    if len(rel) == 1:  # aios_rl/__init__.py
        return
    own = RANK[rel[0]]
    bad = {pkg for pkg in imported_packages(path) if pkg in RANK and RANK[pkg] > own}
    same_layer_other = {pkg for pkg in imported_packages(path) if pkg in RANK and RANK[pkg] == own and pkg != rel[0]}
    assert not bad, f"{'/'.join(rel)} imports from packages to its right: {sorted(bad)}"
    assert not same_layer_other, f"{'/'.join(rel)} imports sibling packages of its layer: {sorted(same_layer_other)}"


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from aios_rl.cli.main import app\nimport aios_rl.control.events\n")
    assert imported_packages(bad) == {"cli", "control"}


def test_the_cli_starts_without_torch() -> None:
    """`aios-rl --help` and argument errors answer in a fraction of a second: torch loads only in commands."""
    code = "import sys, aios_rl.cli.main; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0

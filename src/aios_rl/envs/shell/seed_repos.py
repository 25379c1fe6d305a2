"""Bundled seed repositories that the shell bug-fix benchmark mutates.

Each seed is a small stdlib-only Python project under ``seeds/<name>/`` with its
source at the top level and pytest tests in ``tests/``, run from the seed root
with ``python -m pytest -q tests``.
"""

from pathlib import Path

SEEDS_DIR: Path = Path(__file__).parent / "seeds"


def list_seed_repos() -> list[str]:
    """Names of the bundled seed repositories, sorted.

    A directory under :data:`SEEDS_DIR` counts as a seed repository when it
    contains a ``tests/`` folder.

    Returns:
        Sorted directory names, e.g. ``["csvparse", "dateparse", ...]``.
    """
    if not SEEDS_DIR.is_dir():
        return []
    return sorted(p.name for p in SEEDS_DIR.iterdir() if p.is_dir() and (p / "tests").is_dir())

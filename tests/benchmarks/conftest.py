"""Benchmark scripts are not a package: tests load them by path."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="session")
def load_benchmark() -> Callable[[str], ModuleType]:
    """Load ``benchmarks/<name>.py`` as a module (under a private name, so it shadows nothing)."""

    def load(name: str) -> ModuleType:
        if str(BENCHMARKS) not in sys.path:  # as `python benchmarks/NAME.py` has it: for their _workdir
            sys.path.append(str(BENCHMARKS))
        spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def usage_error(monkeypatch, capsys) -> Callable[[ModuleType, list[str]], str]:
    """Run a loaded benchmark's ``main()`` with ``argv``; check that it exits with status 2 (argparse's usage
    error, or a framework error reported as the CLI does) and return what it wrote to stderr."""

    def run(bench: ModuleType, argv: list[str]) -> str:
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit) as exited:
            bench.main()
        assert exited.value.code == 2
        return capsys.readouterr().err

    return run

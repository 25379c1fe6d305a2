"""What the bubblewrap sandbox adds to a command's wall time.

Runs each command sandboxed and unsandboxed, alternating, in one process on one task copy, and prints
the medians, the added milliseconds and the ratio; then the same for pytest on a small generated repo.
Both sides use the same spawn, capture and timeout code (`run_unsandboxed` is that code minus bwrap), so
the difference is namespace and mount setup, the limit/uid wrappers and the task-copy chown.

    PYTHONPATH=src python benchmarks/sandbox_overhead.py [--repeats 50] [--pytest-repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from aios_rl.envs.shell.sandbox import Sandbox, SandboxConfig, run_unsandboxed

_MODULE = '''
def add(a, b):
    return a + b


def clamp(x, lo, hi):
    return max(lo, min(hi, x))
'''

_TESTS = '''
import pytest
from calc import add, clamp


@pytest.mark.parametrize("a, b, want", [(i, i + 1, 2 * i + 1) for i in range(20)])
def test_add(a, b, want):
    assert add(a, b) == want


@pytest.mark.parametrize("x", range(-5, 15))
def test_clamp(x):
    assert 0 <= clamp(x, 0, 9) <= 9
'''


def _time_pair(sandbox: Sandbox, argv: list[str], workdir: Path, repeats: int) -> tuple[float, float]:
    """Median ms unsandboxed and sandboxed, runs interleaved so machine noise hits both sides alike."""
    plain: list[float] = []
    boxed: list[float] = []
    run_unsandboxed(argv, workdir)  # warm page cache and imports on both sides before timing
    sandbox.run(argv, workdir)
    for _ in range(repeats):
        for side, runner in ((plain, run_unsandboxed), (boxed, sandbox.run)):
            result = runner(argv, workdir)
            if result.returncode != 0:
                raise SystemExit(f"{argv} failed (rc={result.returncode}): {result.stderr[-500:]}")
            side.append(result.duration_s * 1000.0)
    return statistics.median(plain), statistics.median(boxed)


def _row(name: str, plain_ms: float, boxed_ms: float) -> str:
    added, ratio = boxed_ms - plain_ms, boxed_ms / plain_ms
    return f"| {name:<22} | {plain_ms:>10.1f} | {boxed_ms:>10.1f} | {added:>8.1f} | {ratio:>5.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50, help="runs per command and side")
    parser.add_argument("--pytest-repeats", type=int, default=5, help="pytest runs per side")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    sandbox = Sandbox(SandboxConfig())
    with tempfile.TemporaryDirectory(prefix="aios-rl-bench-") as tmp:
        repo = Path(tmp) / "repo"
        (repo / "tests").mkdir(parents=True)
        (repo / "calc.py").write_text(_MODULE)
        (repo / "tests" / "test_calc.py").write_text(_TESTS)
        (repo / "conftest.py").write_text("")  # puts the repo root on sys.path for `import calc`
        (repo / "data.txt").write_text("x" * 4096)
        commands = [
            ("true", ["true"], args.repeats),
            ("cat data.txt", ["cat", "data.txt"], args.repeats),
            ("python -c pass", ["python", "-c", "pass"], args.repeats),
            ("pytest -q (40 tests)", ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
             args.pytest_repeats),
        ]
        print("| command                | plain (ms) | bwrap (ms) | added ms | ratio |")
        print("|------------------------|-----------:|-----------:|---------:|------:|")
        for name, argv, repeats in commands:
            plain_ms, boxed_ms = _time_pair(sandbox, argv, repo, repeats)
            print(_row(name, plain_ms, boxed_ms))
    print(f"\nmedian of {args.repeats} runs per command ({args.pytest_repeats} for pytest), interleaved; "
          f"{os.cpu_count()} CPUs, 1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
          "(the added ms grow with load: namespace and mount setup waits on the kernel).")


if __name__ == "__main__":
    main()

"""How fast the shell benchmark generator keeps validated tasks, and what it keeps.

Generates COUNT tasks (default 200) from the bundled seed repositories into a temporary directory with
the default settings (2 sandboxed test runs at a time) and prints: wall time, tasks/min, candidates
judged and sandbox runs (originals and spares included), split counts, and the per-repo and per-operator
histograms. Wall time on a shared machine depends on the neighbours, so the load average before and after
is printed with it. (CPU time cannot be summed here: bubblewrap's sandboxed processes are not reaped by
this process, so RUSAGE_CHILDREN misses them.)

    PYTHONPATH=src python benchmarks/shell_generate.py [--count 200] [--seed 0] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from pydantic import ValidationError

from aios_rl.envs.shell.generator import GeneratorConfig, generate_benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    try:
        config = GeneratorConfig(count=args.count, seed=args.seed, workers=args.workers)
    except ValidationError as exc:  # e.g. --count 0: the message names the field, which is the flag's name
        parser.error("; ".join(f"--{error['loc'][0]}: {error['msg']}" for error in exc.errors()))
    with tempfile.TemporaryDirectory(prefix="aios-rl-bench-gen-") as tmp:
        load_before = os.getloadavg()[0]
        wall0 = time.monotonic()
        summary = generate_benchmark(Path(tmp) / "tasks", config)
        wall = time.monotonic() - wall0
        load_after = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    print(f"shell benchmark-generate: {summary.generated}/{summary.requested} tasks, seed {summary.seed}, "
          f"{args.workers} workers, {cores} cores, load average {load_before:.1f} -> {load_after:.1f}")
    print(f"{'wall time':<28}{wall:>10.1f} s")
    print(f"{'tasks/min (wall)':<28}{60 * summary.generated / wall:>10.1f}")
    print(f"{'candidates judged':<28}{summary.candidates_tried:>10}")
    print(f"{'sandbox runs':<28}{summary.sandbox_runs:>10}   "
          f"({args.workers * wall / max(summary.sandbox_runs, 1):.2f} s wall each, all included)")
    print(f"{'train / holdout':<28}{summary.train:>6} / {summary.holdout}   "
          f"(holdout repos: {', '.join(summary.holdout_repos)})")
    print("\nper repo:")
    for name, n in summary.per_repo.items():
        print(f"  {name:<16}{n:>5}")
    print("\nper operator:")
    for name, n in sorted(summary.per_operator.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {name:<18}{n:>5}  {'#' * n}")


if __name__ == "__main__":
    main()

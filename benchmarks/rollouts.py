"""Rollout allocators side by side: `aios-rl bench rollouts` on a generated task set, and the targets.

Targets (mean over 3 seeds): RAIL reaches uniform-16's final holdout success with at most 50 % of
uniform-16's rollouts and ends at least 3 points above it; RAIL's online controller has an MAE at least 30 %
below the copy frozen at promotion. The measured numbers are printed whatever they are.

Run: ``.venv/bin/python benchmarks/rollouts.py [--count 120] [--out DIR] [bench options...]``. Options other
than --count/--out/--tasks go to `aios-rl bench rollouts` unchanged (see its --help), e.g.
``--budget 512 --seeds 3 --tasks-per-round 8``; its parser checks them before a task set is generated.
Defaults: the issue's six methods, budget 512, 3 seeds.
On a machine with cores to spare, run one seed per process (``--seeds 1 --first-seed S --out DIR_S``),
then ``benchmarks/rollouts.py --merge DIR_0 DIR_1 DIR_2 --out DIR`` for one table and the targets (with
--merge, the other options go to `aios-rl bench merge-rollouts`, e.g. ``--json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import typer
from pydantic import ValidationError

from aios_rl.cli import bench_cmd
from aios_rl.contracts.errors import AiosRlError
from aios_rl.envs.shell.generator import SUMMARY_FILE, GeneratorConfig, generate_benchmark


def targets(rows: list[dict]) -> list[str]:
    by = {r["method"]: r for r in rows}
    rail = next((r for m, r in by.items() if m.startswith("rail")), None)
    uniform = by.get("uniform-16")
    if rail is None or uniform is None:
        return ["targets need both uniform-16 and rail in --methods"]
    lines = []
    match = rail["rollouts_to_match_uniform16"]
    share = None if match is None else match / uniform["rollouts"]
    verdict = "met" if share is not None and share <= 0.5 else "NOT met"
    if uniform["success_mean"] <= uniform["curve"][0][1]:  # uniform-16 never rose above the shared start
        verdict = "not meaningful: uniform-16 ended where every method started"
    lines.append(
        f"RAIL reaches uniform-16's final success ({100 * uniform['success_mean']:.1f} %) after "
        + (
            "never"
            if match is None
            else f"{match:.0f} rollouts = {100 * share:.0f} % of uniform-16's {uniform['rollouts']:.0f}"
        )
        + f"  (target <= 50 %): {verdict}"
    )
    diff = 100 * (rail["success_mean"] - uniform["success_mean"])
    lines.append(
        f"RAIL final success minus uniform-16's: {diff:+.1f} points  (target >= +3): "
        f"{'met' if diff >= 3 else 'NOT met'}"
    )
    online, frozen = rail["rail"].get("rail/mae_online_paired"), rail["rail"].get("rail/mae_frozen")
    if online is None or frozen is None or frozen <= 0:
        lines.append(
            "controller MAE online vs frozen: not measured (the controller was never promoted to live)"
            "  (target >= 30 % lower): NOT met"
        )
    else:
        drop = 1 - online / frozen
        change = f"{100 * drop:.0f} % lower  (target >= 30 %)" if drop >= 0 else (
            f"{-100 * drop:.0f} % higher  (target >= 30 % lower)")  # not "-22 % lower"
        lines.append(
            f"controller MAE online {online:.4f} vs frozen {frozen:.4f}: {change}: "
            f"{'met' if drop >= 0.3 else 'NOT met'}"
        )
    return lines


def run(command: list[str]) -> None:
    """Run an `aios-rl` command; its failure (which it has explained on stderr) ends this script with its
    exit status rather than a CalledProcessError traceback."""
    print("$ aios-rl " + " ".join(command[3:]), flush=True)
    code = subprocess.run(command).returncode
    if code:
        raise SystemExit(code)


def check_bench_args(parser: argparse.ArgumentParser, bench_args: list[str]) -> None:
    """Parse the options for `aios-rl bench rollouts` with that command's own parser, and build the settings
    they give as it does, without running it, so a mistyped option or a value the settings refuse (an
    unknown allocator, a budget of 0) is a usage error now rather than after minutes of generating a missing
    task set."""
    command = typer.main.get_command(bench_cmd.app).commands["rollouts"]  # type: ignore[attr-defined]
    where = ("(options other than --count, --tasks, --out and --merge go to `aios-rl bench rollouts`; "
             "see its --help)")
    try:
        params = command.make_context("aios-rl bench rollouts", ["--tasks", ".", *bench_args]).params
    except typer.exceptions.TyperException as exc:  # click's UsageError, as typer vendors it
        parser.error(f"{exc.format_message()} {where}")
    settings = {k: v for k, v in params.items() if k not in ("tasks", "out", "as_json")}
    try:
        bench_cmd.bench_config(**settings)
    except AiosRlError as exc:
        parser.error(f"{exc} {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=120, help="tasks to generate (train + holdout)")
    parser.add_argument(
        "--tasks",
        type=Path,
        default=None,
        help="task directory, generated with --count tasks when missing (default bench-out/tasks-COUNT, "
        "generated again when incomplete: no benchmark.json, a generation was killed)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bench-out") / f"rollouts-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="output directories of runs over other seeds (--first-seed): merge them into --out, print "
        "targets (other options go to `aios-rl bench merge-rollouts`)",
    )
    args, bench_args = parser.parse_known_args()
    if args.merge:
        # the other options go to merge-rollouts (e.g. --json), which refuses those it does not take
        command = [sys.executable, "-m", "aios_rl.cli", "bench", "merge-rollouts", *map(str, args.merge),
                   "--out", str(args.out), *bench_args]
        run(command)
        for line in targets(json.loads((args.out / "results.json").read_text())):
            print(line)
        return
    check_bench_args(parser, bench_args)
    tasks = args.tasks or Path("bench-out") / f"tasks-{args.count}"
    # benchmark.json is written last: a default directory without it is a generation killed before the end
    # (an older version wrote into the directory itself), generated again; --tasks is used as given
    incomplete = args.tasks is None and tasks.exists() and not (tasks / SUMMARY_FILE).is_file()
    if not tasks.exists() or incomplete:
        try:
            config = GeneratorConfig(count=args.count, seed=0)
        except ValidationError as exc:  # e.g. --count 0: the field names the flag
            parser.error("; ".join(f"--{error['loc'][0]}: {error['msg']}" for error in exc.errors()))
        if incomplete:
            print(f"{tasks} has no {SUMMARY_FILE}: an incomplete generation; generating it again", flush=True)
        generate_benchmark(tasks, config, force=incomplete)
    command = [
        sys.executable,
        "-m",
        "aios_rl.cli",
        "bench",
        "rollouts",
        "--tasks",
        str(tasks),
        "--out",
        str(args.out),
        *bench_args,
    ]
    started = time.perf_counter()
    run(command)
    print(f"\nbenchmark wall time: {(time.perf_counter() - started) / 60:.1f} min")
    for line in targets(json.loads((args.out / "results.json").read_text())):
        print(line)


if __name__ == "__main__":
    main()

"""Crash/resume of online campaigns: SIGKILL at random moments, resume, check every invariant.

Run: ``.venv/bin/python benchmarks/crash_resume.py [--trials 50] [--seed 0] [--tasks DIR] [--keep]``.

Each trial resumes a campaign in a child process (a fresh campaign when the last one finished), waits
until the child has reopened its store, sleeps a random 0..``--max-delay`` seconds and SIGKILLs it, then
checks :func:`aios_rl.campaign.invariants.campaign_problems` on the run directory (the state equals a
fresh replay of the events, pointers verify, every committed slot has exactly one episode and nothing
else is stored, the ledger and lanes name only stored episodes, rollbacks have their diagnosis). The
campaigns are small (micro-batch 2, monitoring window 2, 2-step episodes, 8 slots) so that kills land in
every phase: collection, update, monitoring, epoch close. Prints per-phase counts, invariant violations
(must be 0), the mean resume time (process start to "store reopened, cursor found", and the in-process
part of it) and the episodes re-run per kill (episodes a killed slot had started but not committed). The
runs (and the generated tasks) go to a temporary directory, removed at the end unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from _workdir import add_keep_flag, work_dir

CONFIG = {
    "max_tasks": 8,
    "warm_start_epochs": 0,
    "env": {"max_steps": 2},
    "student": {"compact": {"buckets": 4096}},
    "trainer": {"update_epochs": 4, "lr": 0.003},
    "control": {"ledger": {"batch_size": 2, "monitor_window": 2}},
}


def child(run: Path, tasks: Path, config: Path) -> None:
    """Run (or resume) one campaign, reporting progress on stdout: ``ready``, ``start``, ``task``."""
    started = time.perf_counter()
    from aios_rl.campaign.online import OnlineCampaign
    from aios_rl.campaign.online_config import CampaignConfig
    from aios_rl.contracts.config import load_config

    imported = time.perf_counter()
    resume = (run / "control.db").exists()

    def report(kind: str, info: dict) -> None:
        if kind in ("start", "task"):
            print(kind, info["slot"], info.get("episodes", 0), flush=True)

    campaign = OnlineCampaign(run, tasks, load_config(CampaignConfig, config), resume=resume, on_event=report)
    now = time.perf_counter()
    print("ready", int(resume), f"{now - started:.4f}", f"{now - imported:.4f}", flush=True)
    try:
        campaign.run()
    finally:
        campaign.close()


class Child:
    """A child process whose stdout lines are collected by a thread."""

    def __init__(self, run: Path, tasks: Path, config: Path) -> None:
        self.started = time.perf_counter()
        self.lines: list[list[str]] = []
        self.ready = threading.Event()
        cmd = [sys.executable, __file__, "--child", str(run), "--tasks", str(tasks), "--config", str(config)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.ready_wall = float("nan")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if parts and parts[0] == "ready":
                self.ready_wall = time.perf_counter() - self.started
                self.ready.set()
            self.lines.append(parts)
        self.ready.set()  # exited (finished or failed) without more to say

    def rerun_episodes(self) -> int:
        """Episodes of slots this child started but did not commit."""
        started = {int(p[1]): int(p[2]) for p in self.lines if p[0] == "start"}
        done = {int(p[1]) for p in self.lines if p[0] == "task"}
        return sum(n for slot, n in started.items() if slot not in done)


def phase_of(run: Path) -> str:
    from aios_rl.control.plane import ControlPlane

    if not (run / "control.db").exists():
        return "setup"
    with ControlPlane(run, writer=False) as plane:
        epoch = plane.state.ledger.open_epoch
        if plane.state.lineage.active is None:
            return "setup"
        return "between epochs" if epoch is None else epoch.phase


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50, help="SIGKILLs (each followed by a resume).")
    parser.add_argument("--seed", type=int, default=0, help="Seeds the kill moments.")
    parser.add_argument(
        "--max-delay", type=float, default=6.0, help="Kill at a random moment up to this (s)."
    )
    parser.add_argument("--tasks", type=Path, default=None, help="Task set (default: generate 6 tasks).")
    add_keep_flag(parser)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.tasks, args.config)
        return
    if args.trials < 1:
        parser.error(f"--trials must be at least 1, got {args.trials}")
    if args.max_delay < 0:
        parser.error(f"--max-delay must not be negative, got {args.max_delay:g}")
    with work_dir(parser, args, prefix="aios-crash-resume-") as root:
        lines = kill_and_resume(args, root)
    print("\n".join(lines))


def kill_and_resume(args: argparse.Namespace, root: Path) -> list[str]:
    """The trials, with their campaigns (and the tasks generated without ``--tasks``) under ``root``; returns
    the summary lines."""
    from aios_rl.campaign.invariants import campaign_problems
    from aios_rl.envs.shell.generator import GeneratorConfig, generate_benchmark
    from aios_rl.envs.shell.task import load_tasks

    tasks = args.tasks
    if tasks is None:
        tasks = root / "tasks"
        generate_benchmark(tasks, GeneratorConfig(count=6, seed=0))
    load_tasks(tasks)  # a bad task set fails here, with its reason, not as a child's bare exit status
    config = root / "campaign.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    rng = random.Random(args.seed)
    kills, violations, reruns, campaigns = 0, [], [], 1
    resume_wall, resume_inproc = [], []
    phases: dict[str, int] = {}
    run = root / "run-01"
    started = time.perf_counter()
    while kills < args.trials:
        proc = Child(run, tasks, config)
        proc.ready.wait(300)
        ready = next((p for p in proc.lines if p[0] == "ready"), None)
        time.sleep(rng.uniform(0.0, args.max_delay))
        if proc.proc.poll() is None:
            os.kill(proc.proc.pid, signal.SIGKILL)
        code = proc.proc.wait()
        time.sleep(0.05)  # let the reader thread drain the pipe
        if ready is not None and ready[1] == "1":
            resume_wall.append(proc.ready_wall)
            resume_inproc.append(float(ready[3]))
        if code == -signal.SIGKILL:
            kills += 1
            reruns.append(proc.rerun_episodes())
            phase = phase_of(run)
            phases[phase] = phases.get(phase, 0) + 1
        elif code != 0:
            kept = "" if args.keep else " (removed at exit; --keep keeps it)"
            raise SystemExit(f"campaign child failed with exit code {code} in {run}{kept}")
        problems = campaign_problems(run)
        violations += [f"{run.name} after kill {kills}: {p}" for p in problems]
        if code == 0:  # finished: the next trials kill a fresh campaign
            campaigns += 1
            run = root / f"run-{campaigns:02d}"
        print(
            f"\rtrials {kills}/{args.trials}  violations {len(violations)}",
            end="",
            file=sys.stderr,
            flush=True,
        )
    print(file=sys.stderr)
    elapsed = time.perf_counter() - started
    return report_lines(kills, campaigns, elapsed, violations, resume_wall, resume_inproc, reruns, phases)


def report_lines(kills: int, campaigns: int, elapsed: float, violations: list[str], resume_wall: list[float],
                 resume_inproc: list[float], reruns: list[int], phases: dict[str, int]) -> list[str]:
    """The printed summary. Resume times average the children that resumed a campaign; with none (a single
    trial kills the fresh campaign it started) the mean is left out, and null in the JSON line."""
    resumed = "- (nothing resumed)"
    if resume_wall:
        resumed = (f"{statistics.mean(resume_wall):.2f} wall from process start, "
                   f"{statistics.mean(resume_inproc):.3f} reopening the store")
    lines = [
        f"crash/resume: {kills} SIGKILLs, {campaigns} campaign(s), {campaigns - 1} resumed to completion, "
        f"in {elapsed:.0f}s",
        f"{'trials':>24} {kills}",
        f"{'invariant violations':>24} {len(violations)}",
        f"{'mean resume time (s)':>24} {resumed} (n={len(resume_wall)})",
        f"{'re-run episodes per kill':>24} {statistics.mean(reruns):.2f} (max {max(reruns)})",
        f"{'kills by phase':>24} " + ", ".join(f"{k} {v}" for k, v in sorted(phases.items())),
    ]
    lines += [f"  VIOLATION {line}" for line in violations[:20]]
    summary = {
        "trials": kills,
        "violations": len(violations),
        "mean_resume_s": statistics.mean(resume_wall) if resume_wall else None,
        "rerun_episodes_per_kill": statistics.mean(reruns),
    }
    return [*lines, json.dumps(summary)]

if __name__ == "__main__":
    main()

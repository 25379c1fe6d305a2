"""Online campaigns under the bad-update drill, with and without the rollback net: success of ``active``.

Run: ``.venv/bin/python benchmarks/campaign.py [--max-tasks 16] [--count 32] [--seed 0] [--tasks DIR]
[--keep]``.

Two campaigns run the same task stream from the same oracle-warm-started student with ``--drill
bad-update`` (the first update is deliberately harmful: gradient ascent on the good actions). One keeps
the safety net (rollback after a streak of 3 worse/failed matched comparisons); the other has it switched
off (rollback threshold 1000: the campaign keeps serving whatever the updates produce). After every task
slot the benchmark notes which checkpoint is ``active``; each distinct checkpoint is then evaluated with
greedy decoding on the holdout split (unseen mutants of the same seed repositories, never trained on) and
on the train tasks the campaign serves. Prints the side-by-side trajectory and the
slot-averaged success of ``active``. The runs (and the generated tasks) go to a temporary directory, removed
at the end unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import torch
from _workdir import add_keep_flag, work_dir
from pydantic import ValidationError

from aios_rl.campaign.evaluate import evaluate
from aios_rl.campaign.online import OnlineCampaign
from aios_rl.campaign.online_config import CampaignConfig
from aios_rl.campaign.slots import slot_task
from aios_rl.campaign.students import restore_student
from aios_rl.contracts.config import load_config
from aios_rl.control.plane import ControlPlane
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.generator import GeneratorConfig, generate_benchmark
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import load_tasks

SETTINGS: dict[str, Any] = {
    "drill": "bad-update",
    "warm_start_epochs": 3,
    "env.max_steps": 3,
    "student.compact": {"buckets": 4096, "text_scorer": True},
    "trainer.update_epochs": 4,
    "trainer.lr": 0.003,
}


def run_campaign(run: Path, tasks: Path, max_tasks: int, seed: int, net: bool) -> tuple[list[str], dict]:
    """Run one campaign; returns the active checkpoint after each slot and the summary."""
    overrides = SETTINGS | {"max_tasks": max_tasks, "seed": seed}
    if not net:
        overrides["control.ledger.rollback_threshold"] = 1000
    actives: list[str] = []
    holder: dict[str, OnlineCampaign] = {}

    def on_event(kind: str, info: dict) -> None:
        if kind == "task":
            actives.append(holder["c"].plane.state.lineage.active or "")

    campaign = OnlineCampaign(run, tasks, load_config(CampaignConfig, None, overrides), on_event=on_event)
    holder["c"] = campaign
    try:
        summary = campaign.run().as_json()
    finally:
        campaign.close()
    return actives, summary


def success(run: Path, checkpoint: str, tasks: list, sandbox: Sandbox) -> float:
    with ControlPlane(run, writer=False) as plane:
        tensors, meta = plane.load_checkpoint(checkpoint)
    policy = restore_student(meta["policy"], tensors)
    config = CampaignConfig().env.model_copy(update={"max_steps": 3})
    result = evaluate(policy, tasks, lambda: ShellBugfixEnv(config, sandbox=sandbox), samples=1, seed=0)
    return result.success_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tasks", type=int, default=16, help="Task slots per campaign.")
    parser.add_argument("--count", type=int, default=32, help="Tasks to generate (without --tasks).")
    parser.add_argument(
        "--holdout-fraction", type=float, default=0.3, help="Generated tasks held out (unseen mutants)."
    )
    parser.add_argument("--seed", type=int, default=0, help="Campaign seed.")
    parser.add_argument(
        "--tasks", type=Path, default=None, help="Task set (default: generate --count tasks)."
    )
    add_keep_flag(parser)
    args = parser.parse_args()
    if args.max_tasks < 1:  # checked before the tasks are generated, not by the first campaign's config
        parser.error(f"--max-tasks must be at least 1, got {args.max_tasks}")
    generator = None
    if args.tasks is None:
        try:
            generator = GeneratorConfig(
                count=args.count, seed=0, holdout_repos=0, holdout_fraction=args.holdout_fraction
            )
        except ValidationError as exc:  # e.g. --count 0: the field names the flag
            flags = (f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" for e in exc.errors())
            parser.error("; ".join(flags))
    torch.set_num_threads(1)
    with work_dir(parser, args, prefix="aios-campaign-bench-") as root:
        measure(args, root, generator)


def measure(args: argparse.Namespace, root: Path, generator: GeneratorConfig | None = None) -> None:
    """Run both campaigns under ``root`` (generating the tasks there with ``generator`` without ``--tasks``);
    print the table."""
    tasks_dir = args.tasks
    if tasks_dir is None:
        tasks_dir = root / "tasks"
        assert generator is not None  # main() builds it whenever --tasks is left out
        generate_benchmark(tasks_dir, generator)
    holdout, train = load_tasks(tasks_dir, split="holdout"), load_tasks(tasks_dir, split="train")
    if not holdout:
        raise SystemExit(f"{tasks_dir} has no holdout tasks; raise --count or --holdout-fraction")
    sandbox = Sandbox(CampaignConfig().env.sandbox)
    started = time.perf_counter()
    results = {}
    for name, net in (("with net", True), ("without net", False)):
        run = root / name.replace(" ", "-")
        actives, summary = run_campaign(run, tasks_dir, args.max_tasks, args.seed, net)
        served = list(
            {
                t.task_id: t for t in (slot_task(train, args.seed, k)[0] for k in range(args.max_tasks))
            }.values()
        )
        scores = {
            c: (success(run, c, holdout, sandbox), success(run, c, served, sandbox))
            for c in dict.fromkeys(actives)
        }
        results[name] = (actives, summary, scores)
    print(
        f"bad-update drill at update 1; {len(train)} train / {len(holdout)} holdout tasks "
        f"('train' columns: the {len(served)} tasks the campaign serves); "
        f"{args.max_tasks} slots; {time.perf_counter() - started:.0f}s"
    )
    print(
        f"{'slot':>4} | {'with net: active':>16} {'holdout':>7} {'train':>5} | "
        f"{'without net: active':>19} {'holdout':>7} {'train':>5}"
    )
    with_net, without = results["with net"], results["without net"]
    for k in range(args.max_tasks):
        row = []
        for actives, _, scores in (with_net, without):
            c = actives[k] if k < len(actives) else "-"
            h, t = scores.get(c, (float("nan"), float("nan")))
            row.append((c, h, t))
        (a, h1, t1), (b, h2, t2) = row
        print(f"{k:>4} | {a:>16} {h1:>7.2f} {t1:>5.2f} | {b:>19} {h2:>7.2f} {t2:>5.2f}")
    for name, (actives, summary, scores) in results.items():
        if actives:
            mean_h = sum(scores[c][0] for c in actives) / len(actives)
            mean_t = sum(scores[c][1] for c in actives) / len(actives)
            means = f"holdout {mean_h:.3f}, train {mean_t:.3f}"
        else:  # the campaign stopped (froze) before it finished a slot
            means = "holdout -, train - (no slot finished)"
        print(
            f"{name:>12}: active's success averaged over slots: {means}; "
            f"final active {summary['pointers']['active']}; updates {summary['updates']}, "
            f"rollbacks {summary['rollbacks']}, promotions {summary['promotions']}, "
            f"comparisons {summary['comparisons']}"
        )


if __name__ == "__main__":
    main()

"""Warm start passes: the opening-state ranking of held-back training tasks against distillation passes.

How many passes over the oracle's demonstrations should ``shell train``'s warm start take? This answers it
from the training split alone (the holdout is never loaded): the training tasks are split into ``--folds``
folds; for each fold, a fresh compact student is distilled, exactly as the warm start does it
(``campaign.demos``: the same demonstrations, trainer and passes), on the demonstrations of the other folds,
and after each cumulative pass count in ``--passes`` it ranks the candidates of every held-back task's
opening state. Reported per pass count, over folds and seeds: the share of held-back tasks whose reference
fix is the top candidate (top-1) and within the first six (top-6: a greedy episode of the default 12 steps
tries about six patches, a revert between two), and the mean cross-entropy of the reference fix where the
opening state offers it.

``--label-fraction F`` distils each fold on the demonstrations of only a share F of its training tasks
(drawn once per fold): comparing fractions shows how much more labelled tasks would add at a given number
of passes, which bounds what RL's self-imitation of its own verified fixes (labels for unlabelled tasks,
in effect) can add to the student's ranking.

Run: ``.venv/bin/python benchmarks/warm_start_passes.py --tasks TASKS [--folds 4] [--seeds 1]
[--passes 20,40,60,80] [--label-fraction 1] [--workers 2] [--json OUT.json]``. ``TASKS``: a task set
(``shell benchmark-generate``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from tqdm import tqdm

from aios_rl.algos.distill import distill_batch_from
from aios_rl.algos.trainer import Trainer
from aios_rl.contracts.episode import Task
from aios_rl.contracts.errors import AiosRlError
from aios_rl.campaign.demos import Demonstration, distill_passes, oracle_demonstrations
from aios_rl.campaign.students import make_student
from aios_rl.campaign.train import ShellTrainConfig
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import load_tasks

TOP = (1, 6)


def split_folds(ids: Sequence[str], folds: int, seed: int = 0) -> list[list[str]]:
    """``ids`` shuffled by ``seed`` and dealt into ``folds`` folds (sizes differ by at most one)."""
    if not 2 <= folds <= len(ids):
        raise ValueError(f"--folds must be in [2, {len(ids)}] (the training tasks), got {folds}")
    shuffled = sorted(ids)
    random.Random(seed).shuffle(shuffled)
    return [shuffled[k::folds] for k in range(folds)]


def reference_rank(logits: torch.Tensor, reference: int) -> int:
    """Candidates scored strictly above the reference (0: it is the top candidate)."""
    return int((logits > logits[reference]).sum())


def score_openings(policy, openings: Sequence[Demonstration]) -> tuple[list[int], list[float]]:
    """The reference fix's rank at each opening state, and its cross-entropy where it is a candidate.

    A fix the opening state does not offer (a few tasks: see ``envs/shell/candidates``) ranks below every
    candidate, so it counts as a miss at every cut-off.
    """
    ranks, losses = [], []
    with torch.no_grad():
        for observation, environment, references, _ in openings:
            if references[0] not in observation.candidates:
                ranks.append(len(observation.candidates))
                continue
            logits = policy.forward([observation], [environment]).logits[0][: len(observation.candidates)]
            reference = observation.candidates.index(references[0])
            ranks.append(reference_rank(logits, reference))
            losses.append(float(torch.logsumexp(logits, 0) - logits[reference]))
    return ranks, losses


def summarize(mark: int, ranks: list[int], losses: list[float]) -> dict[str, float | None]:
    """One pass count's row; a metric with nothing to average over (no held-back task scored, or no
    opening offering its reference fix) is None rather than an error."""
    row: dict[str, float | None] = {"passes": mark, "held_back": len(ranks),
                                    "cross_entropy": statistics.fmean(losses) if losses else None}
    row |= {f"top{k}": sum(r < k for r in ranks) / len(ranks) if ranks else None for k in TOP}
    return row


def _cell(value: float | None, scale: float, digits: int) -> str:
    return "-" if value is None else f"{scale * value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, required=True, help="a task set; only its train split is used")
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=1, help="student initialisations per fold")
    parser.add_argument("--passes", default="20,40,60,80", help="cumulative pass counts to score at")
    parser.add_argument("--label-fraction", type=float, default=1.0,
                        help="share of each fold's training tasks whose demonstrations are distilled "
                        "(default 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    parser.add_argument("--workers", type=int, default=ShellTrainConfig().workers,
                        help="environments building the demonstrations at once (default: shell train's)")
    args = parser.parse_args()
    try:
        marks = sorted({int(p) for p in args.passes.split(",")})
    except ValueError:
        parser.error(f"--passes must be comma-separated integers, got {args.passes!r}")
    if not marks or marks[0] < 1:
        parser.error(f"--passes must be positive, got {args.passes!r}")
    if args.seeds < 1:  # no student trained: nothing to average
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if not 0 < args.label_fraction <= 1:
        parser.error(f"--label-fraction must be in (0, 1], got {args.label_fraction}")
    torch.set_num_threads(1)
    config = ShellTrainConfig()
    try:
        tasks = [t for t in load_tasks(args.tasks, split="train") if t.oracle.get("reference_patch")]
    except AiosRlError as exc:  # not a task set: say why, without a traceback
        parser.error(str(exc))
    try:
        folds = split_folds([t.task_id for t in tasks], args.folds)
    except ValueError as exc:
        parser.error(str(exc))
    sandbox = Sandbox(config.env.sandbox)

    def demonstrate(task: Task) -> list[Demonstration]:
        make_env = lambda: ShellBugfixEnv(config.env, sandbox=sandbox)  # noqa: E731
        return oracle_demonstrations([task], make_env, seed=config.seed)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:  # the items do not depend on the workers
        built = list(tqdm(pool.map(demonstrate, tasks), total=len(tasks), desc="demonstrations", unit="task"))
    demos = {task.task_id: items for task, items in zip(tasks, built)}
    results: dict[int, dict[str, list[float]]] = {m: {"ranks": [], "losses": []} for m in marks}
    bar = tqdm(total=args.seeds * len(folds) * marks[-1], desc="distillation passes", unit="pass")
    for seed in range(args.seeds):
        for k, held in enumerate(folds):
            rest = [task for task in sorted(demos) if task not in held]
            share = max(1, round(args.label_fraction * len(rest)))
            labelled = random.Random(f"labels:{k}").sample(rest, share)
            batch = distill_batch_from([d for task in sorted(labelled) for d in demos[task]])
            openings = [demos[task][0] for task in held if demos[task]]
            policy = make_student(config.student, seed=seed)
            trainer = Trainer(policy, config.trainer)
            done = 0
            for mark in marks:
                distill_passes(trainer, batch, seed=seed * 1_000 + done, passes=mark - done)
                bar.update(mark - done)
                done = mark
                ranks, losses = score_openings(policy, openings)
                results[mark]["ranks"] += ranks
                results[mark]["losses"] += losses
                bar.write(f"seed {seed} fold {k} passes {mark}: top-6 {sum(r < 6 for r in ranks)}/{len(ranks)}")
    bar.close()
    rows = [summarize(mark, results[mark]["ranks"], results[mark]["losses"]) for mark in marks]
    print(f"\nwarm start passes: {len(tasks)} training tasks, {args.folds} folds, {args.seeds} seed(s), "
          f"label fraction {args.label_fraction:g}")
    print(f"{'passes':>6}  {'top-1 %':>8}  {'top-6 %':>8}  {'cross-entropy':>13}")
    for row in rows:
        print(f"{row['passes']:>6}  {_cell(row['top1'], 100, 1):>8}  {_cell(row['top6'], 100, 1):>8}  "
              f"{_cell(row['cross_entropy'], 1, 3):>13}")
    if any(row["held_back"] == 0 for row in rows):
        print("top-k -: no held-back task has a demonstration (the oracle fixed none of them)")
    if any(row["cross_entropy"] is None for row in rows):
        print("cross-entropy -: no held-back opening offers its reference fix")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "args": vars(args)}, indent=2, default=str))


if __name__ == "__main__":
    main()

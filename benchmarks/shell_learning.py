"""Learning on the shell benchmark: trained compact student vs untrained vs uniform-random, on the holdout.

Three training configurations side by side: pure RL (no teacher), distillation only (teacher, no RL
updates) and distillation followed by RL. The teacher configurations start from one shared oracle warm
start per seed (``--init-from``), which is also evaluated on its own, so what the epochs add is measured
against the same starting point; their training minutes include the warm start. Holdout success is
reported overall and separately for unseen mutants of training repositories and for seed repositories
never seen in training. The gated configurations (``--configs distill+gate,distill+rl+gate``, with
``--val-fraction``) run `shell train`'s validation gate on the validation tasks with ``rule: mean``: an epoch
whose update scores worse there (greedy) than its parent is rolled back (campaign/validation). Their "val %"
column is then measured on the tasks they were selected on, so it flatters them; compare holdout columns.
``distill+rl+distinct`` and ``rl+distinct`` are the RL configurations with ``distinct_first`` on (a task's
group draws its first actions without replacement), to be compared with ``distill+rl`` and ``rl`` run beside
them from the same warm start and seeds. ``distill+rl+states`` and ``rl+states`` turn on ``distinct_states``
instead (no action drawn twice from one state within a task's group: a group of 4 tries up to 24 different
patches from the opening state). ``distill+rl+redistill`` is ``distill+rl`` followed by `shell redistill`
(60 passes: a fresh student distilled on the teacher's demonstrations and those of the fixes RL verified);
run beside ``distill+rl`` (listed after it), it redistils a copy of that seed's finished run, so the two
differ only by the redistillation. ``--setting KEY=VALUE`` changes a `shell train` setting of every
configuration but not of the shared warm start (e.g. ``consolidation_passes=12``); give each setting its
own ``--out``.

Run: ``.venv/bin/python benchmarks/shell_learning.py [--seeds 3] [--epochs 5] ...`` (defaults are the
issue's targets; see --help). Results also go to ``OUT/results-CONFIGS-sFIRST-LAST.json`` (e.g.
``results-rl_distill_distill-rl-s0-2.json``), which ``--merge`` combines.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
from pathlib import Path

import torch
from pydantic import ValidationError
from scipy.stats import binomtest

from aios_rl.algos.trainer import TrainerConfig
from aios_rl.campaign.evaluate import evaluate
from aios_rl.campaign.metrics import phase_minutes
from aios_rl.campaign.shell_eval import holdout_group
from aios_rl.campaign.train import ShellTrainConfig, ShellTraining, load_student_from
from aios_rl.campaign.validation import ValidationConfig
from aios_rl.contracts.episode import DecodingRegime
from aios_rl.contracts.errors import AiosRlError, ConfigError, LineageError
from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.generator import SUMMARY_FILE, GeneratorConfig, generate_benchmark
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import iter_task_dirs, load_tasks
from aios_rl.policy.uniform import UniformPolicy
from aios_rl.storage.files import write_text_atomic

CONFIGS = {
    "pure RL (--teacher none)": {"teacher": "none", "rl": True},
    "distillation only": {"teacher": "oracle", "rl": False},
    "distillation + RL": {"teacher": "oracle", "rl": True},
    "distillation only, gated": {"teacher": "oracle", "rl": False, "gate": True},
    "distillation + RL, gated": {"teacher": "oracle", "rl": True, "gate": True},
    "distillation + RL, distinct": {"teacher": "oracle", "rl": True, "distinct_first": True},
    "pure RL, distinct": {"teacher": "none", "rl": True, "distinct_first": True},
    "distillation + RL, distinct states": {"teacher": "oracle", "rl": True, "distinct_states": True},
    "pure RL, distinct states": {"teacher": "none", "rl": True, "distinct_states": True},
    "distillation + RL, redistilled": {"teacher": "oracle", "rl": True, "redistill": 60},
}
REDISTILLED_FROM = "distillation + RL"  # the configuration a redistilled one copies when it ran first
SHORT = {"rl": "pure RL (--teacher none)", "distill": "distillation only", "distill+rl": "distillation + RL",
         "distill+gate": "distillation only, gated", "distill+rl+gate": "distillation + RL, gated",
         "distill+rl+distinct": "distillation + RL, distinct", "rl+distinct": "pure RL, distinct",
         "distill+rl+states": "distillation + RL, distinct states", "rl+states": "pure RL, distinct states",
         "distill+rl+redistill": "distillation + RL, redistilled"}

DERIVED_FROM = "derived-from.json"  # in a labelled copy: the task set and fractions it was made from


def training_minutes(run: Path, warm_run: Path | None) -> float | None:
    """The minutes the run's phases took (a copied run's epochs included), plus its warm start's when it
    started from one; read from the runs' metrics, so a resumed benchmark counts the phases finished before
    it was killed (not one the kill interrupted). None for runs stored before phase times were recorded."""
    parts = [phase_minutes(run / "metrics.jsonl")]
    if warm_run is not None:
        parts.append(phase_minutes(warm_run / "metrics.jsonl"))
    return None if None in parts else sum(parts)  # type: ignore[arg-type]


def env_factory(sandbox: Sandbox):
    """Shell environments with the default settings (what `shell train` and `shell eval` use)."""
    config = ShellEnvConfig()
    return lambda: ShellBugfixEnv(config, sandbox=sandbox)


def holdout_eval(policy, tasks_dir: Path, sandbox: Sandbox, seed: int,
                 solved: dict[str, int] | None = None) -> dict[str, float]:
    """Greedy holdout success overall and per holdout kind; ``solved`` receives 1/0 per task id."""
    holdout = load_tasks(tasks_dir, split="holdout")

    def record(task, episodes) -> None:
        if solved is not None:
            solved[task.task_id] = int(all(e.outcome == "success" for e in episodes))

    result = evaluate(policy, holdout, env_factory(sandbox), samples=1, seed=seed,
                      group_of=holdout_group(train_repos(tasks_dir)), on_task=record)
    return {"holdout": result.success_rate, **result.by_group}


def train_repos(tasks_dir: Path) -> set[str]:
    return {t.oracle.get("metadata", {}).get("seed_repo") for t in load_tasks(tasks_dir, split="train")}


def holdout_groups(tasks_dir: Path) -> dict[str, str]:
    """Each holdout task's group as holdout_eval reports it (unseen_mutants or unseen_repos), by task id."""
    group = holdout_group(train_repos(tasks_dir))
    return {task.task_id: group(task) for task in load_tasks(tasks_dir, split="holdout")}


# Paired comparisons printed by --merge: (configuration, the one it must beat), over every (seed, holdout task).
PAIRED = [
    ("distillation + RL", "distillation only"),
    ("distillation + RL, distinct states", "distillation only"),
    ("distillation + RL, distinct states", "distillation + RL"),
    ("distillation + RL, gated", "distillation only, gated"),
    ("distillation + RL, distinct", "distillation only"),
    ("distillation + RL, redistilled", "distillation only"),
    ("distillation + RL, redistilled", "distillation + RL"),
    ("pure RL (--teacher none)", "untrained student"),
    ("pure RL, distinct states", "untrained student"),
    ("pure RL, distinct states", "pure RL (--teacher none)"),
]


GROUP_LABELS = {"unseen_repos": "unseen repos", "unseen_mutants": "unseen mutants"}


def paired_lines(by_task: dict[str, dict[str, dict[str, int]]],
                 groups: dict[str, str] | None = None) -> list[str]:
    """For each pair in PAIRED present on common seeds: the (seed, task) pairs one solves and the other does
    not, and the two-sided exact sign test over them (as the control plane's verdicts). With ``groups`` (task
    id -> holdout group), an indented line per group follows each pair's line."""
    groups = groups or {}
    lines = []
    for a, b in PAIRED:
        seeds = sorted(set(by_task.get(a, {})) & set(by_task.get(b, {})), key=int)
        if not seeds:
            continue
        pairs = [(task, won, other) for seed in seeds for task, won in by_task[a][seed].items()
                 if (other := by_task[b][seed].get(task)) is not None]
        lines.append(f"{a} vs {b}: seeds {','.join(seeds)}: {_sign_test(pairs)}")
        for group, label in GROUP_LABELS.items():
            within = [pair for pair in pairs if groups.get(pair[0]) == group]
            if within:
                lines.append(f"  {label}: {_sign_test(within)}")
    return lines


def _sign_test(pairs: list[tuple[str, int, int]]) -> str:
    better, worse = sum(a > b for _, a, b in pairs), sum(a < b for _, a, b in pairs)
    p = binomtest(better, better + worse, 0.5).pvalue if better + worse else 1.0
    return f"better on {better}, worse on {worse} (seed, task) pairs; sign test p = {min(1.0, p):.3f}"


def val_eval(policy, val_dir: Path, sandbox: Sandbox, seed: int, samples: int = 4) -> dict[str, float]:
    """Sampled success (temperature 1) on the validation tasks carved from the training split."""
    result = evaluate(policy, load_tasks(val_dir), env_factory(sandbox), samples=samples, seed=seed,
                      regime=DecodingRegime(name="val", temperature=1.0))
    return {"val": result.success_rate}


def derive_tasks(tasks_dir: Path, out: Path, label_fraction: float, val_fraction: float) -> tuple[Path, Path | None]:
    """A copy of ``tasks_dir`` for training and, with ``val_fraction`` > 0, a validation directory.

    Validation: a fixed share of the training tasks (seed 1) moves out of the copy into ``OUT-val``, so no
    training run sees them; settings are chosen on them, never on the holdout. Labels: only
    ``label_fraction`` of the remaining training tasks keep their reference patch (a fixed subset, seed 0).
    The others look like bug reports without a known fix: the oracle cannot demonstrate or label them (it
    shapes their rewards from test evidence only), so only RL learns from them. Holdout tasks are copied
    unchanged.

    The copy records what it was made from (:data:`DERIVED_FROM`) and is reused only for that: made from
    another task set, it is refused (a copy made before the record existed is reused as before).
    """
    val = out.with_name(out.name + "-val") if val_fraction > 0 else None
    source = {"tasks": str(tasks_dir.resolve()), "label_fraction": label_fraction,
              "val_fraction": val_fraction}
    if out.exists():
        stamp = out / DERIVED_FROM
        made_from = json.loads(stamp.read_text()) if stamp.is_file() else source
        if made_from != source:
            raise ConfigError(f"{out} was made from {made_from['tasks']}, not from {source['tasks']}: "
                              "give this run another --out, or remove the copy to make it again")
        return out, val
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(tasks_dir, partial)
    train = sorted(m for m in partial.glob("*/manifest.json") if json.loads(m.read_text())["split"] == "train")
    if val is not None:
        held = set(random.Random(1).sample(train, round(val_fraction * len(train))))
        shutil.rmtree(val, ignore_errors=True)
        val.mkdir(parents=True)
        for manifest in sorted(held):
            shutil.move(str(manifest.parent), str(val / manifest.parent.name))
        train = [m for m in train if m not in held]
    keep = set(random.Random(0).sample(train, round(label_fraction * len(train))))
    for manifest in train:
        if manifest not in keep:
            data = json.loads(manifest.read_text())
            data["reference_patch"] = None
            manifest.write_text(json.dumps(data, indent=2))
    (partial / DERIVED_FROM).write_text(json.dumps(source, indent=2))
    partial.rename(out)
    return out, val


def key_values(parser: argparse.ArgumentParser, flag: str, items: list[str], model: type) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict, after checking that ``model`` accepts them (else a usage error)."""
    try:
        values = dict(item.split("=", 1) for item in items)
        model.model_validate(values)
    except ValueError as exc:
        parser.error(f"{flag}: {exc}")
    return values


def fmt(values: list[float]) -> str:
    if not values:
        return "-"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):5.1f} ± {100 * std:4.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--count", type=int, default=120, help="tasks generated (train + holdout)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run are first-seed .. first-seed + seeds - 1")
    parser.add_argument("--tasks-per-epoch", type=int, default=ShellTrainConfig().tasks_per_epoch)
    parser.add_argument("--group-size", type=int, default=ShellTrainConfig().group_size)
    parser.add_argument("--out", type=Path, default=Path("bench-out/learning"))
    parser.add_argument("--tasks", type=Path, default=None,
                        help="an existing task set (a missing one is an error: make it with `aios-rl shell "
                        "benchmark-generate`); default: OUT/tasks, generated with --count tasks when missing "
                        "or incomplete (no benchmark.json: a generation was killed)")
    parser.add_argument("--configs", default="rl,distill,distill+rl",
                        help=f"subset of: {', '.join(SHORT)} (gated: with --val-fraction)")
    parser.add_argument("--label-fraction", type=float, default=1.0,
                        help="share of training tasks whose reference fix the oracle may use (default 1: all); "
                        "the rest are trained on by RL alone")
    parser.add_argument("--val-fraction", type=float, default=0.0,
                        help="share of training tasks moved out of training into a validation set, on which every "
                        "configuration is also evaluated (sampled, 4 episodes per task): choose settings there")
    parser.add_argument("--trainer", action="append", default=[], metavar="KEY=VALUE",
                        help="a trainer setting for the epochs after the warm start (repeatable), e.g. update_epochs=4")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a top-level `shell train` setting for the configurations (not the shared warm "
                        "start; repeatable), e.g. consolidation_passes=12")
    parser.add_argument("--no-baselines", action="store_true", help="skip the uniform and untrained evaluations")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="print one table over these results-*.json (and by-task-*.json) files and exit")
    parser.add_argument("--rescore", action="store_true",
                        help="evaluate again the --configs runs an earlier invocation with the same --out, --tasks, "
                        "--seeds, --first-seed and --label-fraction left, recording per-task outcomes in "
                        "OUT/by-task-*.json")
    args = parser.parse_args()
    if args.merge:
        unreadable = [f"{file} ({why})" for file in args.merge if (why := _not_results(file))]
        if unreadable:
            parser.error("--merge takes the results-*.json and by-task-*.json files of this benchmark; "
                         f"these are not: {'; '.join(unreadable)}")
        merge(args.merge)
        return
    trainer_update = key_values(parser, "--trainer", args.trainer, TrainerConfig)
    settings = key_values(parser, "--setting", args.setting, ShellTrainConfig)
    if not 0 < args.label_fraction <= 1:
        parser.error(f"--label-fraction must be in (0, 1], got {args.label_fraction}")
    if not 0 <= args.val_fraction < 1:
        parser.error(f"--val-fraction must be in [0, 1), got {args.val_fraction}")
    unknown = [key for key in args.configs.split(",") if key.strip() not in SHORT]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; choose from {', '.join(SHORT)}")
    chosen = {SHORT[key.strip()]: dict(CONFIGS[SHORT[key.strip()]]) for key in args.configs.split(",")}
    if not args.rescore and not args.val_fraction and any(c.get("gate") for c in chosen.values()):
        parser.error("--configs: the gated configurations need --val-fraction (the validation tasks they are "
                     "gated on)")
    if args.tasks is not None and not args.tasks.is_dir():
        parser.error(f"--tasks: {args.tasks} is not a task set directory; generate one with `aios-rl "
                     f"shell benchmark-generate --count {args.count} --seed 0 --out {args.tasks}`, or "
                     "leave out --tasks to generate --count tasks into OUT/tasks")
    try:
        generator = GeneratorConfig(count=args.count, seed=0)
        # e.g. --epochs 0: refused here, not by the first run's config after the baselines were evaluated
        ShellTrainConfig(epochs=args.epochs, tasks_per_epoch=args.tasks_per_epoch, group_size=args.group_size)
    except ValidationError as exc:  # e.g. --count 0: the field names the flag
        parser.error("; ".join(f"--{str(error['loc'][0]).replace('_', '-')}: {error['msg']}"
                               for error in exc.errors()))
    torch.set_num_threads(1)
    try:
        run_benchmark(args, chosen, generator, settings, trainer_update)
    except AiosRlError as exc:  # e.g. a --tasks that is not a task set: say so, as the CLI does
        parser.exit(2, f"error: {exc}\n")


def run_benchmark(args: argparse.Namespace, chosen: dict[str, dict], generator: GeneratorConfig,
                  settings: dict[str, str], trainer_update: dict[str, str]) -> None:
    """Train and evaluate the ``chosen`` configurations for every seed (or ``--rescore`` them), print the
    table and write the results file; ``main`` has checked the flags."""
    args.out.mkdir(parents=True, exist_ok=True)
    tasks_dir = args.tasks or args.out / "tasks"
    if args.tasks is None and tasks_dir.exists() and not (tasks_dir / SUMMARY_FILE).is_file():
        # benchmark.json is written last: a generation killed before it left no complete set (an older
        # version wrote into the directory itself), and the labelled copies made of it are partial too
        print(f"{tasks_dir} has no {SUMMARY_FILE}: an incomplete generation; generating it again", flush=True)
        for derived in args.out.glob("tasks-labels-*"):
            shutil.rmtree(derived)
        generate_benchmark(tasks_dir, generator, force=True)
    elif not tasks_dir.exists():
        generate_benchmark(tasks_dir, generator)
    used = f"{len(iter_task_dirs(tasks_dir))} tasks from {tasks_dir}"  # before a derived copy replaces it
    val_dir = None
    if args.label_fraction < 1 or args.val_fraction > 0:
        name = f"tasks-labels-{args.label_fraction:g}" + (f"-val-{args.val_fraction:g}" if args.val_fraction else "")
        tasks_dir, val_dir = derive_tasks(tasks_dir, args.out / name, args.label_fraction, args.val_fraction)
    sandbox = Sandbox()
    rows: dict[str, dict[str, list[float]]] = {}
    minutes: dict[str, list[float]] = {}

    def add(name: str, scores: dict[str, float]) -> None:
        for key, value in scores.items():
            rows.setdefault(name, {}).setdefault(key, []).append(value)

    by_task: dict[str, dict[str, dict[str, int]]] = {}  # configuration -> seed -> task id -> solved

    def scored(name: str, policy, seed: int) -> dict[str, float]:
        return holdout_eval(policy, tasks_dir, sandbox, seed, by_task.setdefault(name, {}).setdefault(str(seed), {}))

    def add_trained(name: str, policy, seed: int) -> None:
        add(name, scored(name, policy, seed))
        if val_dir is not None:
            add(name, val_eval(policy, val_dir, sandbox, seed))

    if args.rescore:
        rescore(args, tasks_dir, list(chosen))
        return
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        if not args.no_baselines:
            add("uniform-random candidates", scored("uniform-random candidates", UniformPolicy(), seed))
        warm_run, warm_done = args.out / f"seed{seed}-warm-start", False
        untrained_done = False  # the untrained student is evaluated once per seed, before the first pure RL run
        for name, config in chosen.items():
            overrides = {k: v for k, v in config.items() if k not in ("gate", "redistill")}
            gated, redistill = config.get("gate", False), config.get("redistill", 0)
            run = args.out / run_name(seed, name, config)
            cfg = ShellTrainConfig(epochs=args.epochs, tasks_per_epoch=args.tasks_per_epoch,
                                   group_size=args.group_size, seed=seed, **overrides)
            if gated:
                cfg = cfg.model_copy(update={"validation": ValidationConfig(tasks_dir=str(val_dir), rule="mean")})
            if overrides["teacher"] != "none":  # both teacher configurations start from one shared warm start
                if not warm_done:
                    warm_done = True
                    warm = ShellTraining(warm_run, tasks_dir, cfg.model_copy(update={"rl": False, "validation": ValidationConfig()}))
                    warm.warm_start()
                    add_trained("oracle warm start alone", warm.policy, seed)
                    print(f"seed {seed} oracle warm start alone: {rows['oracle warm start alone']['holdout'][-1]:.3f}",
                          flush=True)
                    warm.close()
                cfg = cfg.model_copy(update={"init_from": f"{warm_run}:active"})
            if settings:
                cfg = ShellTrainConfig.model_validate(cfg.model_dump() | settings)
            if trainer_update:
                trainer = TrainerConfig.model_validate(cfg.trainer.model_dump() | trainer_update)
                cfg = cfg.model_copy(update={"trainer": trainer})
            names = list(chosen)
            if redistill and REDISTILLED_FROM in names[:names.index(name)] and not run.exists():
                shutil.copytree(args.out / run_name(seed, REDISTILLED_FROM, CONFIGS[REDISTILLED_FROM]), run)
            training = ShellTraining(run, tasks_dir, cfg)
            if overrides["teacher"] == "none" and not args.no_baselines and not untrained_done:
                untrained_done = True
                add("untrained student", scored("untrained student", training.load_student("initial"), seed))
            training.warm_start()
            for epoch in range(training.epochs_done() + 1, cfg.epochs + 1):
                try:
                    training.run_epoch(epoch)
                except LineageError as exc:  # a gated run froze after repeated rollbacks: its epochs end here
                    print(f"seed {seed} {name}: stopped before epoch {epoch}: {exc}", flush=True)
                    break
            if redistill and not training.redistilled():
                training.redistill(redistill)
            trained = training_minutes(run, warm_run if cfg.init_from else None)
            if trained is not None:
                minutes.setdefault(name, []).append(trained)
            else:  # its "train min" then averages fewer seeds than its holdout columns
                print(f"seed {seed} {name}: training minutes unknown (a run stored before phase times)", flush=True)
            policy, lineage = training.policy, training.plane.state.lineage
            training.close()
            add_trained(name, policy, seed)
            gate = ""
            if gated:
                add(name, {"rollbacks": lineage.rollbacks, "promotions": lineage.promotions})
                gate = f" (gate: {lineage.rollbacks} rollbacks, {lineage.promotions} promotions, active {lineage.active})"
            print(f"seed {seed} {name}: {rows[name]['holdout'][-1]:.3f}{gate}", flush=True)

    print(f"\nshell learning benchmark: {args.seeds} seed(s), {args.epochs} epochs x {args.tasks_per_epoch} tasks "
          f"x group {args.group_size}, {used}")
    print_table(rows, minutes)
    groups = holdout_groups(tasks_dir)
    for line in paired_lines(by_task, groups):
        print(line)
    suffix = args.configs.replace(",", "_").replace("+", "-")
    seeds = f"s{args.first_seed}-{args.first_seed + args.seeds - 1}"
    results = {"rows": rows, "train_minutes": minutes, "by_task": by_task, "holdout_groups": groups,
               "args": vars(args)}
    # whole or not at all: a run into the same --out killed while writing keeps the earlier results
    write_text_atomic(args.out / f"results-{suffix}-{seeds}.json", json.dumps(results, indent=2, default=str))


def print_table(rows: dict[str, dict[str, list[float]]], minutes: dict[str, list[float]]) -> None:
    val = any("val" in scores for scores in rows.values())
    width = max([28, *(len(name) + 1 for name in rows)])
    print(f"{'policy':<{width}}{'holdout %':>16}{'unseen mutants %':>20}{'unseen repos %':>18}{'train min':>11}"
          + (f"{'val % (sampled)':>18}" if val else ""))
    for name, scores in rows.items():
        mins = f"{statistics.mean(minutes[name]):.1f}" if minutes.get(name) else "-"  # none kept: unknown
        extra = f"{fmt(scores.get('val', [])):>18}" if val else ""
        print(f"{name:<{width}}{fmt(scores['holdout']):>16}{fmt(scores.get('unseen_mutants', [])):>20}"
              f"{fmt(scores.get('unseen_repos', [])):>18}{mins:>11}{extra}")


def merge(files: list[Path]) -> None:
    """One table over the results files of runs split by seed (``--first-seed``), run in parallel, and the
    paired comparisons over the per-task outcomes they (or ``--rescore`` files) hold."""
    rows: dict[str, dict[str, list[float]]] = {}
    minutes: dict[str, list[float]] = {}
    by_task: dict[str, dict[str, dict[str, int]]] = {}
    groups: dict[str, str] = {}
    seeds: set[int] = set()
    merged: set[tuple[str, int]] = set()  # (configuration, seed) whose values are in the table
    for file in files:
        data = json.loads(file.read_text())
        found = data.get("holdout_groups") or _stored_groups(data["args"])
        if not found:
            print(f"{file}: its holdout groups are unknown (no holdout_groups, and the task set it names is "
                  "gone): its pairs count only in the lines over all tasks", file=sys.stderr)
        groups.update(found)
        first = int(data["args"]["first_seed"])
        numbers = range(first, first + int(data["args"]["seeds"]))
        seeds.update(numbers)
        # A row (one value per seed) shared by files over the same seeds, e.g. the warm start or the
        # baselines of runs split by configuration, counts each seed once: the first file's value.
        fresh = {name: [i for i, seed in enumerate(numbers) if (name, seed) not in merged]
                 for name in {*data.get("rows", {}), *data.get("train_minutes", {})}}
        for name, keep in fresh.items():
            if len(keep) < len(numbers):
                print(f"{file}: {name}: seeds already merged from an earlier file count once "
                      f"(its values for them are left out)", file=sys.stderr)
            merged.update((name, numbers[i]) for i in keep)
        for name, scores in data.get("rows", {}).items():
            for key, values in scores.items():
                kept = _per_seed(values, fresh[name], len(numbers))
                rows.setdefault(name, {}).setdefault(key, []).extend(kept)
        for name, values in data.get("train_minutes", {}).items():
            minutes.setdefault(name, []).extend(_per_seed(values, fresh[name], len(numbers)))
        for name, per_seed in data.get("by_task", {}).items():
            for seed, solved in per_seed.items():  # as the rows: the first file's outcomes of a seed
                by_task.setdefault(name, {}).setdefault(seed, solved)
    print(f"shell learning benchmark, merged: seeds {sorted(seeds)} from {len(files)} file(s)")
    if rows:
        print_table(rows, minutes)
    for line in paired_lines(by_task, groups):
        print(line)


def _not_results(file: Path) -> str | None:
    """Why ``file`` is not a results (or by-task) file that :func:`merge` reads; None when it is one."""
    try:
        data = json.loads(file.read_text())
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    except ValueError:  # not JSON, e.g. cut short by a killed write
        return "not complete JSON"
    run_args = data.get("args") if isinstance(data, dict) else None
    if not isinstance(run_args, dict) or not {"first_seed", "seeds"} <= run_args.keys():
        return "no args with first_seed and seeds"
    return None


def _per_seed(values: list[float], keep: list[int], seeds: int) -> list[float]:
    """The values of the seeds at positions ``keep``; a list that is not one value per seed (minutes of
    runs stored before phase times) is kept whole unless some of its seeds were merged already."""
    if len(values) == seeds:
        return [values[i] for i in keep]
    return list(values) if len(keep) == seeds else []


def _stored_groups(args: dict) -> dict[str, str]:
    """The holdout groups of a results file written before it recorded them: from the task set its run
    named (--tasks, or OUT/tasks), when that directory is still there."""
    tasks_dir = Path(args["tasks"]) if args.get("tasks") else Path(args["out"]) / "tasks"
    return holdout_groups(tasks_dir) if tasks_dir.is_dir() else {}


def rescore(args: argparse.Namespace, tasks_dir: Path, names: list[str]) -> None:
    """Per-task holdout outcomes of the runs an earlier invocation left in ``--out`` (results files from
    before per-task recording lack them): each run's active checkpoint is evaluated again, greedily with the
    seed the benchmark used, and the rates are printed so they can be checked against the stored ones.
    ``names``: the configurations to evaluate (with a pure RL one, the untrained student too)."""
    sandbox = Sandbox()
    by_task: dict[str, dict[str, dict[str, int]]] = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        checkpoints = [(name, args.out / run_name(seed, name, CONFIGS[name]), "active") for name in names]
        pure = [run for name, run, _ in checkpoints if name.startswith("pure RL") and (run / "control.db").is_file()]
        checkpoints += [("untrained student", run, "initial") for run in pure[:1]]
        for name, run, checkpoint in checkpoints:
            if not (run / "control.db").is_file():
                continue
            policy, _ = load_student_from(f"{run}:{checkpoint}", "compact")
            solved = by_task.setdefault(name, {}).setdefault(str(seed), {})
            rate = holdout_eval(policy, tasks_dir, sandbox, seed, solved)["holdout"]
            print(f"seed {seed} {name}: {rate:.3f}", flush=True)
    suffix = args.configs.replace(",", "_").replace("+", "-")
    seeds = f"s{args.first_seed}-{args.first_seed + args.seeds - 1}"
    rescored = {"by_task": by_task, "holdout_groups": holdout_groups(tasks_dir), "args": vars(args)}
    write_text_atomic(args.out / f"by-task-{suffix}-{seeds}.json", json.dumps(rescored, indent=2, default=str))


def run_name(seed: int, name: str, config: dict) -> str:
    """The run directory of configuration ``name`` for ``seed`` under ``--out``."""
    return (f"seed{seed}-{name.split()[0]}-{config['teacher']}-{int(config['rl'])}"
            + ("-gate" if config.get("gate") else "")
            + ("-distinct" if config.get("distinct_first") else "")
            + ("-states" if config.get("distinct_states") else "")
            + ("-redistill" if config.get("redistill") else ""))

if __name__ == "__main__":
    main()

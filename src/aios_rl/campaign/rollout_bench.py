"""`aios-rl bench rollouts`: the same student trained under several rollout allocators at equal budgets.

For each seed, every method starts from the same initial checkpoint: ``make_student(seed)`` plus the
distillation warm start, trained once in ``out/seed-S/initial`` and loaded by each method with
``init_from`` (weights only; every method gets a fresh optimizer). Each method trains with `shell
train`'s loop (:class:`ShellTraining`, with ``allocator`` set to the method) until it has spent
``budget`` rollouts, branches and resamples included.
Each round samples ``tasks_per_round`` training tasks and gives the allocator a batch budget of their caps
(never more than the budget left). Holdout success is evaluated at ``eval_points`` equally spaced
cumulative-rollout milestones (right after the round that crosses each one; a round that crosses two
milestones gives both the same value), plus at 0 rollouts, so methods are compared at equal cost.

Summaries per method (means over seeds): final holdout success (mean ± std), rollouts and environment
steps spent, rollouts needed to reach uniform-16's final mean success (the first milestone whose mean
success reaches it; 0 when the start already does), the share of groups whose final rewards had zero
variance (one share per seed, averaged over the seeds that formed groups), training wall time (evaluation
excluded), and for RAIL the controller diagnostics: promotion, MAE and sign agreement of the online
controller against the copy frozen at promotion (on the same live traces), and the share of live decisions
per arm.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from aios_rl.campaign.evaluate import GREEDY, evaluate
from aios_rl.campaign.metrics import read_metrics
from aios_rl.campaign.train import ShellTrainConfig, ShellTraining
from aios_rl.contracts.config import MAX_GROUP_SIZE, MAX_ROLLOUTS, MAX_SEED, ConfigModel
from aios_rl.contracts.episode import DecodingRegime, Task
from aios_rl.contracts.errors import ConfigError
from aios_rl.envs.shell.task import load_tasks
from aios_rl.rollout.allocators import check_rail_cap, parse_allocator_name
from aios_rl.storage.files import write_text_atomic

REFERENCE = "uniform-16"  # the method others must match; found under any of its names (UNIFORM-16, grpo-16)
RESULTS_FILE = "results.json"
CONFIG_FILE = "bench_config.json"
DEFAULT_METHODS = ("uniform-8", "uniform-16", "dapo-16", "arpo-16", "vip-16", "rail")
MAX_BENCH_REPEATS = 1000  # seeds (a training per method each) and holdout evaluations: beyond it, a typo
RAIL_KEYS = (
    "rail/traces",
    "rail/live",
    "rail/promoted_at",
    "rail/mae_online_paired",
    "rail/mae_frozen",
    "rail/sign_agreement",
    "rail/sign_agreement_frozen",
    "rail/sign_agreement_online_paired",
    "rail/sign_base_rate",
    "rail/live_decisions",
)

Log = Callable[[str], None]

# `train:` settings every method's run sets itself (``_train_config``, the rounds loop), with what to give
# instead: a value given there would be overwritten without a word. A stored config (``STORED``) keeps
# them: a bench before this check stored what it was given, and its finished runs still merge.
STORED = {"stored": True}
BENCH_SETS = {
    "seed": "seeds, first_seed or seed_list",
    "allocator": "methods",
    "group_size": "methods (the allocator's name sets it)",
    "tasks_per_epoch": "tasks_per_round",
    "rollout_budget": "budget",
    "epochs": "budget (each method runs rounds until it is spent)",
}


class BenchConfig(ConfigModel):
    """What `aios-rl bench rollouts` runs; ``train`` holds every other `shell train` setting."""

    methods: tuple[str, ...] = Field(default=DEFAULT_METHODS, description="Allocator names, side by side.")
    budget: int = Field(
        default=512, ge=1, le=MAX_ROLLOUTS,
        description="Rollouts each method may spend per seed (all kinds; at most 100000000).",
    )
    seeds: int = Field(
        default=3, ge=1, le=MAX_BENCH_REPEATS,
        description="Seeds run, each a fresh student for every method (at most 1000).",
    )
    first_seed: int = Field(
        default=0, ge=0, description="Seeds run: first_seed..first_seed+seeds-1 (split seeds over processes)."
    )
    seed_list: tuple[int, ...] = Field(
        default=(),
        description="Exact seeds run, in place of seeds and first_seed (merge-rollouts records the seeds "
        "it combined here, contiguous or not).",
    )
    tasks_per_round: int = Field(default=8, ge=1, description="Training tasks per round (one update each).")
    eval_points: int = Field(
        default=4, ge=1, le=MAX_BENCH_REPEATS,
        description="Holdout evaluations at budget·i/P, i = 1..P (at most 1000).",
    )
    eval_tasks: int = Field(default=0, ge=0, description="Holdout tasks evaluated (0: all).")
    eval_samples: int = Field(
        default=1, ge=1, le=MAX_GROUP_SIZE,
        description="Episodes per holdout task (1: greedy; >1: sampled; at most 1024).",
    )
    train: ShellTrainConfig = Field(default_factory=ShellTrainConfig, description="Base training settings.")

    @field_validator("methods")
    @classmethod
    def _known(cls, methods: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if not methods:
            raise ConfigError(f"--methods needs distinct allocator names, got {list(methods)}")
        allocators = [parse_allocator_name(name) for name in methods]  # case-blind; GRPO-N is uniform-N
        if info.context == STORED:  # a bench stored before it refused two names of one allocator still merges
            return methods
        for i, allocator in enumerate(allocators):
            first = allocators.index(allocator)
            if first != i:
                raise ConfigError(f"--methods needs distinct allocator names, got {list(methods)}: "
                                  f"{methods[first]!r} and {methods[i]!r} name the same allocator")
        return methods

    @model_validator(mode="after")
    def _seed_list(self) -> BenchConfig:
        """A seed list sets ``seeds`` and ``first_seed`` to its count and smallest seed, so the stored
        config says what ran; values given beside it must agree."""
        listed = self.seed_list
        if not listed:
            return self
        if len(set(listed)) != len(listed) or min(listed) < 0:
            raise ConfigError(f"seed_list needs distinct seeds >= 0, got {list(listed)}")
        implied = {"seeds": len(listed), "first_seed": min(listed)}
        clash = [f"{k}={getattr(self, k)}" for k, v in implied.items()
                 if k in self.model_fields_set and getattr(self, k) != v]
        if clash:
            raise ConfigError(
                f"seed_list {list(listed)} disagrees with {', '.join(clash)}; give one or the other"
            )
        for name, value in implied.items():
            object.__setattr__(self, name, value)  # frozen model: set once, while validating
        return self

    @field_validator("train")
    @classmethod
    def _no_settings_the_bench_sets(cls, train: ShellTrainConfig, info: ValidationInfo) -> ShellTrainConfig:
        if info.context == STORED:
            return train
        default = ShellTrainConfig()
        for key, instead in BENCH_SETS.items():
            value = getattr(train, key)
            if value != getattr(default, key):
                raise ConfigError(f"train.{key} is set by bench rollouts itself (got {value!r}); leave it "
                                  f"out of train: and give {instead}")
        return train

    @model_validator(mode="after")
    def _seeds_in_range(self) -> BenchConfig:
        """Each seed is shell train's seed: refused here, before --out holds a run, when beyond its bound."""
        largest = max(self.seed_list) if self.seed_list else self.first_seed + self.seeds - 1
        if largest > MAX_SEED:
            raise ConfigError(f"seeds must be between 0 and {MAX_SEED}, got {largest} (the largest of "
                              "seed_list, or first_seed + seeds - 1); choose smaller seeds")
        return self

    def seed_numbers(self) -> list[int]:
        """The seeds run: ``seed_list`` when given, else first_seed..first_seed+seeds-1."""
        return list(self.seed_list) or list(range(self.first_seed, self.first_seed + self.seeds))


@dataclass
class SeedRun:
    """One method trained under one seed: success at 0 rollouts and at each milestone."""

    method: str
    seed: int
    curve: list[tuple[int, float]]  # (rollouts spent when evaluated, holdout success); index 0 is the start
    rollouts: int
    env_steps: int
    groups: int
    zero_variance_groups: int
    wall_s: float
    diagnostics: dict[str, float] = field(default_factory=dict)


@dataclass
class MethodSummary:
    """Means over seeds for one method (the JSON the command prints, one object per method)."""

    method: str
    success_mean: float
    success_std: float
    rollouts: float
    env_steps: float
    rollouts_to_match_uniform16: float | None
    zero_variance_share: float
    wall_s: float
    curve: list[tuple[float, float, float]]  # (mean rollouts, mean success, std success) per milestone
    rail: dict[str, float]
    seeds: list[SeedRun]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def run_bench(
    tasks_dir: Path, out: Path, config: BenchConfig, log: Log = lambda _: None
) -> list[MethodSummary]:
    """Train every method under every seed in ``out/seed-S/METHOD`` and summarise; writes out/results.json."""
    for method in config.methods:  # before any run: a RAIL cap with no room to branch is uniform renamed
        check_rail_cap(method, config.train.allocation)
    holdout = load_tasks(tasks_dir, split="holdout")
    if not holdout:
        raise ConfigError(f"{tasks_dir} has no holdout tasks to evaluate on")
    holdout = holdout[: config.eval_tasks or None]
    runs: dict[str, list[SeedRun]] = {m: [] for m in config.methods}
    write_text_atomic(out / CONFIG_FILE, config.model_dump_json(indent=2))
    for seed in config.seed_numbers():
        start, success = _initial(tasks_dir, out / f"seed-{seed}" / "initial", seed, config, holdout)
        log(f"seed {seed}: initial checkpoint {start}, holdout success {success:.3f}")
        for method in config.methods:
            run = _train_one(
                tasks_dir, out / f"seed-{seed}" / method, method, seed, config, holdout, start, success, log
            )
            runs[method].append(run)
    summaries = summarize(runs)
    _write_results(out, summaries)
    return summaries


def _task_set(out: Path) -> str | None:
    """The task directory a `bench rollouts` output was run on, as its first warm-start run stored it (None
    when it has none to read). Read only: a merge writes nothing into its inputs."""
    for db in sorted(out.glob("seed-*/initial/control.db")):
        try:
            with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
                row = conn.execute("SELECT value FROM meta WHERE key = 'tasks_dir'").fetchone()
        except sqlite3.DatabaseError:
            continue  # not a readable run store: nothing to compare
        if row is not None:
            return str(json.loads(row[0]))
    return None


def merge_results(dirs: Sequence[Path], out: Path) -> tuple[list[MethodSummary], BenchConfig]:
    """Summaries over several `bench rollouts` output directories (e.g. one per process: other seeds with
    ``--first-seed``, or other methods on the same seeds); writes ``out/results.json`` and
    ``out/bench_config.json``. Each directory trained its own warm start for a seed; under the same
    settings and seed that is the same checkpoint, so methods from different directories still start alike.

    Raises:
        ConfigError: a directory without results, settings or task sets that differ (other than the seeds
            and the methods), a (method, seed) present twice, methods that cover different seeds, or an
            ``out`` that is a file or a `bench rollouts` output itself (its results would be overwritten).
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; choose a new directory")
    inputs = {d.resolve() for d in dirs}
    if out.resolve() in inputs or any(out.glob("seed-*")):
        raise ConfigError(f"--out {out} is a `bench rollouts` output; the merge would overwrite its "
                          f"{RESULTS_FILE}: give the merge a directory of its own")
    configs, runs = [], {}
    for d in dirs:
        if not (d / RESULTS_FILE).is_file() or not (d / CONFIG_FILE).is_file():
            raise ConfigError(f"{d} holds no finished `bench rollouts` run ({RESULTS_FILE}, {CONFIG_FILE})")
        configs.append(BenchConfig.model_validate_json((d / CONFIG_FILE).read_text(), context=STORED))
        for row in json.loads((d / RESULTS_FILE).read_text()):
            runs.setdefault(row["method"], []).extend(_seed_run(s) for s in row["seeds"])
    same = {"seeds", "first_seed", "seed_list", "methods"}
    for d, c in zip(dirs[1:], configs[1:], strict=True):
        if c.model_dump(exclude=same) != configs[0].model_dump(exclude=same):
            raise ConfigError(
                f"{d} was run with other settings than {dirs[0]}; only the seeds and the methods may differ"
            )
    task_sets = {d: _task_set(d) for d in dirs}
    known = {d: t for d, t in task_sets.items() if t is not None}
    if len(set(known.values())) > 1:
        listed = ", ".join(f"{d}: {t}" for d, t in known.items())
        raise ConfigError(f"the runs used different task directories ({listed}); a table compares runs on "
                          "one")
    for method, seeds in runs.items():
        numbers = [r.seed for r in seeds]
        if len(set(numbers)) != len(numbers):
            raise ConfigError(f"method {method}: seeds {sorted(numbers)} repeat across the directories")
        seeds.sort(key=lambda r: r.seed)
    covered = {method: [r.seed for r in seeds] for method, seeds in runs.items()}
    if len({tuple(v) for v in covered.values()}) > 1:
        raise ConfigError(
            f"the methods cover different seeds ({covered}); a table needs the same seeds for all of them"
        )
    numbers = next(iter(covered.values()))
    # validated afresh: the seed list sets seeds and first_seed
    settings = configs[0].model_dump(exclude={"seeds", "first_seed"})
    merged = BenchConfig.model_validate(settings | {"seed_list": numbers, "methods": tuple(runs)},
                                        context=STORED)
    summaries = summarize(runs)
    out.mkdir(parents=True, exist_ok=True)
    _write_results(out, summaries)
    write_text_atomic(out / CONFIG_FILE, merged.model_dump_json(indent=2))
    return summaries, merged


def _write_results(out: Path, summaries: list[MethodSummary]) -> None:
    write_text_atomic(out / RESULTS_FILE, json.dumps([s.as_json() for s in summaries], indent=2))


def _seed_run(data: dict[str, Any]) -> SeedRun:
    return SeedRun(**{**data, "curve": [tuple(p) for p in data["curve"]]})


def _initial(
    tasks_dir: Path, run_dir: Path, seed: int, config: BenchConfig, holdout: list[Task]
) -> tuple[str, float]:
    """The seed's initial checkpoint every method starts from (a fresh student plus the warm start, when
    the teacher gives one), as an ``init_from`` spec, and its holdout success."""
    if run_dir.exists():
        raise ConfigError(f"{run_dir} exists; give `bench rollouts` a new --out")
    training = ShellTraining(run_dir, tasks_dir, _train_config(config, config.methods[0], seed))
    try:
        training.warm_start()
        active = training.plane.state.lineage.active
        return f"{run_dir}:{active}", _holdout(training, holdout, config, seed)
    finally:
        training.close()


def _train_config(config: BenchConfig, method: str, seed: int, **update: Any) -> ShellTrainConfig:
    train = config.train.model_copy(
        update={
            "allocator": method,
            "seed": seed,
            "tasks_per_epoch": config.tasks_per_round,
            "rollout_budget": config.budget,
            **update,
        }
    )
    return ShellTrainConfig.model_validate(train.model_dump())


def _train_one(
    tasks_dir: Path,
    run_dir: Path,
    method: str,
    seed: int,
    config: BenchConfig,
    holdout: list[Task],
    start: str,
    success: float,
    log: Log,
) -> SeedRun:
    if run_dir.exists():
        raise ConfigError(f"{run_dir} exists; give `bench rollouts` a new --out")
    training = ShellTraining(run_dir, tasks_dir, _train_config(config, method, seed, init_from=start))
    try:
        curve = [(0, success)]
        milestones = [
            math.ceil(config.budget * i / config.eval_points) for i in range(1, config.eval_points + 1)
        ]
        wall, epoch = 0.0, 0
        while len(curve) <= len(milestones):
            before = _spent(training)
            t0 = time.perf_counter()
            epoch += 1
            training.run_epoch(epoch)
            wall += time.perf_counter() - t0
            spent = _spent(training)
            stuck = spent == before or spent >= config.budget  # nothing more can be spent
            crossed = sum(spent >= m for m in milestones) - (len(curve) - 1)
            if crossed > 0 or stuck:
                success = _holdout(training, holdout, config, seed)
                curve += [(spent, success)] * max(crossed, len(milestones) + 1 - len(curve) if stuck else 0)
                log(f"seed {seed} {method}: {spent} rollouts, holdout success {success:.3f}")
        records = [r for r in read_metrics(training.metrics_path) if r.get("phase") in ("rl", "distill")]
        return SeedRun(
            method,
            seed,
            curve,
            spent,
            training.collector.ledger.env_steps,
            sum(int(r.get("rollout/groups", 0)) for r in records),
            sum(int(r.get("rollout/zero_variance_groups", 0)) for r in records),
            wall,
            training.collector.allocator.metrics(),
        )
    finally:
        training.close()


def _spent(training: ShellTraining) -> int:
    collector = getattr(training, "collector", None)
    return 0 if collector is None else collector.ledger.rollouts


def _holdout(training: ShellTraining, holdout: list[Task], config: BenchConfig, seed: int) -> float:
    regime = GREEDY if config.eval_samples == 1 else DecodingRegime(name="sample")
    result = evaluate(
        training.policy,
        holdout,
        training.make_env,
        samples=config.eval_samples,
        seed=10_000 + seed,
        regime=regime,
        workers=training.config.workers,
    )
    return result.success_rate


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _reference(methods: Iterable[str]) -> str | None:
    """The method among ``methods`` that names the same allocator as REFERENCE, however spelt, or None."""
    reference = parse_allocator_name(REFERENCE)
    return next((m for m in methods if parse_allocator_name(m) == reference), None)


def summarize(runs: dict[str, list[SeedRun]]) -> list[MethodSummary]:
    """Per-method means over seeds, milestone by milestone, and rollouts to reach uniform-16's final mean."""
    curves: dict[str, list[tuple[float, float, float]]] = {}
    for method, seeds in runs.items():
        points = zip(*(r.curve for r in seeds))  # the same milestone across seeds
        curves[method] = [(statistics.fmean(x for x, _ in p), *_mean_std([s for _, s in p])) for p in points]
    reference = _reference(curves)
    target = curves[reference][-1][1] if reference is not None else None
    out = []
    for method, seeds in runs.items():
        final, std = _mean_std([r.curve[-1][1] for r in seeds])
        match = None
        if target is not None:
            match = next((x for x, s, _ in curves[method] if s >= target - 1e-12), None)
        # one share per seed, as every column is a mean over seeds; a seed that formed no groups has none
        shares = [r.zero_variance_groups / r.groups for r in seeds if r.groups]
        rail = {
            k: statistics.fmean(r.diagnostics[k] for r in seeds if k in r.diagnostics)
            for k in sorted({k for r in seeds for k in r.diagnostics})
            if k in RAIL_KEYS or k.startswith("rail/live_arm_share/")
        }
        out.append(
            MethodSummary(
                method,
                final,
                std,
                statistics.fmean(r.rollouts for r in seeds),
                statistics.fmean(r.env_steps for r in seeds),
                match,
                statistics.fmean(shares) if shares else 0.0,
                statistics.fmean(r.wall_s for r in seeds),
                curves[method],
                rail,
                seeds,
            )
        )
    return out


def format_table(summaries: list[MethodSummary], config: BenchConfig) -> list[str]:
    """The side-by-side table (and RAIL's diagnostics) as lines of text."""
    seeds = ", ".join(map(str, config.seed_numbers()))
    lines = [
        f"rollout allocation benchmark: budget {config.budget} rollouts per seed, seeds {seeds}, "
        f"{config.tasks_per_round} tasks per round, holdout success at {config.eval_points} milestones",
        f"{'method':<12} {'holdout success':>17} {'rollouts':>9} {'env steps':>10} "
        f"{'to match ' + REFERENCE:>20} {'zero-var groups':>16} {'wall s':>8}",
    ]
    for s in summaries:
        match = (
            "-"
            if s.rollouts_to_match_uniform16 is None and _reference(config.methods) is None
            else (
                "not reached"
                if s.rollouts_to_match_uniform16 is None
                else f"{s.rollouts_to_match_uniform16:.0f}"
            )
        )
        lines.append(
            f"{s.method:<12} {100 * s.success_mean:8.1f} ± {100 * s.success_std:5.1f} % {s.rollouts:9.0f} "
            f"{s.env_steps:10.0f} {match:>20} {100 * s.zero_variance_share:15.1f}% {s.wall_s:8.0f}"
        )
    for s in summaries:
        if not s.rail:
            continue
        r = s.rail
        lines.append(f"RAIL diagnostics ({s.method}, mean over seeds):")
        lines.append(
            f"  traces {r.get('rail/traces', 0):.0f}; live in {r.get('rail/live', 0):.0%} of seeds"
            + (f", promoted after {r['rail/promoted_at']:.0f} traces" if "rail/promoted_at" in r else "")
        )
        if "rail/mae_frozen" in r:
            online, frozen = r["rail/mae_online_paired"], r["rail/mae_frozen"]
            gain = ""
            if frozen > 0:  # an online MAE above the frozen copy's reads "higher", not "-22 % lower"
                change = 1 - online / frozen
                gain = f" ({100 * abs(change):.0f} % {'lower' if change >= 0 else 'higher'})"
            lines.append(f"  MAE online {online:.4f} vs frozen-at-promotion {frozen:.4f}{gain}")
            frozen_sign = r.get("rail/sign_agreement_frozen", float("nan"))
            last = r.get("rail/sign_agreement")
            if "rail/sign_agreement_online_paired" in r:  # both models on the same traces since promotion
                lines.append(
                    f"  sign agreement online {r['rail/sign_agreement_online_paired']:.3f} vs frozen "
                    f"{frozen_sign:.3f} on the same traces"
                    + ("" if last is None else f"; online over its last window {last:.3f}" + _base_rate(r))
                )
            else:  # results stored before the pair was kept: online's window includes traces before promotion
                lines.append(
                    f"  sign agreement online {float('nan') if last is None else last:.3f} vs frozen "
                    f"{frozen_sign:.3f} (not on the same traces)" + _base_rate(r)
                )
        else:
            lines.append(
                "  never promoted to live: no frozen copy to compare against"
                + (
                    f"; shadow sign agreement {r['rail/sign_agreement']:.3f}" + _base_rate(r)
                    if "rail/sign_agreement" in r
                    else ""
                )
            )
        shares = {
            k.rsplit("/", 1)[1]: v for k, v in r.items() if k.startswith("rail/live_arm_share/") and v > 0
        }
        if shares:
            lines.append("  live decisions per arm: " + ", ".join(f"{a} {v:.0%}" for a, v in shares.items()))
    return lines


def _base_rate(diagnostics: dict[str, float]) -> str:
    rate = diagnostics.get("rail/sign_base_rate")
    return "" if rate is None else f" (always the majority sign: {rate:.3f})"

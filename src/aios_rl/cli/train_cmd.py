"""`aios-rl shell train` and `aios-rl shell eval`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from tqdm import tqdm

RunOption = typer.Option(..., "--run", help="Run directory (created on first use; a killed run resumes).")


def train(
    ctx: typer.Context,
    tasks: Path | None = typer.Option(
        None, "--tasks", help="Task directory (from benchmark-generate or import-tasks). Leave it out to "
        "continue an existing run with the settings it stored (then only --epochs and --json may be given)."
    ),
    run: Path = RunOption,
    epochs: int = typer.Option(
        5, "--epochs", help="Update epochs in all, at most 100000 (a run continued without --tasks or "
        "--epochs: the count its last command asked for)."
    ),
    student: str = typer.Option("compact", "--student", help="compact | causal-lm"),
    model: str | None = typer.Option(None, "--model", help="causal-lm: local model directory (never downloaded)."),
    algo: str = typer.Option("grpo", "--algo", help="grpo | ppo"),
    teacher: str = typer.Option(
        "oracle", "--teacher", help="none, or backends in fallback order: oracle, claude, codex, gemini, opencode, openai."
    ),
    no_rl: bool = typer.Option(False, "--no-rl", help="Distillation only: no RL updates (ablation)."),
    tasks_per_epoch: int | None = typer.Option(None, "--tasks-per-epoch", help="Training tasks per epoch."),
    group_size: int | None = typer.Option(
        None, "--group-size", help="Episodes per task per epoch (uniform-N; at most 1024); an --allocator of "
        "another size is refused (its name sets the size)."
    ),
    allocator: str | None = typer.Option(
        None, "--allocator", help="Rollout allocator: uniform-N, dapo-N, arpo-N, tree-N, vip-N, rail or rail-N "
        "(default: uniform-<group size>)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for tasks, rollouts and initialisation."),
    init_from: str | None = typer.Option(
        None, "--init-from", help="Start from another run's checkpoint: RUN_DIR (its active one) or "
        "RUN_DIR:CHECKPOINT (active, last_stable, initial or an id); no warm start then. The student keeps "
        "that checkpoint's settings (a different --model, mode or LoRA setting is refused)."
    ),
    val_fraction: float | None = typer.Option(
        None, "--val-fraction", help="Hold this share of the training tasks out for validation: every update is "
        "scored on them against its parent, rolled back when worse, promoted to last_stable when better."
    ),
    val_tasks: Path | None = typer.Option(
        None, "--val-tasks", help="A task directory to validate on instead (same gate; no overlap with training)."
    ),
    redistill_passes: int | None = typer.Option(
        None, "--redistill-passes", help="RL runs: after the last epoch, distil a fresh student for this "
        "many passes on the teacher's demonstrations and the verified fixes RL found (as `shell redistill`)."
    ),
    config: Path | None = typer.Option(None, "--config", help="YAML file with any ShellTrainConfig fields."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary at the end."),
) -> None:
    """Train the student on the train split: rollouts, teacher shaping, an update and a checkpoint per epoch.

    Metrics go to RUN/metrics.jsonl; checkpoints to RUN/checkpoints; the lineage to RUN/control.db. With
    --val-fraction or --val-tasks, an update that scores worse on validation than its parent is rolled back
    (RUN/rollbacks/epoch-N.json says which tasks changed) and the next epoch trains from the parent again.
    """
    from aios_rl.campaign.metrics import json_values
    from aios_rl.campaign.train import ShellTrainConfig, ShellTraining, open_training
    from aios_rl.campaign.train_config import check_group_size
    from aios_rl.contracts.config import load_config

    if tasks is None:
        if not (run / "control.db").is_file():
            raise typer.BadParameter(f"a new run needs a task directory ({run} is no run yet)",
                                     param_hint="--tasks")
        ignored = [f"--{name.replace('_', '-')}" for name in ctx.params
                   if name not in ("tasks", "run", "epochs", "as_json") and _given(ctx, name)]
        if ignored:
            raise typer.BadParameter(f"{', '.join(ignored)}: a run continued without --tasks keeps the "
                                     "settings it stored; give only --epochs (and --json)",
                                     param_hint="--tasks")
        training = open_training(run, epochs=epochs if _given(ctx, "epochs") else None)
    else:
        def given(name: str, value: Any) -> Any:  # a flag left at its default must not override --config
            return value if _given(ctx, name) else None

        overrides = {
            "epochs": given("epochs", epochs), "student.kind": given("student", student),
            "student.model_path": model, "trainer.algo": given("algo", algo),
            "teacher": given("teacher", teacher),
            "rl": False if no_rl else None, "tasks_per_epoch": tasks_per_epoch,
            "group_size": group_size, "seed": given("seed", seed), "allocator": allocator,
            "init_from": init_from,
            "validation.fraction": val_fraction,
            "validation.tasks_dir": str(val_tasks) if val_tasks else None,
            "redistill_passes": redistill_passes,
        }
        settings = load_config(ShellTrainConfig, config, overrides)
        if not (run / "control.db").exists():  # a stored run resumes with what it stored (and was taken)
            check_group_size(settings)
        if model is not None and settings.student.kind != "causal-lm":
            raise typer.BadParameter(f"a model is for the causal-lm student, but this run trains a "
                                     f"{settings.student.kind} one; add --student causal-lm",
                                     param_hint="--model")
        training = ShellTraining(run, tasks, settings)
    quiet = as_json or not sys.stderr.isatty()
    reports = []
    try:
        bar = tqdm(total=training.config.epochs, desc="train", unit="epoch", disable=quiet, file=sys.stderr)
        warm = training.warm_start(lambda *_: None)
        if warm is not None and not quiet:
            tqdm.write(f"warm start: distilled {warm.metrics['demonstrations']} demonstrations -> {warm.checkpoint}", file=sys.stderr)
        done = training.epochs_done()
        bar.update(done)
        for epoch in range(done + 1, training.config.epochs + 1):
            def progress(_: str, values: dict[str, float]) -> None:
                bar.set_postfix({k: f"{v:.2f}" for k, v in values.items()}, refresh=True)

            report = training.run_epoch(epoch, progress)
            reports.append(report)
            m = report.metrics
            bar.set_postfix(
                success=f"{m['rollout/success_rate']:.2f}", reward=f"{m['rollout/reward_mean']:.2f}",
                loss=f"{m['train/loss']:.3f}", kl=f"{m['train/approx_kl']:.4f}",
            )
            bar.update(1)
            if not quiet:
                gate = ""
                if "val/decision" in m:
                    gate = (f" | validation {m['val/success']:.2f} vs {m['val/reference_success']:.2f}: "
                            f"{m['val/decision']}, active {m['val/active']}")
                tqdm.write(
                    f"epoch {epoch}: success {m['rollout/success_rate']:.2f} reward {m['rollout/reward_mean']:.2f} "
                    f"loss {m['train/loss']:.3f} kl {m['train/approx_kl']:.4f} -> {report.checkpoint}{gate}",
                    file=sys.stderr,
                )
        bar.close()
        redistilled = None
        if training.config.redistill_passes and not training.redistilled():
            redistilled = training.redistill()
            if not quiet:
                line = _redistilled_line(redistilled.metrics) if redistilled else "redistill: no verified fix"
                tqdm.write(line, file=sys.stderr)
        summary = {
            "run": str(run),
            "epochs": training.config.epochs,
            "active": training.plane.state.lineage.active,
            "epochs_run": [json_values(r.metrics) for r in reports],  # as metrics.jsonl holds them
            "redistill": json_values(redistilled.metrics) if redistilled else None,
        }
    finally:
        training.close()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(f"trained: active checkpoint {summary['active']}  (aios-rl shell eval --run {run})")


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the command line set ``name`` (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _redistilled_line(m: dict) -> str:
    gate = f" | validation: {m['val/decision']}, active {m['val/active']}" if "val/decision" in m else ""
    return (f"redistilled: {m['passes']} passes over {m['demonstrations']} demonstrations "
            f"({m['discovered_demonstrations']} from verified fixes of {m['discovered_tasks']} unlabelled "
            f"tasks) -> {m['checkpoint']}{gate}")


def redistill(
    run: Path = typer.Option(..., "--run", help="A `shell train` run directory whose epochs are done."),
    passes: int | None = typer.Option(
        None, "--passes",
        help="Distillation passes (default: the run's redistill_passes, or else its warm start's).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the phase's metrics as JSON."),
) -> None:
    """Distil a fresh student on the teacher's demonstrations plus the verified fixes RL found.

    Expert iteration after RL: each task of the run's self-imitation archive that the oracle cannot label
    gets demonstrations built from its verified fix (the fix at the opening state, revert after a wrong
    patch, the fix again), joined to the oracle's. A fresh student of the same architecture is distilled on
    them and its checkpoint becomes active (through the run's validation gate, when it has one). Evaluate it
    with `aios-rl shell eval --run RUN`; `--checkpoint` names the one before.
    """
    from aios_rl.campaign.metrics import json_values
    from aios_rl.campaign.train import open_training
    from aios_rl.contracts.errors import ConfigError

    training = open_training(run)
    try:
        if training.redistilled():
            active = training.plane.state.lineage.active
            said = f"{run}: already redistilled after its last epoch; active checkpoint {active} unchanged"
            typer.echo(json.dumps({"already_redistilled": True, "active": active}) if as_json else said)
            return
        stored = training.config.redistill_passes or training.config.warm_start_epochs
        chosen = passes if passes is not None else stored
        report = training.redistill(chosen)
        if report is None:
            raise ConfigError(f"{run}: the self-imitation archive holds no verified fix of a task the oracle "
                              "cannot label that is a candidate action (RL epochs with self-imitation "
                              "archive the fixes they verify); nothing to redistil")
    finally:
        training.close()
    if as_json:
        typer.echo(json.dumps(json_values(report.metrics), indent=2))
    else:
        typer.echo(_redistilled_line(report.metrics) + f"  (aios-rl shell eval --run {run})")


def evaluate(
    run: Path = typer.Option(..., "--run", help="Run directory to evaluate."),
    checkpoint: str = typer.Option("active", "--checkpoint", help="active | last_stable | initial | a checkpoint id"),
    tasks: Path | None = typer.Option(None, "--tasks", help="Task directory (default: the one the run trained on)."),
    split: str = typer.Option("holdout", "--split", help="holdout | train"),
    samples: int = typer.Option(
        1, "--samples", help="Episodes per task, at most 1024 (use with --temperature > 0)."
    ),
    temperature: float = typer.Option(
        0.0, "--temperature", help="0: greedy decoding (the default); > 0: sample at this temperature."
    ),
    policy: str = typer.Option("checkpoint", "--policy", help="checkpoint | uniform (the random-candidate baseline)."),
    seed: int = typer.Option(0, "--seed", help="Evaluation seed."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Run every selected task with a checkpoint and report success per family.

    Decoding is greedy unless --temperature is positive; then --samples episodes per task estimate the
    success rate of the sampled policy.
    """
    from aios_rl.campaign.shell_eval import run_shell_eval

    result = run_shell_eval(run, checkpoint=checkpoint, tasks_dir=tasks, split=split, samples=samples,
                            policy_kind=policy, seed=seed, temperature=temperature,
                            show_progress=not as_json and sys.stderr.isatty())
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2))
        return
    typer.echo(f"checkpoint {result.checkpoint}: success {result.success_rate:.3f} over {result.episodes} episodes")
    for family, rate in result.by_family.items():
        typer.echo(f"  family {family}: {rate:.3f}")
    for group, rate in result.by_group.items():
        typer.echo(f"  {group}: {rate:.3f}")

"""`aios-rl shell campaign`: an online campaign with matched monitoring, promotion and automatic rollback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from tqdm import tqdm


def campaign(
    run: Path = typer.Option(..., "--run", help="Run directory (created on first use)."),
    tasks: Path | None = typer.Option(
        None, "--tasks", help="Task directory; its train split is the task stream."
    ),
    online_batch_size: int | None = typer.Option(
        None, "--online-batch-size", help="Admitted episodes per update (4)."
    ),
    rollback_threshold: int | None = typer.Option(
        None, "--rollback-threshold", help="Degradation streak that rolls back on its own (3)."
    ),
    max_tasks: int | None = typer.Option(
        None, "--max-tasks", help="Task slots to run (24; at most 1000000); a resume may raise it."
    ),
    teacher: str | None = typer.Option(
        None,
        "--teacher",
        help="none, or backends in fallback order: oracle, claude, codex, gemini, opencode, openai.",
    ),
    drill: str | None = typer.Option(
        None, "--drill", help="bad-update | crash-after-update (safety-net drills)."
    ),
    drill_at: int | None = typer.Option(
        None, "--drill-at", help="The update the drill acts on (1 = the first)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the task order, episodes and student (0)."),
    config: Path | None = typer.Option(None, "--config", help="YAML file with any CampaignConfig fields."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the campaign stored in --run after a kill."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON summary at the end."),
) -> None:
    """Online campaign: real tasks drive updates, matched comparison watches them, regressions roll back.

    Every 4 admitted episodes seal a micro-batch and trigger one update; the new checkpoint serves the next
    tasks at once while each of them also runs under the pre-update checkpoint (same seed, own sandbox).
    A streak of 3 worse or failed comparisons rolls back automatically (diagnosis in RUN/rollbacks/);
    a full window with a better, no worse and no failed comparison promotes. A killed campaign continues
    with --resume.
    """
    from aios_rl.campaign.online import OnlineCampaign
    from aios_rl.campaign.online_config import CampaignConfig, resume_config, stored_config
    from aios_rl.contracts.config import load_config

    overrides: dict[str, Any] = {
        "control.ledger.batch_size": online_batch_size,
        "control.ledger.rollback_threshold": rollback_threshold,
        "max_tasks": max_tasks,
        "teacher": teacher,
        "drill": drill,
        "drill_at": drill_at,
        "seed": seed,
    }
    stored = stored_config(run) if resume else None
    if stored is not None:
        given = load_config(CampaignConfig, config, overrides) if config is not None else None
        cfg = resume_config(stored, given, overrides)
    else:
        cfg = load_config(CampaignConfig, config, overrides)
    quiet = as_json or not sys.stderr.isatty()
    bar = tqdm(total=cfg.max_tasks, desc="campaign", unit="task", disable=quiet, file=sys.stderr)

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "task":
            bar.update(1)
            bar.set_postfix(
                task=info["task"][:18], outcome=info["outcome"], cmp=info["comparison"] or "-", refresh=False
            )
        elif kind == "update" and not quiet:
            said = f"failed: {info['failed']}" if "failed" in info else f"-> {info['checkpoint']}"
            tqdm.write(
                f"epoch {info['epoch']}: update {said}"
                + ("  [DRILL bad-update]" if info.get("drill") else ""),
                file=sys.stderr,
            )
        elif kind == "close" and not quiet:
            said = "closed" if info["closed"] else "monitoring window ended, next window"
            tqdm.write(
                f"epoch {info['epoch']}: {said} ({info['reason']}), active {info['active']}"
                + ("  FROZEN" if info["frozen"] else ""),
                file=sys.stderr,
            )

    runner = OnlineCampaign(run, tasks, cfg, resume=resume, on_event=on_event)
    try:
        bar.update(runner.cursor)
        summary = runner.run()
    finally:
        bar.close()
        runner.close()
    if as_json:
        typer.echo(json.dumps(summary.as_json(), indent=2))
        return
    c, p = summary.comparisons, summary.pointers
    typer.echo(
        f"campaign {summary.status}: {summary.tasks_run} tasks, {summary.updates} updates "
        f"({summary.failed_updates} failed), {summary.promotions} promotions, {summary.rollbacks} rollbacks"
        + (f"  (FROZEN: aios-rl lineage unfreeze --run {run}, then --resume)" if summary.frozen else "")
    )
    typer.echo(
        f"episodes: {summary.admitted} admitted, {summary.rejected} rejected; comparisons: "
        f"better {c['better']}, same {c['same']}, worse {c['worse']}, failed {c['failed']}"
    )
    typer.echo("lanes: " + ", ".join(f"{lane} {n}" for lane, n in summary.lanes.items()))
    typer.echo(
        f"pointers: active={p['active']} pre_update_ref={p['pre_update_ref']} last_stable={p['last_stable']}"
    )
    for path in summary.rollback_files:
        typer.echo(f"rollback diagnosis: {path}")

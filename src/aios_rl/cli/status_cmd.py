"""`aios-rl status --run RUN [--json]`: where a run stands, safe to run next to a live writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from aios_rl.campaign.metrics import training_summary
from aios_rl.cli.lineage_cmd import RunOption, open_run
from aios_rl.control.status import DEFAULT_RECENT, DEFAULT_WINDOWS, status_report


def _pct(cell: dict[str, Any]) -> str:
    return "-" if cell["rate"] is None else f"{100 * cell['rate']:5.1f}% of {cell['episodes']}"


def _none(value: str | None) -> str:
    return "-" if value is None else value


def _head(r: dict[str, Any]) -> list[str]:
    p, tally = r["pointers"], r["window_results"]
    window = "  window " + " ".join(f"{k} {v}" for k, v in tally.items()) if r["phase"] else ""
    alarm = r["last_alarm"]
    return [
        f"run {r['run']}  events {r['events']}  last event {_none(r['last_event_at'])}",
        f"epoch {r['epoch']}  phase {r['phase'] or 'none (no epoch opened)'}  "
        f"streak {r['streak']}/{r['rollback_threshold']}{window}",
        f"pointers  active={_none(p['active'])}  pre_update_ref={_none(p['pre_update_ref'])}  "
        f"last_stable={_none(p['last_stable'])}",
        f"lineage   {'FROZEN' if r['frozen'] else 'not frozen'}  "
        f"consecutive rollbacks {r['consecutive_rollbacks']}  checkpoints {r['checkpoints']}  "
        f"updates {r['updates']}  promotions {r['promotions']}  rollbacks {r['rollbacks']}",
        "lanes     " + "  ".join(f"{lane} {n}" for lane, n in r["lanes"].items()),
        f"episodes  {r['episodes_recorded']} recorded  {r['comparisons_recorded']} compared  "
        f"alarms {r['alarms']}" + (f" (last: {alarm['kind']} at {alarm['at']})" if alarm else ""),
    ]


def _training(t: dict[str, Any]) -> str:
    """One line for a `shell train` run: the phases done and the last one's numbers."""
    last, epoch = t["last"], t["last"]["epoch"]
    names = {"warm_start": "warm start", "redistill": "redistillation"}
    done = f"{t['epochs']} epoch{'' if t['epochs'] == 1 else 's'}" + "".join(
        f", {label} x{t['phases'][p]}" for p, label in names.items() if p in t["phases"])
    if last["phase"] == "redistill":
        what = f"redistillation after epoch {epoch}"
    else:
        what = names.get(last["phase"], f"epoch {epoch} ({last['phase']})")
    parts = [f"{what} -> {last['checkpoint']}"]
    if last["rollout/success_rate"] is not None:
        parts.append(f"rollout success {100 * last['rollout/success_rate']:.1f}%")
    if last["val/decision"] is not None:
        rolled_back = " (rolled back)" if last["val/decision"] == "worse" else ""
        parts.append(f"validation {last['val/decision']}{rolled_back}")
    if last["time/phase_s"] is not None:
        parts.append(f"{last['time/phase_s']:.0f} s")
    total = "" if t["minutes"] is None else f"; {t['minutes']:.1f} min in all"
    return f"training  {done}; last: {', '.join(parts)}{total}"


def status_lines(r: dict[str, Any]) -> list[str]:
    """The compact human-readable block of a :func:`status_report` dict (with ``training`` added by
    the command: a `shell train` run's :func:`~aios_rl.campaign.metrics.training_summary`, or None)."""
    lines = _head(r)
    if r.get("training"):
        lines.append(_training(r["training"]))
    if r["last_close"]:
        c = r["last_close"]
        lines.append(
            f"last closed epoch {c['epoch']}: {c['close_reason']}  "
            f"(better {c['better']}, same {c['same']}, worse {c['worse']}, failed {c['failed']})"
        )
    if r["recent_comparisons"]:
        lines.append("recent comparisons")
        for c in r["recent_comparisons"]:
            outcome = c["relative_outcome"] if c["status"] == "completed" else "comparison_failed"
            lines.append(f"  epoch {c['epoch']:<4} {c['episode_id']}  {c['environment']}  {outcome}")
    if r["success_rates"]:
        windows = next(iter(r["success_rates"].values()))
        lines.append(f"{'success rate':<16}" + "".join(f"{'last ' + w:<16}" for w in windows).rstrip())
        for env, cells in r["success_rates"].items():
            lines.append(f"  {env:<14}" + "".join(f"{_pct(cell):<16}" for cell in cells.values()).rstrip())
    return lines


def status(
    run: Path = RunOption,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    window: list[int] = typer.Option(
        list(DEFAULT_WINDOWS), "--window", help="Success-rate window in episodes per environment; repeatable."
    ),
    recent: int = typer.Option(DEFAULT_RECENT, "--recent", help="Latest matched comparisons to list."),
) -> None:
    """Phase, epoch, streak, pointers, lanes, recent comparisons and windowed success rates of a run; for
    a `shell train` run also its training phases (from RUN/metrics.jsonl)."""
    with open_run(run, writer=False) as plane:
        report = status_report(plane, windows=window, recent=recent)
    report["training"] = training_summary(run / "metrics.jsonl")
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        for line in status_lines(report):
            typer.echo(line)

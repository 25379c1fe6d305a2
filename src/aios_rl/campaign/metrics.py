"""Append-only JSONL metrics (``RUN/metrics.jsonl``): one flushed line per record, safe to tail."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def json_values(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its non-finite floats (NaN: nothing measured) as None, so it dumps as valid JSON."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}


def append_metrics(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line; non-finite floats become null so every line stays valid JSON.

    A torn last line (a kill mid-write) is ended first, so the new record starts a line of its own instead
    of being glued onto the fragment and lost with it."""
    line = json.dumps(json_values(record), sort_keys=True) + "\n"
    with path.open("a") as fh:
        fh.write(("\n" if _torn(path) else "") + line)
        fh.flush()
        os.fsync(fh.fileno())


def _torn(path: Path) -> bool:
    """Whether the file's last line lacks its newline (a write cut short by a kill)."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every record of a metrics file (a torn last line from a crash is ignored)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


EPOCH_PHASES = ("distill", "rl")  # a `shell train` epoch's record: distillation only, or RL
TRAINING_PHASES = ("warm_start", *EPOCH_PHASES, "redistill")  # every phase of `shell train`'s records
_HEADLINE = (
    "epoch", "phase", "checkpoint", "rollout/success_rate", "train/loss", "val/decision", "time/phase_s",
)


def phase_minutes(path: Path) -> float | None:
    """The minutes a run's phases took (the sum of ``time/phase_s`` over its records), or None when a
    record has none (written before the field existed) or the file has no record."""
    return _minutes(read_metrics(path))


def training_summary(path: Path) -> dict[str, Any] | None:
    """Where a `shell train` run stands, from its metrics: the records of each phase, the epochs trained,
    the last record's headline numbers, and the minutes of all phases (None where a record predates phase
    times). None for a file with no `shell train` record (a campaign's, or a run not started)."""
    records = [r for r in read_metrics(path) if r.get("phase") in TRAINING_PHASES]
    if not records:
        return None
    phases = {p: n for p in TRAINING_PHASES if (n := sum(r["phase"] == p for r in records))}
    return {
        "phases": phases,
        "epochs": sum(phases.get(p, 0) for p in EPOCH_PHASES),
        "last": {key: records[-1].get(key) for key in _HEADLINE},
        "minutes": _minutes(records),
    }


def _minutes(records: list[dict[str, Any]]) -> float | None:
    seconds = [r.get("time/phase_s") for r in records]
    if not seconds or any(s is None for s in seconds):
        return None
    return sum(seconds) / 60

"""Append-only JSONL metrics (``RUN/metrics.jsonl``): one flushed line per record, safe to tail."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def append_metrics(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line; non-finite floats become null so every line stays valid JSON."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
    with path.open("a") as fh:
        fh.write(json.dumps(clean, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


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


def phase_minutes(path: Path) -> float | None:
    """The minutes a run's phases took (the sum of ``time/phase_s`` over its records), or None when a
    record has none (written before the field existed) or the file has no record."""
    seconds = [r.get("time/phase_s") for r in read_metrics(path)]
    if not seconds or any(s is None for s in seconds):
        return None
    return sum(seconds) / 60

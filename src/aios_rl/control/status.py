"""A run's status at a glance: the control state plus what only the event log and episodes can tell.

``status_report`` reads a (preferably read-only) :class:`ControlPlane` and returns one JSON-ready dict: the
epoch phase and streak, the three pointers, lane sizes, update/rollback/promotion counts, the last few
matched comparisons and windowed success rates per environment. It reads the event log only up to the
sequence number the plane folded, so the report is one consistent cut even while a writer keeps appending.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aios_rl.contracts.errors import ConfigError
from aios_rl.control import ledger

if TYPE_CHECKING:  # only annotations: `aios-rl --help` stays free of torch
    from aios_rl.control.plane import ControlPlane

DEFAULT_WINDOWS: tuple[int, ...] = (20, 100)
DEFAULT_RECENT = 5


@dataclass
class _LogScan:
    """What one pass over the event log collects (the fold keeps counts, not these details)."""

    last_event_at: str | None = None
    comparisons: int = 0
    recent: deque[dict[str, Any]] = field(default_factory=deque)
    last_alarm: dict[str, Any] | None = None
    # environment -> its episode ids in log order (a dict used as an ordered set)
    episodes: dict[str, dict[str, None]] = field(default_factory=dict)
    # epoch -> its comparison results over every monitoring window (the open epoch and the one before it:
    # the ledger's summary of a closed epoch counts only its last window)
    epoch_results: dict[int, list[ledger.ComparisonResult]] = field(default_factory=dict)


def _scan(plane: ControlPlane, recent: int) -> _LogScan:
    scan = _LogScan(recent=deque(maxlen=recent))
    epoch = 0
    for event in plane.store.events():
        if event.seq > plane.seq:  # committed by a live writer after the plane was opened
            break
        scan.last_event_at, p = event.created_at, event.payload
        if event.kind == "epoch.opened":
            epoch += 1
            scan.epoch_results = {e: r for e, r in scan.epoch_results.items() if e == epoch - 1}
        elif event.kind == "teacher.alarm":
            scan.last_alarm = {"kind": p.get("kind"), "at": event.created_at}
        if event.kind in ("episode.recorded", "comparison.recorded"):
            seen = scan.episodes.setdefault(p["environment"], {})
            seen.pop(p["episode_id"], None)  # a re-recorded episode counts at its latest position
            seen[p["episode_id"]] = None
        if event.kind == "comparison.recorded":
            scan.comparisons += 1
            scan.epoch_results.setdefault(epoch, []).append(ledger.ComparisonResult(
                episode_id=p["episode_id"], environment=p["environment"], status=p["status"],
                relative_outcome=p.get("relative_outcome"),
            ))
            scan.recent.append(
                {
                    "episode_id": p["episode_id"],
                    "environment": p["environment"],
                    "epoch": epoch,
                    "status": p["status"],
                    "relative_outcome": p.get("relative_outcome"),
                    "at": event.created_at,
                }
            )
    return scan


def _success_rates(
    plane: ControlPlane, episodes: dict[str, dict[str, None]], windows: Sequence[int]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per environment and window: successes among its last ``window`` recorded episodes.

    Only the episodes the events name count (collected ones and the candidate side of each comparison); a
    matched reference run stored alongside a comparison ran under ``pre_update_ref`` and would blur the rate.
    """
    rates: dict[str, dict[str, dict[str, Any]]] = {}
    for environment in sorted(episodes):
        newest = list(episodes[environment])[-max(windows):]
        bodies = plane.store.episode_bodies(newest)
        outcomes = [json.loads(bodies[i]).get("outcome") for i in newest if i in bodies]
        rates[environment] = {}
        for window in windows:
            last = outcomes[-window:]
            successes = sum(o == "success" for o in last)
            rates[environment][str(window)] = {
                "episodes": len(last),
                "successes": successes,
                "rate": successes / len(last) if last else None,
            }
    return rates


def status_report(
    plane: ControlPlane, *, windows: Sequence[int] = DEFAULT_WINDOWS, recent: int = DEFAULT_RECENT
) -> dict[str, Any]:
    """Everything ``aios-rl status`` shows, as one JSON-ready dict.

    Args:
        plane: an open control plane (``ControlPlane(run_dir, writer=False)`` next to a live writer).
        windows: success-rate windows, in episodes per environment (each >= 1).
        recent: how many of the latest matched comparisons to list (>= 0).

    Example:
        >>> with ControlPlane(run_dir, writer=False) as plane:  # doctest: +SKIP
        ...     status_report(plane)["pointers"]["active"]
        'ckpt-0001'
    """
    if not windows or any(w < 1 for w in windows):
        raise ConfigError(f"status windows must be one or more positive episode counts, got {list(windows)}")
    if recent < 0:
        raise ConfigError(f"status recent must be >= 0, got {recent}")
    windows = sorted(set(windows))
    state, lin, led = plane.state, plane.state.lineage, plane.state.ledger
    current = led.current
    scan = _scan(plane, recent)
    last_close = None
    if led.history:  # the summary's counts are its last window's: count the epoch's every window
        summary = led.history[-1]
        every_window = ledger.counts(scan.epoch_results.get(summary.epoch, []))
        last_close = summary.model_dump(mode="json") | every_window
    return {
        "run": str(plane.run_dir),
        "phase": current.phase if current is not None else None,
        "epoch": current.epoch if current is not None else 0,
        "streak": current.streak if current is not None else 0,
        "rollback_threshold": plane.config.ledger.rollback_threshold,
        "window_results": ledger.counts(current.results) if current is not None else ledger.counts([]),
        "pointers": lin.pointers(),
        "frozen": lin.frozen,
        "consecutive_rollbacks": lin.consecutive_rollbacks,
        "checkpoints": len(lin.checkpoints),
        "updates": lin.updates,
        "rollbacks": lin.rollbacks,
        "promotions": lin.promotions,
        "lanes": dict(state.replay.counts()),
        "episodes_recorded": state.episodes_recorded,
        "comparisons_recorded": scan.comparisons,
        "alarms": state.alarms,
        "last_alarm": scan.last_alarm,
        "events": state.applied,
        "last_event_at": scan.last_event_at,
        "epochs_closed": len(led.history),
        "last_close": last_close,
        "recent_comparisons": list(scan.recent),
        "success_rates": _success_rates(plane, scan.episodes, windows),
    }

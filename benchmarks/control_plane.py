"""Control-plane latency: committing an event and moving a pointer, against a bare SQLite insert.

Run: ``make bench`` or ``.venv/bin/python benchmarks/control_plane.py [--events N]``. Prints one table;
all rows are measured in the same run on the same disk so the ratios are meaningful.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import torch

from aios_rl.contracts.episode import Episode, Observation, Step
from aios_rl.control.plane import ControlPlane


def _episode(i: int) -> Episode:
    steps = [
        Step(observation=Observation(text=f"observation {i}.{k} " * 8, candidates=["read a.py", "run tests"]),
             action="run tests", logprob=-0.4, entropy=0.7)
        for k in range(4)
    ]
    return Episode(environment="shell", task_id=f"t{i}", trajectory=steps, outcome="success", reward=1.0,
                   env_reward=1.0, policy_version="c0", admission_status="admitted")


def _stats(samples: list[float]) -> tuple[float, float]:
    """Median and p99 in ms; the p99 is the nearest rank (the 99th of 100 samples, not their maximum)."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[math.ceil(0.99 * len(ordered)) - 1] * 1e3


def bench_bare_sqlite(path: Path, bodies: list[str]) -> list[float]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, body TEXT)")
    times = []
    for i, body in enumerate(bodies):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (k, body) VALUES (?, ?)", (f"k{i}", body))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - start)
    conn.close()
    return times


def bench_events(run: Path, episodes: list[Episode]) -> list[float]:
    plane = ControlPlane(run)
    plane.save_checkpoint("c0", {"w": torch.zeros(16)}, {})
    plane.initialize("c0")
    times = []
    for episode in episodes:
        start = time.perf_counter()
        plane.record_episode(episode, admitted=False, lane="neutral")
        times.append(time.perf_counter() - start)
    plane.close()
    return times


def bench_pointer_moves(run: Path, moves: int, weights_mb: float) -> list[float]:
    plane = ControlPlane(run)
    numel = int(weights_mb * 1024 * 1024 / 4)
    plane.save_checkpoint("p0", {"w": torch.zeros(numel)}, {})
    plane.initialize("p0")
    times = []
    for i in range(1, moves + 1):
        plane.open_epoch()
        for k in range(plane.config.ledger.batch_size):
            plane.record_episode(_episode(i * 10 + k), admitted=True)
        plane.save_checkpoint(f"p{i}", {"w": torch.full((numel,), float(i))}, {}, parent=plane.state.lineage.active)
        start = time.perf_counter()
        plane.complete_update(f"p{i}")  # pointer move: verify sha256 of the target, then commit
        times.append(time.perf_counter() - start)
        plane.rollback("bench")
        if plane.state.lineage.frozen:
            plane.unfreeze()
    plane.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events to commit")
    parser.add_argument("--moves", type=int, default=100, help="pointer moves to time")
    parser.add_argument("--weights-mb", type=float, default=4.0, help="checkpoint size hashed per pointer move")
    args = parser.parse_args()
    for flag, value in (("--events", args.events), ("--moves", args.moves)):
        if value < 1:  # nothing to time: the medians below would have no samples
            parser.error(f"{flag} must be at least 1, got {value}")
    if args.weights_mb < 0:
        parser.error(f"--weights-mb must not be negative, got {args.weights_mb:g}")
    episodes = [_episode(i) for i in range(args.events)]
    bodies = [e.model_dump_json() for e in episodes]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare = bench_bare_sqlite(root / "bare.db", bodies)
        wall = time.perf_counter()
        events = bench_events(root / "run-events", episodes)
        wall = time.perf_counter() - wall
        moves = bench_pointer_moves(root / "run-moves", args.moves, args.weights_mb)
    bare_med, bare_p99 = _stats(bare)
    ev_med, ev_p99 = _stats(events)
    mv_med, mv_p99 = _stats(moves)
    print(f"control-plane benchmark ({args.events} events, {args.moves} pointer moves, "
          f"{args.weights_mb:g} MB checkpoints, episode body {len(bodies[0])} bytes)")
    print(f"{'operation':<34}{'median ms':>11}{'p99 ms':>10}{'x bare':>9}")
    print(f"{'bare SQLite insert (1 txn)':<34}{bare_med:>11.3f}{bare_p99:>10.3f}{1.0:>9.2f}")
    print(f"{'commit event (episode.recorded)':<34}{ev_med:>11.3f}{ev_p99:>10.3f}{ev_med / bare_med:>9.2f}")
    print(f"{'pointer move (update.completed)':<34}{mv_med:>11.3f}{mv_p99:>10.3f}{mv_med / bare_med:>9.2f}")
    print(f"events per second (end to end): {args.events / wall:,.0f}")


if __name__ == "__main__":
    main()

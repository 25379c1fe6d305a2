"""Replay stored RAIL traces through fresh gain models: is the realized gain learnable from z at all?

Reads the ``rail_traces`` table of one or more runs (``RUN/control.db``, or a directory searched for
them) and scores Δ̂ prequentially, the way the controller's promotion test does: each trace is predicted
by the model fitted on the traces before it, refitting every ``refit_every`` traces. For each model
variant it prints the sign agreement on traces with a sign, the agreement of the best constant sign
over the same traces (a model that cannot beat it has learned nothing about z), and the MAE of Δ̂
against predicting 0 and the running mean. ``--gain outcome`` recomputes y on success indicators
(reward >= ``--success-threshold``) from the rewards the traces keep; ``reward`` uses y as stored.

Run: ``.venv/bin/python benchmarks/rail_replay.py bench-out/rollouts-.../`` (any directory holding
control.db files of RAIL runs).
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from aios_rl.contracts.errors import AiosRlError
from aios_rl.rollout.rail import GainModel, RailConfig
from aios_rl.rollout.rail_features import CONTEXT_NAMES, build_arms, realized_gain
from aios_rl.storage.rail_traces import RailTrace, RailTraceStore

VARIANTS = {  # name -> RailConfig overrides
    "huber (default)": {},
    "ridge": {"model": "ridge"},
    "huber, l2 1": {"l2": 1.0},
    "huber, l2 0.1": {"l2": 0.1},
    "huber, l2 100": {"l2": 100.0},
}


def load(paths: Sequence[Path]) -> list[list[RailTrace]]:
    """The traces of every control.db under ``paths``, one list per file, in insertion order."""
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("control.db"))})
    runs = []
    for file in files:
        with RailTraceStore(file, read_only=True) as store:
            traces = store.all()
        if traces:
            runs.append(traces)
    return runs


def gains(traces: Sequence[RailTrace], kind: str, threshold: float) -> np.ndarray:
    """y per trace: as stored (``reward``) or recomputed on success indicators (``outcome``)."""
    if kind == "reward":
        return np.asarray([t.y for t in traces])
    if any(not t.branch_rewards for t in traces):
        raise SystemExit("--gain outcome needs traces that keep their rewards (written by a newer build)")
    def wins(rewards: Sequence[float]) -> list[float]:
        return [float(r >= threshold) for r in rewards]

    return np.asarray([realized_gain(wins(t.base_rewards), wins(t.branch_rewards)) for t in traces])


def prequential(traces: Sequence[RailTrace], y: np.ndarray, config: RailConfig) -> np.ndarray:
    """Δ̂ of each trace from the model fitted on the traces before it; NaN before the first fit."""
    model = GainModel.from_config(config, build_arms(config.arm_budgets, config.regimes))
    seen: list[RailTrace] = []
    preds = np.full(len(traces), np.nan)
    for i, (trace, target) in enumerate(zip(traces, y, strict=True)):
        if model.fitted:
            preds[i] = model.predict(np.asarray(trace.z), trace.arm)
        seen.append(replace(trace, y=float(target)))
        if config.refit_due(len(seen)):
            model.fit(seen)  # on the last `window` of them, as the controller's buffer holds
    return preds


def traces_needed(config: RailConfig) -> int:
    """Traces one run needs before the replay scores any: those of the first fit, then one it predicts."""
    return next(n for n in itertools.count(1) if config.refit_due(n)) + 1


def report(runs: list[list[RailTrace]], kind: str, threshold: float, eps: float) -> None:
    ys = [gains(t, kind, threshold) for t in runs]
    y_all = np.concatenate(ys)
    signed = np.abs(y_all) > eps
    print(f"gain on {kind}s: {len(y_all)} traces in {len(runs)} run(s); "
          f"y > 0: {np.mean(y_all > eps):.2f}, y < 0: {np.mean(y_all < -eps):.2f}, "
          f"y = 0: {np.mean(~signed):.2f}; mean y {y_all.mean():+.4f}")
    if not signed.any():  # nothing to correlate with or to predict: every model would print NaN
        print(f"no gain exceeds |y| > {eps:g}: nothing to predict")
        return
    z = np.asarray([t.z for run in runs for t in run])
    corr = []
    for name, col in zip(CONTEXT_NAMES, z.T, strict=True):
        c = float(np.corrcoef(col, y_all)[0, 1]) if col.std() > 0 else math.nan
        if math.isfinite(c):
            corr.append((abs(c), c, name))
    corr.sort(reverse=True)
    print("strongest correlations with y: " + ", ".join(f"{n} {c:+.2f}" for _, c, n in corr[:5]))
    print(f"{'model':<18}{'scored':>8}{'sign agree':>12}{'best const':>12}{'MAE':>9}{'MAE 0':>9}"
          f"{'MAE mean':>10}")
    for name, overrides in VARIANTS.items():
        config = RailConfig(**overrides)
        preds, truth, running = [], [], []
        for traces, y in zip(runs, ys, strict=True):
            p = prequential(traces, y, config)
            mean = np.concatenate([[0.0], np.cumsum(y)[:-1] / np.arange(1, len(y))])  # mean of earlier ys
            keep = ~np.isnan(p)
            preds.append(p[keep])
            truth.append(y[keep])
            running.append(mean[keep])
        p, t, m = map(np.concatenate, (preds, truth, running))
        s = np.abs(t) > eps
        agree = float(np.mean(np.sign(p[s]) == np.sign(t[s]))) if s.any() else float("nan")
        const = max(np.mean(t[s] > 0), np.mean(t[s] < 0)) if s.any() else float("nan")
        print(f"{name:<18}{len(p):>8}{agree:>12.3f}{const:>12.3f}{np.mean(np.abs(p - t)):>9.4f}"
              f"{np.mean(np.abs(t)):>9.4f}{np.mean(np.abs(m - t)):>10.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", type=Path, nargs="+", help="control.db files or directories holding them")
    parser.add_argument("--gain", choices=("reward", "outcome", "both"), default="both")
    parser.add_argument("--success-threshold", type=float, default=0.5, help="reward counted as a success")
    parser.add_argument("--sign-eps", type=float, default=1e-6, help="|y| at most this has no sign")
    args = parser.parse_args()
    try:
        runs = load(args.paths)
    except AiosRlError as exc:  # e.g. a file that is not a run store: say why, without a traceback
        parser.error(str(exc))
    if not runs:
        raise SystemExit(f"no RAIL traces under {', '.join(map(str, args.paths))}")
    needed = max(traces_needed(RailConfig(**overrides)) for overrides in VARIANTS.values())
    longest = max(map(len, runs))
    if longest < needed:  # every model would score nothing: a table of NaN under numpy's warnings
        parser.error(f"too few RAIL traces for the prequential replay: {longest} in the longest of "
                     f"{len(runs)} run(s); it needs at least {needed} in one run (the first fit, then one "
                     "trace to predict); replay runs with more RAIL decisions")
    for kind in ("reward", "outcome") if args.gain == "both" else (args.gain,):
        report(runs, kind, args.success_threshold, args.sign_eps)
        print()


if __name__ == "__main__":
    main()

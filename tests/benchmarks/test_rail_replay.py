"""benchmarks/rail_replay.py: the prequential replay finds a planted gain, and says so when there is none."""

from __future__ import annotations

import random
import sys
import warnings

import numpy as np
import pytest

from aios_rl.rollout.rail import RailConfig, RailController
from aios_rl.rollout.rail_features import CONTEXT_DIM
from aios_rl.storage.rail_traces import RailTrace, RailTraceStore


def _traces(n: int, gain) -> list[RailTrace]:
    rng = random.Random(0)
    traces = []
    for _ in range(n):
        z = tuple(rng.uniform(-1, 1) for _ in range(CONTEXT_DIM))
        traces.append(RailTrace(z=z, arm="m2-default", y=gain(z)))
    return traces


def test_prequential_predictions_recover_a_planted_gain_sign(load_benchmark) -> None:
    replay = load_benchmark("rail_replay")
    traces = _traces(160, lambda z: 0.3 * z[0])
    y = replay.gains(traces, "reward", 0.5)
    config = RailConfig()
    preds = replay.prequential(traces, y, config)
    assert np.isnan(preds[: config.min_fit_traces]).all()  # nothing is predicted before the first fit
    scored = ~np.isnan(preds)
    assert scored.sum() == len(traces) - config.min_fit_traces
    agree = np.mean(np.sign(preds[scored]) == np.sign(y[scored]))
    assert agree > 0.8, agree  # 0.87 here; chance is 0.5


@pytest.mark.parametrize("kind", ["reward", "outcome"])
def test_all_zero_gains_say_nothing_to_predict_without_nan_or_warnings(load_benchmark, capsys, kind) -> None:
    replay = load_benchmark("rail_replay")
    traces = [RailTrace(z=t.z, arm=t.arm, y=0.0, base_rewards=(0.0, 0.0), branch_rewards=(0.0,))
              for t in _traces(40, lambda z: 0.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replay.report([traces], kind, 0.5, 1e-6)
    out = capsys.readouterr().out
    assert "y = 0: 1.00" in out and "nothing to predict" in out
    assert "nan" not in out.lower()


def test_report_prints_every_model_with_finite_numbers(load_benchmark, capsys) -> None:
    replay = load_benchmark("rail_replay")
    replay.report([_traces(48, lambda z: 0.1 * z[1])], "reward", 0.5, 1e-6)
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("huber", "ridge"))]
    assert len(rows) == len(replay.VARIANTS)
    assert "nan" not in out.lower()


def test_the_replay_predicts_what_the_controller_predicted_on_the_same_traces(load_benchmark) -> None:
    """The replay refits on the controller's schedule and window: its Δ̂ of each trace is the live one."""
    replay = load_benchmark("rail_replay")
    config = RailConfig(window=40, refit_every=8, min_fit_traces=12, promotion_min_traces=10**6)
    traces = _traces(100, lambda z: 0.2 * z[0] - 0.1 * z[3])
    controller, live = RailController(config), []
    for trace in traces:
        fitted = controller.model.fitted
        live.append(controller.model.predict(np.asarray(trace.z), trace.arm) if fitted else np.nan)
        controller.observe(trace)
    preds = replay.prequential(traces, replay.gains(traces, "reward", 0.5), config)
    assert np.isnan(preds[:16]).all() and not np.isnan(preds[16:]).any()  # first fit after trace 16
    np.testing.assert_allclose(preds, np.asarray(live), rtol=1e-9, atol=1e-12)


def _run_dir(root, n: int):
    """A run directory whose control.db holds ``n`` RAIL traces with a planted gain."""
    with RailTraceStore(root / "control.db") as store:
        for trace in _traces(n, lambda z: 0.3 * z[0]):
            store.append(trace)
    return root


def test_too_few_traces_for_the_replay_are_a_usage_error_not_nan(
    load_benchmark, tmp_path, monkeypatch, capsys, usage_error
) -> None:
    # Runs shorter than the first fit plus one trace to predict printed a table of nan under numpy's
    # RuntimeWarnings (mean of an empty slice) and exited 0.
    replay = load_benchmark("rail_replay")
    config = RailConfig()
    needed = config.min_fit_traces + 1  # the first fit (after refit_every = min_fit_traces traces), then one
    assert config.refit_every == config.min_fit_traces
    short = [_run_dir(tmp_path / "a", needed - 1), _run_dir(tmp_path / "b", 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        err = usage_error(replay, ["rail_replay.py", *map(str, short), "--gain", "reward"])
    assert "too few RAIL traces" in err
    assert f"{needed - 1} in the longest of 2 run(s)" in err and f"at least {needed}" in err
    assert "nan" not in capsys.readouterr().out.lower()
    monkeypatch.setattr(sys, "argv", ["rail_replay.py", str(_run_dir(tmp_path / "c", needed)), "--gain",
                                      "reward"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replay.main()  # one trace to score is enough
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("huber (")]
    assert rows and rows[0][2] == "1"


def test_a_path_that_is_not_a_run_store_is_a_usage_error_not_a_traceback(
    load_benchmark, tmp_path, usage_error
) -> None:
    # e.g. a run's results.json given for its directory: the store's StorageError ended in a traceback
    replay = load_benchmark("rail_replay")
    results = tmp_path / "results.json"
    results.write_text("[]")
    err = usage_error(replay, ["rail_replay.py", str(results)])
    assert f"error: {results}: cannot open the RAIL trace table" in err

"""status_report on real run directories built through the ControlPlane API, after known event sequences."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aios_rl.contracts.episode import Comparison, Episode, Observation, Step
from aios_rl.contracts.errors import ConfigError
from aios_rl.control.plane import ControlPlane
from aios_rl.control.status import status_report


def episode(environment: str, outcome: str, relative: str | None = None, *, failed: bool = False) -> Episode:
    comparison = None
    if failed:
        comparison = Comparison(status="comparison_failed", attempts=2, reason="test")
    elif relative is not None:
        comparison = Comparison(status="completed", relative_outcome=relative)
    return Episode(
        environment=environment,
        task_id="t",
        trajectory=[Step(observation=Observation(text="o"), action="a", logprob=-0.1, entropy=0.1)],
        outcome=outcome,
        reward=0.0,
        env_reward=0.0,
        policy_version="x",
        comparison=comparison,
    )


def save(plane: ControlPlane, cid: str, parent: str | None = None) -> None:
    plane.save_checkpoint(cid, {"w": torch.zeros(2)}, {}, parent=parent)


def collect_and_update(plane: ControlPlane, new_id: str, outcomes: list[str]) -> None:
    plane.open_epoch()
    for outcome in outcomes:
        plane.record_episode(episode("shell", outcome), admitted=True)
    save(plane, new_id, plane.state.lineage.active)
    plane.complete_update(new_id)


def compare(plane: ControlPlane, environment: str, relatives: list[str | None]) -> list[str]:
    ids = []
    for rel in relatives:
        ep = episode(environment, "success", rel, failed=rel is None)
        plane.record_comparison(ep)
        ids.append(ep.episode_id)
    return ids


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    """Epoch 1: update c1, promoted. Epoch 2: update c2, worse/failed/worse -> rollback to c1. One alarm."""
    run_dir = tmp_path / "run"
    with ControlPlane(run_dir) as plane:
        save(plane, "c0")
        plane.initialize("c0")
        collect_and_update(plane, "c1", ["success", "failure", "failure", "success"])
        compare(plane, "shell", ["better", "same", "same", "better"])
        assert plane.pending_decision() == "promote"
        plane.close_epoch("promote")
        plane.record_episode(episode("browser", "failure"), admitted=False, lane="diagnostic_only")
        collect_and_update(plane, "c2", ["failure", "failure", "success", "partial"])
        worse = compare(plane, "browser", ["worse", None, "worse"])
        assert plane.pending_decision() == "rollback"
        plane.close_epoch("rollback", trigger_episodes=[worse[0], worse[2]])
        plane.raise_alarm("teacher_disagreement", {"rate": 0.5})
    return run_dir


def report_of(run_dir: Path, **kwargs: object) -> dict:
    with ControlPlane(run_dir, writer=False) as plane:
        return status_report(plane, **kwargs)  # type: ignore[arg-type]


def test_counts_and_pointers_after_promotion_then_rollback(run: Path) -> None:
    r = report_of(run)
    assert (r["phase"], r["epoch"], r["streak"], r["rollback_threshold"]) == ("closed", 2, 3, 3)
    assert r["window_results"] == {"better": 0, "same": 0, "worse": 2, "failed": 1}
    assert r["pointers"] == {"active": "c1", "pre_update_ref": None, "last_stable": "c1"}
    assert (r["updates"], r["promotions"], r["rollbacks"], r["consecutive_rollbacks"]) == (2, 1, 1, 1)
    assert r["frozen"] is False and r["checkpoints"] == 3
    # better x2 -> positive; same x2 and the failed comparison -> neutral; worse x2 -> negative.
    assert r["lanes"] == {"positive": 2, "neutral": 3, "negative": 2, "diagnostic_only": 1}
    assert (r["episodes_recorded"], r["comparisons_recorded"], r["alarms"]) == (9, 7, 1)
    assert r["last_alarm"]["kind"] == "teacher_disagreement"
    assert r["epochs_closed"] == 2
    assert r["last_close"] == {
        "epoch": 2, "close_reason": "rollback", "better": 0, "same": 0, "worse": 2, "failed": 1
    }
    # 3 checkpoints + init + 2 x (open, 4 episodes, update, close) + 7 comparisons + 1 episode + 1 alarm
    assert r["events"] == 3 + 1 + 2 * 7 + 7 + 1 + 1
    assert r["last_event_at"] == r["last_alarm"]["at"]


def test_recent_comparisons_are_the_latest_in_order(run: Path) -> None:
    recent = report_of(run, recent=4)["recent_comparisons"]
    assert [(c["epoch"], c["environment"], c["status"], c["relative_outcome"]) for c in recent] == [
        (1, "shell", "completed", "better"),
        (2, "browser", "completed", "worse"),
        (2, "browser", "comparison_failed", None),
        (2, "browser", "completed", "worse"),
    ]
    assert report_of(run, recent=0)["recent_comparisons"] == []


def test_windowed_success_rates_per_environment(run: Path) -> None:
    rates = report_of(run, windows=(100, 3))["success_rates"]
    # shell in log order: epoch-1 batch s f f s, its 4 comparisons (all success), epoch-2 batch f f s p.
    assert rates["shell"]["100"] == {"episodes": 12, "successes": 7, "rate": 7 / 12}
    assert rates["shell"]["3"] == {"episodes": 3, "successes": 1, "rate": 1 / 3}
    # browser: one diagnostic failure, then 3 comparison episodes (success).
    assert rates["browser"]["100"] == {"episodes": 4, "successes": 3, "rate": 0.75}
    assert rates["browser"]["3"] == {"episodes": 3, "successes": 3, "rate": 1.0}
    assert list(rates["shell"]) == ["3", "100"]


def test_shell_train_style_run_without_epochs(tmp_path: Path) -> None:
    """`shell train` updates outside epochs and routes each episode to a lane: no phase, right counts."""
    with ControlPlane(tmp_path / "run") as plane:
        save(plane, "c0")
        plane.initialize("c0")
        for outcome in ["success", "failure"]:
            plane.record_episode(episode("shell", outcome), admitted=False, lane="neutral")
        save(plane, "c1", "c0")
        plane.complete_update("c1", in_epoch=False)
    r = report_of(tmp_path / "run")
    assert (r["phase"], r["epoch"], r["streak"], r["epochs_closed"], r["last_close"]) == (None, 0, 0, 0, None)
    assert r["pointers"] == {"active": "c1", "pre_update_ref": "c0", "last_stable": "c0"}
    assert (r["updates"], r["lanes"]["neutral"], r["episodes_recorded"]) == (1, 2, 2)
    assert r["success_rates"]["shell"]["20"] == {"episodes": 2, "successes": 1, "rate": 0.5}


def test_reader_is_one_consistent_cut_next_to_a_live_writer(run: Path) -> None:
    with ControlPlane(run) as writer, ControlPlane(run, writer=False) as reader:
        writer.open_epoch()
        for _ in range(2):
            writer.record_episode(episode("shell", "success"), admitted=True)
        before = status_report(reader)  # opened before the writer's new events: must not see them
        assert (before["phase"], before["epoch"], before["episodes_recorded"]) == ("closed", 2, 9)
        assert before["success_rates"]["shell"]["100"]["episodes"] == 12
        after = report_of(run)
        assert (after["phase"], after["epoch"], after["episodes_recorded"]) == ("collection", 3, 11)
        assert after["success_rates"]["shell"]["100"]["episodes"] == 14
        assert after["last_event_at"] >= before["last_event_at"]


def test_bad_windows_are_config_errors(run: Path) -> None:
    with pytest.raises(ConfigError, match="positive"):
        report_of(run, windows=(0,))
    with pytest.raises(ConfigError, match="recent"):
        report_of(run, recent=-1)


def test_the_last_closed_epoch_counts_every_window_it_ran(tmp_path: Path) -> None:
    """An epoch that monitored two windows before it closed: its line counts all four comparisons, not the
    last window's two (the ledger's window results start afresh each window)."""
    from aios_rl.control.events import ControlConfig
    from aios_rl.control.ledger import LedgerConfig

    config = ControlConfig(ledger=LedgerConfig(monitor_window=2, max_monitor_windows=2))
    with ControlPlane(tmp_path / "run", config) as plane:
        save(plane, "c0")
        plane.initialize("c0")
        collect_and_update(plane, "c1", ["success"] * 4)
        compare(plane, "shell", ["same", "same"])
        plane.close_epoch(plane.pending_decision())  # keep_monitoring: a second window
        assert plane.state.ledger.open_epoch is not None
        compare(plane, "shell", ["same", "worse"])
        plane.close_epoch(plane.pending_decision())
        assert plane.state.ledger.current.close_reason == "no_improvement"
        collect_and_update(plane, "c2", ["success"] * 4)  # the next epoch is open: epoch 1 is still the last
        compare(plane, "shell", ["better"])
    assert report_of(tmp_path / "run")["last_close"] == {
        "epoch": 1, "close_reason": "no_improvement", "better": 0, "same": 3, "worse": 1, "failed": 0
    }

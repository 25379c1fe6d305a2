"""Hand-written transition and precedence tables for the epoch ledger."""

from __future__ import annotations

import pytest

from aios_rl.contracts.errors import LedgerError
from aios_rl.control import ledger
from aios_rl.control.ledger import ComparisonResult, EpochState, LedgerConfig, LedgerState

CFG = LedgerConfig()


def result(i: int, outcome: str | None, status: str = "completed", env: str = "shell") -> ComparisonResult:
    if outcome == "failed":
        return ComparisonResult(episode_id=f"m{i}", environment=env, status="comparison_failed")
    return ComparisonResult(episode_id=f"m{i}", environment=env, status=status, relative_outcome=outcome)


def collecting() -> LedgerState:
    return ledger.open_epoch(LedgerState(), [], CFG)


def monitoring() -> LedgerState:
    state = collecting()
    for i in range(4):
        state = ledger.admit(state, f"e{i}", CFG)
    return ledger.update_completed(state)


def with_results(outcomes: list[str | None]) -> LedgerState:
    state = monitoring()
    for i, outcome in enumerate(outcomes):
        state = ledger.record_comparison(state, result(i, outcome))
    return state


def test_open_epoch_numbers_and_single_open_epoch() -> None:
    state = collecting()
    assert state.current.epoch == 1 and state.current.phase == "collection"
    with pytest.raises(LedgerError, match="still open"):
        ledger.open_epoch(state, [], CFG)


def test_four_admitted_episodes_seal_a_micro_batch() -> None:
    state = collecting()
    for i in range(3):
        state = ledger.admit(state, f"e{i}", CFG)
        assert state.current.phase == "collection"
    state = ledger.admit(state, "e3", CFG)
    assert state.current.phase == "update"
    assert state.current.sealed == ["e0", "e1", "e2", "e3"] and state.current.batch == []


def test_admitting_same_episode_twice_counts_once() -> None:
    state = ledger.admit(ledger.admit(collecting(), "e0", CFG), "e0", CFG)
    assert state.current.batch == ["e0"]


def test_carry_seeds_the_next_batch() -> None:
    state = ledger.open_epoch(LedgerState(), ["a", "b", "c", "d", "e"], CFG)
    assert state.current.phase == "update" and state.current.sealed == ["a", "b", "c", "d"]


def test_admit_in_update_phase_refused() -> None:
    state = collecting()
    for i in range(4):
        state = ledger.admit(state, f"e{i}", CFG)
    with pytest.raises(LedgerError, match="phase update"):
        ledger.admit(state, "late", CFG)


def test_update_completed_starts_monitoring() -> None:
    assert monitoring().current.phase == "monitoring"


def test_update_completed_outside_update_phase_refused() -> None:
    with pytest.raises(LedgerError, match="expected update"):
        ledger.update_completed(collecting())


def test_update_failed_reopens_collection_and_keeps_batch() -> None:
    state = collecting()
    for i in range(4):
        state = ledger.admit(state, f"e{i}", CFG)
    state = ledger.update_failed(state)
    assert state.current.phase == "collection"
    assert state.current.failed_batches == [["e0", "e1", "e2", "e3"]]
    assert state.current.sealed == [] and state.current.streak == 0


def test_comparison_outside_monitoring_refused() -> None:
    with pytest.raises(LedgerError, match="expected monitoring"):
        ledger.record_comparison(collecting(), result(0, "same"))


@pytest.mark.parametrize(
    ("streak", "status", "outcome", "expected"),
    [
        (0, "completed", "worse", 1),
        (2, "completed", "worse", 3),
        (2, "comparison_failed", None, 3),
        (2, "completed", "better", 0),
        (2, "completed", "same", 2),
        (0, "completed", "same", 0),
    ],
)
def test_streak_rule(streak: int, status: str, outcome: str | None, expected: int) -> None:
    assert ledger.next_streak(streak, status, outcome) == expected


def test_streak_example_worse_same_failed_worse_rolls_back() -> None:
    state = with_results(["worse", "same", "failed", "worse"])
    assert state.current.streak == 3
    assert ledger.decide_close(state.current, CFG) == "rollback"


def test_duplicate_comparison_counts_once() -> None:
    state = with_results(["worse"])
    again = ledger.record_comparison(state, result(0, "worse"))
    assert again.current.streak == 1 and len(again.current.results) == 1


# Precedence: rollback > insufficient coverage > failed comparisons > promotion > keep monitoring.
@pytest.mark.parametrize(
    ("outcomes", "coverage", "expected"),
    [
        (["worse", "same", "worse", "worse"], False, "rollback"),  # rollback outranks coverage
        (["worse", "worse", "worse"], True, "rollback"),  # decided before a full window
        (["better", "same", "same", "better"], False, "insufficient_coverage"),
        (["failed", "better", "same", "same"], False, "insufficient_coverage"),
        (["failed", "better", "same", "same"], True, "failed_comparisons"),
        (["better", "same", "same", "same"], True, "promote"),
        (["better", "worse", "better", "same"], True, "keep_monitoring"),  # a worse blocks promotion
        (["same", "same", "same", "same"], True, "keep_monitoring"),  # no better
        (["better", "same"], True, "keep_monitoring"),  # window not full yet
    ],
)
def test_close_precedence(outcomes: list[str], coverage: bool, expected: str) -> None:
    state = with_results(outcomes)
    assert ledger.decide_close(state.current, CFG, coverage_ok=coverage) == expected


def test_close_promote_and_rollback_close_the_epoch() -> None:
    for decision, reason in (("promote", "promoted"), ("rollback", "rollback")):
        state = ledger.close(with_results(["better", "same", "same", "same"]), decision, CFG)
        assert state.current.phase == "closed" and state.current.close_reason == reason
        assert state.history[-1].close_reason == reason
        assert state.open_epoch is None


def test_replay_only_reopens_monitoring_keeping_streak() -> None:
    state = with_results(["worse", "failed", "same", "same"])
    assert state.current.streak == 2
    for decision in ("failed_comparisons", "insufficient_coverage"):
        after = ledger.close(state, decision, CFG)
        assert after.current.phase == "monitoring"
        assert after.current.results == [] and after.current.streak == 2


@pytest.mark.parametrize("decision", ["failed_comparisons", "insufficient_coverage"])
def test_reopened_windows_count_toward_the_limit(decision: str) -> None:
    # A window like [better, same, same, failed] never reaches the streak and never promotes: it must end.
    state = with_results(["better", "same", "same", "failed"])
    for window in range(1, CFG.max_monitor_windows):
        state = ledger.close(state, decision, CFG)
        assert state.current.phase == "monitoring" and state.current.windows == window
        for i, outcome in enumerate(["better", "same", "same", "failed"]):
            state = ledger.record_comparison(state, result(10 * window + i, outcome))
        assert ledger.decide_close(state.current, CFG) == "failed_comparisons"
    state = ledger.close(state, decision, CFG)
    assert state.current.phase == "closed" and state.current.close_reason == "no_improvement"


def test_keep_monitoring_windows_then_no_improvement() -> None:
    state = with_results(["same"] * 4)
    for window in range(1, CFG.max_monitor_windows):
        state = ledger.close(state, "keep_monitoring", CFG)
        assert state.current.phase == "monitoring" and state.current.windows == window
    state = ledger.close(state, "keep_monitoring", CFG)
    assert state.current.phase == "closed" and state.current.close_reason == "no_improvement"


def test_next_epoch_after_close_and_monitored_carry() -> None:
    state = ledger.admit(monitoring(), "m-new", CFG)
    assert state.current.monitored == ["m-new"]
    state = ledger.close(state, "rollback", CFG)
    state = ledger.open_epoch(state, state.current.monitored, CFG)
    assert state.current.epoch == 2 and state.current.batch == ["m-new"]


def test_close_manual_closes_any_open_epoch() -> None:
    state = ledger.close_manual(monitoring(), "manual_rollback")
    assert state.current.phase == "closed" and state.current.close_reason == "manual_rollback"
    assert ledger.close_manual(state, "again") == state


def test_counts() -> None:
    state = with_results(["better", "same", "worse", "failed"])
    assert ledger.counts(state.current.results) == {"better": 1, "same": 1, "worse": 1, "failed": 1}


def test_epoch_state_rejects_bad_phase() -> None:
    with pytest.raises(Exception):
        EpochState(epoch=1, phase="dancing")


def test_a_completed_comparison_without_an_outcome_is_refused_before_it_is_counted() -> None:
    # Comparison(status="completed") leaves relative_outcome None; counted, it made every later close
    # decision (and `aios-rl status`) fail with KeyError 'None' on a committed event.
    state = with_results(["same"])
    with pytest.raises(LedgerError, match="m9.*no relative_outcome"):
        ledger.record_comparison(state, result(9, None))
    filled = with_results(["same", "same", "same", "better"])
    assert ledger.decide_close(filled.current, CFG) == "promote"


def test_an_unknown_close_decision_is_refused_not_taken_for_a_rollback() -> None:
    state = with_results(["worse", "worse", "worse", "same"])
    known = "rollback, insufficient_coverage"
    with pytest.raises(LedgerError, match=f"unknown close decision 'rolback'.*{known}"):
        ledger.close(state, "rolback", CFG)  # type: ignore[arg-type]

"""Property tests over random legal event sequences driven through a real ControlPlane."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aios_rl.contracts.episode import LANES
from aios_rl.control import ledger, replay
from aios_rl.control.events import ControlConfig, ControlState
from aios_rl.control.plane import ControlPlane
from aios_rl.control.replay import ReplayConfig
from control_driver import Driver

SMALL_LANES = ControlConfig(
    replay=ReplayConfig(positive_capacity=5, neutral_capacity=4, negative_capacity=3, diagnostic_only_capacity=2),
    snapshot_every=7,
)


def check_step(before: ControlState, after: ControlState, action: str) -> None:
    lin = after.lineage
    # Pointers name registered checkpoints.
    for cid in lin.pointers().values():
        assert cid is None or cid in lin.checkpoints
    # pre_update_ref never changes inside a monitoring epoch.
    prev, cur = before.ledger.open_epoch, after.ledger.open_epoch
    if prev is not None and cur is not None and prev.epoch == cur.epoch and prev.phase == "monitoring":
        assert after.lineage.pre_update_ref == before.lineage.pre_update_ref
    # Streak semantics: a comparison that closed nothing applies exactly the streak rule.
    if action == "record_comparison":
        last = cur.results[-1]
        assert cur.streak == ledger.next_streak(prev.streak, last.status, last.relative_outcome)
    # A rollback close always returns to a checkpoint that is not the rolled-back one.
    if action == "close:rollback":
        assert lin.active != before.lineage.active
        assert lin.active in (before.lineage.pre_update_ref, before.lineage.last_stable)
    # Lanes never exceed their capacity.
    for lane, count in after.replay.counts().items():
        assert count <= SMALL_LANES.replay.capacity(lane)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), steps=st.integers(5, 120))
def test_random_event_sequences_keep_the_invariants(seed: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plane = ControlPlane(Path(tmp) / "run", SMALL_LANES)
        driver = Driver(plane, seed, tensor_mb=0.001)
        for _ in range(steps):
            before = plane.state
            action = driver.step()
            check_step(before, plane.state, action)
            assert plane.verify_pointers() == []
        assert plane.state == plane.replay_from_scratch()
        plane.close()  # one writer at a time: the reopening writer takes the run over
        reopened = ControlPlane(Path(tmp) / "run")
        assert reopened.state == plane.state
        reopened.close()


@given(
    boundary=st.booleans(),
    outcome=st.sampled_from(["better", "same", "worse", None]),
    status=st.sampled_from(["completed", "comparison_failed"]),
)
def test_routing_is_deterministic_and_total(boundary: bool, outcome: str | None, status: str) -> None:
    lanes = {replay.route(boundary=boundary, relative_outcome=outcome, comparison_status=status) for _ in range(3)}
    assert len(lanes) == 1
    lane = lanes.pop()
    assert lane in LANES
    if boundary:
        assert lane == "diagnostic_only"


def test_reapplying_an_event_id_is_a_no_op(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "run")
    driver = Driver(plane, seed=3)
    for _ in range(10):
        driver.step()
    state, count = plane.state, plane.store.event_count()
    event = list(plane.store.events())[-1]
    again = plane.emit(event.kind, event.payload, event_id=event.event_id)
    assert again == state and plane.store.event_count() == count

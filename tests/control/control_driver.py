"""A random but always-legal driver of the control plane, shared by the property and crash tests.

Run as a script (``python control_driver.py RUN_DIR SEED STEPS [MB]``) it drives a real ControlPlane until
killed; the crash test SIGKILLs it at a random moment and checks what survived.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

from aios_rl.contracts.episode import Comparison, Episode, Observation, Step, TeacherSignal
from aios_rl.control.plane import ControlPlane

ENVIRONMENTS = ("shell", "browser")


def make_episode(rng: random.Random, version: str, outcome: str | None = None, ref: str | None = None) -> Episode:
    step = Step(observation=Observation(text="o"), action="a", logprob=-0.1, entropy=0.1)
    comparison = None
    if outcome == "failed":
        comparison = Comparison(status="comparison_failed", attempts=2, reason="driver")
    elif outcome is not None:
        comparison = Comparison(
            status="completed", relative_outcome=outcome, candidate_checkpoint=version, reference_checkpoint=ref
        )
    teacher = None
    if rng.random() < 0.2:
        teacher = TeacherSignal(status="complete", backend="oracle", boundary=rng.random() < 0.5)
    return Episode(
        environment=rng.choice(ENVIRONMENTS),
        task_id=f"t{rng.randrange(50)}",
        trajectory=[step],
        outcome=rng.choice(["success", "failure", "partial"]),
        reward=0.0,
        env_reward=0.0,
        policy_version=version,
        comparison=comparison,
        teacher_signal=teacher,
        admission_status="admitted",
    )


class Driver:
    """Takes one random legal control action per ``step()`` call."""

    def __init__(self, plane: ControlPlane, seed: int, tensor_mb: float = 0.05) -> None:
        self.plane = plane
        self.rng = random.Random(seed)
        self.numel = max(1, int(tensor_mb * 1024 * 1024 / 4))
        self.counter = len(plane.state.lineage.checkpoints)

    def _save(self, parent: str | None) -> str:
        self.counter += 1
        cid = f"c{self.counter:04d}-{self.rng.randrange(1 << 30):08x}"
        tensors = {"w": torch.full((self.numel,), float(self.counter))}
        self.plane.save_checkpoint(cid, tensors, {"n": self.counter}, parent=parent)
        return cid

    def step(self) -> str:
        plane, rng = self.plane, self.rng
        lin = plane.state.lineage
        if lin.active is None:
            plane.initialize(self._save(None))
            return "initialize"
        epoch = plane.state.ledger.open_epoch
        if lin.frozen and rng.random() < 0.3:
            plane.unfreeze()
            return "unfreeze"
        if epoch is None and not lin.frozen and rng.random() < 0.1:  # shell train's gated updates: no epoch
            if lin.active != lin.last_stable and rng.random() < 0.5:
                plane.promote("driver: validation better")
                return "promote"
            plane.complete_update(self._save(lin.active), in_epoch=False)
            return "update_outside_epoch"
        if epoch is None:
            last = plane.state.ledger.current
            carry = last.monitored if last is not None and last.close_reason == "promoted" else []
            plane.open_epoch(carry)
            return "open_epoch"
        if epoch.phase == "collection":
            episode = make_episode(rng, lin.active)
            admitted = rng.random() < 0.85
            plane.record_episode(episode, admitted=admitted, lane=None if admitted else "neutral")
            return "record_episode"
        if epoch.phase == "update":
            if lin.frozen or rng.random() < 0.1:
                plane.fail_update("driver: simulated failure" if not lin.frozen else "frozen")
                return "fail_update"
            plane.complete_update(self._save(lin.active))
            return "complete_update"
        # monitoring
        if rng.random() < 0.05 and (lin.pre_update_ref or lin.last_stable) not in (None, lin.active):
            plane.rollback("driver: operator rollback")
            return "manual_rollback"
        outcome = rng.choice(["better", "same", "same", "worse", "worse", "failed"])
        plane.record_comparison(make_episode(rng, lin.active, outcome, lin.pre_update_ref))
        decision = plane.pending_decision(coverage_ok=rng.random() < 0.9)
        if decision is not None:
            epoch = plane.state.ledger.open_epoch
            triggers = [r.episode_id for r in epoch.results if r.relative_outcome == "worse"]
            plane.close_epoch(decision, trigger_episodes=triggers if decision == "rollback" else ())
            return f"close:{decision}"
        return "record_comparison"


def main() -> None:
    run_dir, seed, steps = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    tensor_mb = float(sys.argv[4]) if len(sys.argv) > 4 else 0.05
    plane = ControlPlane(run_dir)
    driver = Driver(plane, seed, tensor_mb)
    print("ready", flush=True)
    for _ in range(steps):
        driver.step()
    print("done", flush=True)


if __name__ == "__main__":
    main()

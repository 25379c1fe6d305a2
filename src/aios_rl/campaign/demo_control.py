"""A scripted walk through the control plane with real updates of a tiny torch module.

Until the environments drive campaigns, this shows every safety transition on real checkpoints: an update
that is promoted, an update whose matched comparisons regress and is rolled back, and repeated rollbacks
that freeze the lineage. The comparison outcomes are scripted (the whole point is to reach each branch);
the updates, checkpoints, sha256 checks and committed events are real.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from aios_rl.contracts.episode import Comparison, Episode, Observation, Step
from aios_rl.contracts.errors import LineageError
from aios_rl.control.plane import ControlPlane

Report = Callable[[str], None]

# (epoch label, scripted matched-comparison outcomes after its update)
SCRIPT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("promotion", ("better", "same", "same", "better")),
    ("regression", ("worse", "same", "worse", "worse")),
    ("regression", ("worse", "worse", "worse")),
    ("regression", ("worse", "worse", "worse")),
    ("regression", ("worse", "worse", "worse")),
)


def _episode(task: int, policy_version: str, outcome: str | None = None, reference: str | None = None) -> Episode:
    step = Step(observation=Observation(text=f"demo task {task}"), action="stop", logprob=-0.7, entropy=0.69)
    comparison = None
    if outcome is not None:
        comparison = Comparison(
            status="completed",
            relative_outcome=outcome,
            candidate_checkpoint=policy_version,
            reference_checkpoint=reference,
        )
    return Episode(
        environment="demo",
        task_id=f"demo-{task:03d}",
        trajectory=[step],
        outcome="success",
        reward=1.0,
        env_reward=1.0,
        policy_version=policy_version,
        comparison=comparison,
        admission_status="admitted",
    )


def _update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, generator: torch.Generator) -> float:
    inputs = torch.randn(16, 4, generator=generator)  # (B, 4)
    targets = inputs.sum(dim=1, keepdim=True)  # (B, 1)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def run_control_demo(run_dir: Path, report: Report) -> ControlPlane:
    """Drive promotion, rollback and freeze through a fresh run directory; returns the (open) plane."""
    if (run_dir / "control.db").exists():
        raise LineageError(f"{run_dir} already holds a run; choose a new --run directory")
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    plane = ControlPlane(run_dir)
    try:  # a failure part-way must not keep the run's writer lock held until garbage collection

        def pointers() -> str:
            p = plane.state.lineage.pointers()
            return f"active={p['active']} pre_update_ref={p['pre_update_ref']} last_stable={p['last_stable']}"

        plane.save_checkpoint("ckpt-0000", model.state_dict(), {"note": "initial"})
        plane.initialize("ckpt-0000")
        report(f"initialised lineage: {pointers()}")
        task, version = 0, 0
        for label, outcomes in SCRIPT:
            plane.open_epoch()
            for _ in range(plane.config.ledger.batch_size):
                task += 1
                plane.record_episode(_episode(task, plane.state.lineage.active or ""), admitted=True)
            version += 1
            new_id = f"ckpt-{version:04d}"
            loss = _update(model, optimizer, generator)
            parent = plane.state.lineage.active
            plane.save_checkpoint(new_id, model.state_dict(), {"loss": loss}, parent=parent)
            plane.complete_update(new_id)
            epoch = plane.state.ledger.current.epoch
            report(f"epoch {epoch} ({label}): update loss={loss:.4f} -> {pointers()}")
            for outcome in outcomes:
                task += 1
                episode = _episode(task, new_id, outcome, parent)
                plane.record_comparison(episode)
                decision = plane.pending_decision()
                streak = plane.state.ledger.current.streak
                report(f"  comparison {episode.task_id}: {outcome:6s} streak={streak}")
                if decision is not None:
                    results = plane.state.ledger.current.results
                    trigger = [r.episode_id for r in results if r.relative_outcome == "worse"]
                    plane.close_epoch(decision, trigger_episodes=trigger if decision == "rollback" else ())
                    frozen = "  FROZEN" if plane.state.lineage.frozen else ""
                    report(f"  epoch closed: {decision} -> {pointers()}{frozen}")
                    break
        # One more update attempt shows the freeze holding.
        plane.open_epoch()
        for _ in range(plane.config.ledger.batch_size):
            task += 1
            plane.record_episode(_episode(task, plane.state.lineage.active or ""), admitted=True)
        try:
            plane.ensure_can_update()
        except LineageError as exc:
            report(f"update refused while frozen: {exc}")
    except BaseException:
        plane.close()
        raise
    return plane

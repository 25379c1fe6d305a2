"""The rollback diagnosis artifact ``RUN/rollbacks/<epoch>.json``: why an automatic rollback happened.

It is written *before* the rollback is committed (atomically: temporary file, fsync, rename), so a crash
between the two leaves a file that the resumed campaign rewrites with the same content and commits; a
committed rollback always has its diagnosis. Contents: the epoch and its update (checkpoint, data window,
sealed batch), the streak and threshold, the trigger episodes (the ``worse`` / ``comparison_failed``
results since the last ``better``, rejected episodes included; the admitted ones go to the negative lane)
with their matched comparisons (status, relative outcome, deciding rule, primary and secondary evidence,
both runs' outcomes), every comparison of the epoch, the pointers before and after, and the drill when one
caused the update.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aios_rl.campaign.online_update import load_episodes
from aios_rl.campaign.slots import reference_episode_id
from aios_rl.contracts.episode import Episode, utc_now
from aios_rl.control import lineage as lineage_rules
from aios_rl.control.plane import ControlPlane
from aios_rl.storage.files import write_text_atomic


def comparison_record(episode: Episode, reference: Episode | None) -> dict[str, Any]:
    """One monitored episode's matched comparison, as the diagnosis shows it."""
    comparison = episode.comparison
    return {
        "episode_id": episode.episode_id,
        "task_id": episode.task_id,
        "seed": episode.seed,
        "status": comparison.status if comparison else None,
        "relative_outcome": comparison.relative_outcome if comparison else None,
        "decided_by": comparison.reason if comparison else "",
        "primary_evidence": comparison.primary_evidence if comparison else {},
        "secondary_evidence": comparison.secondary_evidence if comparison else {},
        "candidate_checkpoint": comparison.candidate_checkpoint if comparison else episode.policy_version,
        "reference_checkpoint": comparison.reference_checkpoint if comparison else None,
        "candidate_outcome": episode.outcome,
        "reference_outcome": reference.outcome if reference is not None else None,
        "reference_episode_id": reference.episode_id if reference is not None else None,
    }


def rollback_diagnosis(
    *,
    epoch: int,
    reason: str,
    streak: int,
    threshold: int,
    update: dict[str, Any],
    triggers: Sequence[str],
    comparisons: Sequence[dict[str, Any]],
    pointers_before: dict[str, str | None],
    pointers_after: dict[str, str | None],
    frozen_after: bool,
    drill: str | None,
) -> dict[str, Any]:
    return {
        "epoch": epoch,
        "decision": "rollback",
        "reason": reason,
        "streak": streak,
        "rollback_threshold": threshold,
        "update": update,
        "trigger_episodes": list(triggers),
        "trigger_comparisons": [c for c in comparisons if c["episode_id"] in set(triggers)],
        "comparisons": list(comparisons),
        "pointers_before": pointers_before,
        "pointers_after": pointers_after,
        "frozen_after": frozen_after,
        "drill": drill,
        "written_at": utc_now(),
    }


def write_diagnosis(run_dir: Path, epoch: int | str, body: dict[str, Any]) -> Path:
    """Write ``RUN/rollbacks/<epoch>.json`` atomically (``epoch``: a number or a name); returns its path."""
    folder = run_dir / "rollbacks"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{epoch}.json"
    write_text_atomic(path, json.dumps(body, indent=2, sort_keys=True))
    return path


def write_rollback_diagnosis(
    plane: ControlPlane, campaign_id: str, reason: str, *, drill: str | None, drill_at: int
) -> list[str]:
    """Write the diagnosis of the rollback the open epoch is about to take; return its trigger episodes.

    The triggers are the streak: the ``worse`` / ``comparison_failed`` results back to the last ``better``,
    rejected episodes included (they feed the streak too; only the admitted ones sit in a lane to move).
    ``drill`` is named in the file only when the epoch's update was the drilled one (update ``drill_at``).
    """
    state = plane.state
    epoch, lineage = state.ledger.open_epoch, state.lineage
    assert epoch is not None and lineage.active is not None
    monitored = load_episodes(plane, compared_since_update(plane))
    triggers: list[str] = []
    for episode in reversed(monitored):
        comparison = episode.comparison
        if comparison is None or comparison.relative_outcome == "better":
            break
        if comparison.status == "comparison_failed" or comparison.relative_outcome == "worse":
            triggers.insert(0, episode.episode_id)
    refs = load_episodes(plane, [reference_episode_id(campaign_id, e.episode_id) for e in monitored])
    record = lineage.checkpoints[lineage.active]
    after = lineage_rules.rollback(lineage, reason, max_consecutive=plane.config.max_consecutive_rollbacks)
    body = rollback_diagnosis(
        epoch=epoch.epoch,
        reason=reason,
        streak=epoch.streak,
        threshold=plane.config.ledger.rollback_threshold,
        update={
            "checkpoint": record.checkpoint_id,
            "parent": record.parent,
            "data_window": record.data_window,
            "sealed_batch": epoch.sealed,
        },
        triggers=triggers,
        comparisons=[comparison_record(e, r) for e, r in zip(monitored, refs, strict=True)],
        pointers_before=lineage.pointers(),
        pointers_after=after.pointers(),
        frozen_after=after.frozen,
        drill=drill if drill is not None and lineage.updates == drill_at else None,
    )
    write_diagnosis(plane.run_dir, epoch.epoch, body)
    return triggers


def compared_since_update(plane: ControlPlane) -> list[str]:
    """Every episode compared since the latest update, admitted or not, in commit order (the open monitoring
    epoch's, over all its windows; ``EpochState.monitored`` holds only the admitted ones)."""
    compared: list[str] = []
    for event in plane.store.events():
        if event.kind == "update.completed":
            compared = []
        elif event.kind == "comparison.recorded":
            compared.append(event.payload["episode_id"])
    return compared

"""One online update of a campaign: the sealed micro-batch plus replay lanes → a new checkpoint.

The data (deterministic given the committed state, so a resumed campaign trains on exactly the same):

* the sealed batch (its ``diagnostic_only`` members excluded: the teacher flagged them as borderline),
  plus a quota-sized sample of the other entries of the **positive** and **neutral** lanes (those within
  the trainer's ``max_staleness``) → an importance-weighted policy gradient
  (:func:`~aios_rl.algos.grpo.offline_update`; an online micro-batch holds one episode per task, so there
  are no GRPO groups, and replayed episodes from older checkpoints need the ratio correction);
* the teacher's reference actions on the states of the batch and the positive lane → distillation;
* a sample of the **negative** lane → the KL term that penalises moving away from the pre-update policy
  on the states where an earlier update did worse than its reference.

The trainer (weights, optimiser state, RNG) is restored from the ``active`` checkpoint before every
update, so the result depends only on the store, not on what the process did before a kill.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from aios_rl.algos.batch import negative_states
from aios_rl.algos.distill import distill_from_episodes
from aios_rl.algos.grpo import offline_update
from aios_rl.algos.trainer import Trainer, UpdateStats
from aios_rl.campaign.drills import harmful_update
from aios_rl.campaign.online_config import CampaignConfig
from aios_rl.campaign.students import restore_student
from aios_rl.contracts.episode import Episode
from aios_rl.contracts.errors import StorageError
from aios_rl.control.plane import ControlPlane
from aios_rl.control.replay import route_episode

ENV_VERSIONS = {"shell": "bugfix-v1"}
# The lanes the policy gradient replays (importance-weighted, so bounded in staleness); the negative lane
# feeds the KL term toward the pre-update policy on its states, which needs no ratio.
REPLAYED_LANES = ("positive", "neutral")


@dataclass(frozen=True)
class UpdateData:
    """What one update trains on."""

    batch: list[Episode]
    positive: list[Episode]
    neutral: list[Episode]
    negative: list[Episode]

    @property
    def policy_gradient(self) -> list[Episode]:
        return self.batch + self.positive + self.neutral

    @property
    def window(self) -> list[str]:
        """The episode ids recorded as the new checkpoint's data window."""
        return [e.episode_id for e in self.policy_gradient]


def load_episodes(plane: ControlPlane, ids: Sequence[str]) -> list[Episode]:
    """Stored episodes, in the order asked for.

    Raises:
        StorageError: an id the ledger names is not in the store.
    """
    bodies = plane.store.episode_bodies(ids)
    missing = [i for i in ids if i not in bodies]
    if missing:
        raise StorageError(f"{plane.run_dir}: episodes {missing[:3]} are in the ledger but not in the store")
    return [Episode.model_validate_json(bodies[i]) for i in ids]


def update_data(plane: ControlPlane, seed: int, *, max_staleness: int) -> UpdateData:
    """The sealed batch of the open epoch and this update's lane samples.

    The positive and neutral quotas are drawn from the episodes at most ``max_staleness`` updates old (the
    trainer's bound, :func:`replay_staleness`): the offline update drops older ones, so a quota drawn from
    the whole lane would be spent on episodes it never trains on while fresh ones stay in the lane.
    """
    epoch = plane.state.ledger.open_epoch
    assert epoch is not None and epoch.phase == "update"
    pool = plane.state.replay
    sealed = set(epoch.sealed)
    # The batch is already in its lanes (routed as it was collected): draw the quotas from the other entries,
    # so a lane sample is not cut short by batch members (and a lane holding only the batch reports starving).
    others = [e for e in pool.entries if e.episode_id not in sealed]
    stale = stale_replay(plane, [e.episode_id for e in others if e.lane in REPLAYED_LANES], max_staleness)
    rest = pool.model_copy(update={"entries": tuple(e for e in others if e.episode_id not in stale)})
    pick = rest.sample(plane.config.replay.quotas(), rng_seed=(seed * 1009 + epoch.epoch) % (1 << 31))
    # diagnostic_only is read from the episode's own teacher flag, as it was routed: the lane may have evicted
    # it since (capacity), and an evicted boundary case is still never trained on.
    batch = [e for e in load_episodes(plane, epoch.sealed) if route_episode(e) != "diagnostic_only"]
    return UpdateData(
        batch,
        load_episodes(plane, pick["positive"]),
        load_episodes(plane, pick["neutral"]),
        load_episodes(plane, pick["negative"]),
    )


def stale_replay(plane: ControlPlane, ids: Sequence[str], max_staleness: int) -> set[str]:
    """The episodes of ``ids`` more than ``max_staleness`` updates old (ids not in the store are left to
    :func:`load_episodes` to report)."""
    versions = plane.store.episode_policy_versions(ids)
    found = [i for i in ids if i in versions]
    ages = replay_staleness(plane, [versions[i] for i in found])
    return {i for i, age in zip(found, ages, strict=True) if age > max_staleness}


def registered_update(plane: ControlPlane, active: str, window: list[str]) -> str | None:
    """A checkpoint trained from ``active`` on ``window`` and registered, but never applied (a kill between
    the two commits): applying it again is exactly what the interrupted campaign was doing."""
    for record in plane.state.lineage.checkpoints.values():
        if record.parent == active and record.data_window == window and record.verdict is None:
            return record.checkpoint_id
    return None


def next_checkpoint_id(plane: ControlPlane) -> str:
    """The first ``ckpt-NNNN`` neither registered nor on disk (a kill may leave unregistered files)."""
    n = 0
    while (
        f"ckpt-{n:04d}" in plane.state.lineage.checkpoints or plane.checkpoints.path(f"ckpt-{n:04d}").exists()
    ):
        n += 1
    return f"ckpt-{n:04d}"


def train_update(
    plane: ControlPlane,
    config: CampaignConfig,
    data: UpdateData,
    *,
    label: str,
    with_teacher: bool,
    drilled: bool,
) -> tuple[str, UpdateStats]:
    """Train from ``active`` on ``data``, save and register the checkpoint (not yet applied).

    Raises:
        TrainingError: nothing trainable, or a non-finite loss (the caller records ``update.failed``).
    """
    active = plane.state.lineage.active
    epoch = plane.state.ledger.open_epoch
    assert active is not None and epoch is not None
    tensors, meta = plane.load_checkpoint(active)
    source = f"checkpoint {plane.run_dir}:{active}"
    trainer = Trainer(restore_student(meta["policy"], tensors, source=source), config.trainer)
    trainer.load_state_tensors(tensors, meta)
    reference = restore_student(meta["policy"], tensors, source=source)  # pre-update: negative-lane KL
    distill = distill_from_episodes(data.batch + data.positive) if with_teacher else None
    train = data.policy_gradient
    if drilled:
        stats = harmful_update(
            trainer, train, distill, steps=config.drill_steps, lr_scale=config.drill_lr_scale
        )
    else:
        staleness = replay_staleness(plane, [e.policy_version for e in train])
        negative = negative_states(data.negative) if data.negative else None
        generator = torch.Generator().manual_seed(config.seed * 7919 + epoch.epoch)
        stats = offline_update(
            trainer,
            train,
            staleness,
            generator=generator,
            distill=distill,
            negative=negative,
            reference=reference,
        )
    tensors, meta = trainer.state_tensors()
    meta["label"] = label
    # Kept with the checkpoint: a campaign killed before applying it applies it on resume, numbers included.
    meta["update_metrics"] = {k: v for k, v in stats.metrics().items() if math.isfinite(v)}
    checkpoint_id = next_checkpoint_id(plane)
    plane.save_checkpoint(
        checkpoint_id,
        tensors,
        meta,
        parent=active,
        config_hash=config.config_hash(),
        data_window=data.window,
        teacher_backend=config.teacher if with_teacher else None,
        env_versions=ENV_VERSIONS,
    )
    return checkpoint_id, stats


def replay_staleness(plane: ControlPlane, versions: Sequence[str]) -> list[int]:
    """Updates between the checkpoint that collected each episode (its ``policy_version``) and ``active``,
    along the lineage tree: up from that checkpoint to the nearest one ``active`` descends from, then down to
    ``active``. After a rollback an episode of the rolled-back branch is as old as the updates on both sides
    of the fork (its depth minus ``active``'s could be 0 or negative and passed it as fresh). A version that
    is no registered checkpoint is older than any bound."""
    records = plane.state.lineage.checkpoints
    depth = lineage_depths(plane)
    active = plane.state.lineage.active
    above: set[str] = set()  # active and its ancestors
    node = active
    while node is not None:
        above.add(node)
        node = records[node].parent
    ages = []
    for version in versions:
        fork = version if version in records else None
        while fork is not None and fork not in above:
            fork = records[fork].parent
        ages.append(1 << 20 if fork is None or active is None
                    else depth[version] - depth[fork] + depth[active] - depth[fork])
    return ages


def lineage_depths(plane: ControlPlane) -> dict[str, int]:
    """Updates between each checkpoint and the lineage root."""
    records = plane.state.lineage.checkpoints
    depth: dict[str, int] = {}
    for cid in records:  # registration order: a parent is always registered before its children
        parent = records[cid].parent
        depth[cid] = 0 if parent is None else depth[parent] + 1
    return depth

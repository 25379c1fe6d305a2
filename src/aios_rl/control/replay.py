"""The replay pool: four lanes, deterministic routing, per-lane capacity and per-update sampling quotas.

ARCHITECTURE §5 (authoritative over the original, reference §5). Routing is deterministic, first match
wins: teacher ``boundary`` → ``diagnostic_only`` (analysis only, never trained on); ``worse`` →
``negative`` (KL-regularisation targets); ``better`` → ``positive`` (PPO/GRPO samples and distillation
targets); otherwise → ``neutral`` (diversity sampling). Unlike the original, ``comparison_failed`` is not
diagnostic-only: with no boundary flag it lands in ``neutral``, and its (untrusted) relative outcome is
ignored.

:class:`ReplayPool` is an immutable value: every operation returns a new pool, so the control-plane
reducer can fold events into it and snapshot it as JSON (``model_dump`` / ``model_validate``).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping

import numpy as np
from pydantic import Field, model_validator

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import LANES, ComparisonStatus, Episode, Lane, Record, RelativeOutcome
from aios_rl.contracts.errors import ConfigError, ContractError

__all__ = ["route", "route_episode", "ReplayConfig", "LaneEntry", "ReplayPool"]

logger = logging.getLogger(__name__)

# Lanes already reported starving in this process: a long run samples once per update, and a lane that
# stays short would repeat the same warning every epoch. The first time is a WARNING, later ones DEBUG.
_STARVING_WARNED: set[Lane] = set()


def route(
    *, boundary: bool, relative_outcome: RelativeOutcome | None, comparison_status: ComparisonStatus | None
) -> Lane:
    """The lane of an episode, first match wins.

    1. ``boundary`` (the teacher marked a borderline case) → ``diagnostic_only``.
    2. ``relative_outcome == "worse"`` → ``negative``.
    3. ``relative_outcome == "better"`` → ``positive``.
    4. anything else (``same``, no comparison, ``comparison_failed``) → ``neutral``.

    ``relative_outcome`` is ignored when ``comparison_status == "comparison_failed"``: a failed comparison
    has no trustworthy outcome. ``comparison_status=None`` (no status known) trusts ``relative_outcome``.
    Total and deterministic over every input combination.

    Example:
        >>> route(boundary=False, relative_outcome="worse", comparison_status="completed")
        'negative'
    """
    if boundary:
        return "diagnostic_only"
    if comparison_status == "comparison_failed":
        return "neutral"
    if relative_outcome == "worse":
        return "negative"
    if relative_outcome == "better":
        return "positive"
    return "neutral"


def route_episode(episode: Episode, *, rollback_batch: bool = False) -> Lane:
    """Route an episode from its teacher signal and comparison (see :func:`route`).

    ``rollback_batch`` marks an episode of a batch that caused a rollback: it goes to ``negative`` whatever
    its comparison says, unless the teacher marked it as a boundary case (still ``diagnostic_only``). The
    teacher's ``boundary`` flag is read as recorded, whatever the teacher's status.
    """
    boundary = episode.teacher_signal is not None and episode.teacher_signal.boundary
    if rollback_batch and not boundary:
        return "negative"
    comparison = episode.comparison
    return route(
        boundary=boundary,
        relative_outcome=comparison.relative_outcome if comparison is not None else None,
        comparison_status=comparison.status if comparison is not None else None,
    )


class ReplayConfig(ConfigModel):
    """Per-lane capacity (oldest-first eviction) and per-update sampling quota."""

    positive_capacity: int = Field(default=512, ge=1, description="Most entries kept in the positive lane.")
    neutral_capacity: int = Field(default=512, ge=1, description="Most entries kept in the neutral lane.")
    negative_capacity: int = Field(default=256, ge=1, description="Most entries kept in the negative lane.")
    diagnostic_only_capacity: int = Field(
        default=256, ge=1, description="Most entries kept in the diagnostic_only lane."
    )
    positive_quota: int = Field(default=8, ge=0, description="Positive-lane episodes sampled per update.")
    neutral_quota: int = Field(default=4, ge=0, description="Neutral-lane episodes sampled per update.")
    negative_quota: int = Field(default=4, ge=0, description="Negative-lane episodes sampled per update.")
    diagnostic_only_quota: int = Field(
        default=0, ge=0, description="Must stay 0: diagnostic_only episodes are never trained on."
    )

    @model_validator(mode="after")
    def _check(self) -> ReplayConfig:
        if self.diagnostic_only_quota != 0:
            raise ConfigError(
                f"replay.diagnostic_only_quota={self.diagnostic_only_quota}: the diagnostic_only lane is "
                "never trained on; set it to 0"
            )
        return self

    def capacity(self, lane: Lane) -> int:
        """Capacity of ``lane``."""
        return int(getattr(self, f"{lane}_capacity"))

    def quotas(self) -> dict[Lane, int]:
        """Sampling quota of every lane, in :data:`LANES` order."""
        return {lane: int(getattr(self, f"{lane}_quota")) for lane in LANES}


class LaneEntry(Record):
    """One episode's membership of a replay lane."""

    episode_id: str = Field(min_length=1)
    lane: Lane
    environment: str = Field(min_length=1)
    epoch: int = Field(ge=0, description="Ledger epoch the episode was routed in (0 before the first).")
    task_id: str = Field(description="Task the episode ran.")
    seq: int | None = Field(
        default=None, ge=0, description="Insertion order; assigned by ReplayPool.add when left None."
    )


class ReplayPool(Record):
    """Immutable replay pool. ``entries`` is ordered by ``seq`` (insertion order, oldest first).

    Invariants (checked on validation, so a corrupt snapshot is rejected): episode ids are unique, every
    entry has a ``seq`` below ``next_seq``, and seqs increase along ``entries``. Capacities live in
    :class:`ReplayConfig`, passed to the operations that insert.
    """

    entries: tuple[LaneEntry, ...] = ()
    next_seq: int = Field(default=0, ge=0, description="The seq the next inserted entry receives.")

    @model_validator(mode="after")
    def _check(self) -> ReplayPool:
        ids = [e.episode_id for e in self.entries]
        if len(set(ids)) != len(ids):
            raise ValueError("replay pool holds a duplicate episode_id")
        seqs = [e.seq for e in self.entries]
        if any(s is None for s in seqs) or seqs != sorted(set(seqs)) or (seqs and seqs[-1] >= self.next_seq):
            raise ValueError("replay pool entries need distinct increasing seqs below next_seq")
        return self

    def add(self, entry: LaneEntry, config: ReplayConfig | None = None) -> ReplayPool:
        """Insert ``entry`` into its lane, evicting that lane's oldest entries beyond capacity.

        Idempotent on ``episode_id``: if an entry with that id is in the pool (in any lane) the pool is
        returned unchanged. An id that was evicted earlier is accepted again as a new entry. The entry's
        ``seq`` is assigned here when None; a given ``seq`` must be >= ``next_seq`` (insertion order).

        Raises:
            ContractError: ``entry.seq`` is smaller than ``next_seq``.
        """
        if any(e.episode_id == entry.episode_id for e in self.entries):
            logger.debug("replay: episode %s already in the pool; add ignored", entry.episode_id)
            return self
        seq = self.next_seq if entry.seq is None else entry.seq
        if seq < self.next_seq:
            raise ContractError(f"replay: entry seq {seq} is older than the pool's next_seq {self.next_seq}")
        stored = entry.model_copy(update={"seq": seq})
        return self._insert(stored, config if config is not None else ReplayConfig())

    def move(self, episode_id: str, lane: Lane, config: ReplayConfig | None = None) -> ReplayPool:
        """Move an entry to ``lane`` as its newest member (e.g. rollback-causing episodes → ``negative``).

        A no-op when the id is not in the pool (never routed, or evicted) or already in ``lane``. The
        target lane evicts its oldest entries beyond capacity.
        """
        current = next((e for e in self.entries if e.episode_id == episode_id), None)
        if current is None or current.lane == lane:
            return self
        rest = tuple(e for e in self.entries if e.episode_id != episode_id)
        moved = current.model_copy(update={"lane": lane, "seq": self.next_seq})
        config = config if config is not None else ReplayConfig()
        return self.model_copy(update={"entries": rest})._insert(moved, config)

    def _insert(self, entry: LaneEntry, config: ReplayConfig) -> ReplayPool:
        assert entry.seq is not None and entry.seq >= self.next_seq
        entries = (*self.entries, entry)
        excess = sum(e.lane == entry.lane for e in entries) - config.capacity(entry.lane)
        if excess > 0:
            # entries are in seq order, so the first ``excess`` members of the lane are its oldest.
            oldest = [e.episode_id for e in entries if e.lane == entry.lane][:excess]
            evicted = set(oldest)
            entries = tuple(e for e in entries if e.episode_id not in evicted)
            logger.debug("replay: lane %s over capacity, evicted %s", entry.lane, oldest)
        # model_copy skips re-validation: the invariants hold by construction and pools grow to thousands.
        return self.model_copy(update={"entries": entries, "next_seq": entry.seq + 1})

    def query(
        self, lane: Lane | None = None, environment: str | None = None, epoch: int | None = None
    ) -> list[LaneEntry]:
        """Entries matching every given filter, oldest first."""
        return [
            e
            for e in self.entries
            if (lane is None or e.lane == lane)
            and (environment is None or e.environment == environment)
            and (epoch is None or e.epoch == epoch)
        ]

    def counts(self) -> dict[Lane, int]:
        """Number of entries per lane, every lane present, in :data:`LANES` order."""
        return {lane: sum(e.lane == lane for e in self.entries) for lane in LANES}

    def sample(self, quotas: Mapping[Lane, int], rng_seed: int) -> dict[Lane, list[str]]:
        """Sample episode ids per lane, without replacement, up to each lane's quota.

        Deterministic for a given pool, quotas and seed. Each lane draws from its own stream seeded by
        ``(rng_seed, lane index)``, so changing one lane's quota or contents leaves the others' draws
        unchanged. Lanes missing from ``quotas`` get 0. A lane holding fewer entries than its quota gives
        all of them and logs "lane starving": a warning the first time that lane starves in this process,
        at debug level afterwards.

        Args:
            quotas: episodes wanted per lane, e.g. :meth:`ReplayConfig.quotas`.
            rng_seed: non-negative seed.

        Returns:
            Every lane mapped to its sampled episode ids (in draw order; empty when its quota is 0).

        Raises:
            ConfigError: an unknown lane, a negative quota, a positive ``diagnostic_only`` quota, or a
                negative seed.
        """
        _check_quotas(quotas)
        if rng_seed < 0:
            raise ConfigError(f"replay.sample: rng_seed must be >= 0, got {rng_seed}")
        result: dict[Lane, list[str]] = {}
        for index, lane in enumerate(LANES):
            quota = int(quotas.get(lane, 0))
            ids = [e.episode_id for e in self.entries if e.lane == lane]
            if 0 < quota and len(ids) < quota:
                _log_starving(lane, len(ids), quota)
            take = min(quota, len(ids))
            rng = np.random.default_rng([rng_seed, index])
            result[lane] = [ids[i] for i in rng.choice(len(ids), size=take, replace=False)] if take else []
        return result


def _log_starving(lane: Lane, entries: int, quota: int) -> None:
    if lane in _STARVING_WARNED:
        logger.debug("replay: lane %s starving: %d entries for quota %d", lane, entries, quota)
        return
    _STARVING_WARNED.add(lane)
    logger.warning("replay: lane %s starving: %d entries for quota %d (repeats are logged at DEBUG)",
                   lane, entries, quota)


def _check_quotas(quotas: Mapping[Lane, int]) -> None:
    for lane, quota in quotas.items():
        if lane not in LANES:
            close = difflib.get_close_matches(str(lane), LANES, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; lanes: {', '.join(LANES)}"
            raise ConfigError(f"replay.sample: unknown lane '{lane}'{hint}")
        if quota < 0:
            raise ConfigError(f"replay.sample: quota of lane {lane} must be >= 0, got {quota}")
    if quotas.get("diagnostic_only", 0) > 0:
        raise ConfigError("replay.sample: the diagnostic_only lane is never trained on; its quota must be 0")

"""Configuration and summary of `aios-rl shell campaign` (the controller: :mod:`aios_rl.campaign.online`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from aios_rl.algos.trainer import TrainerConfig
from aios_rl.campaign.drills import Drill
from aios_rl.campaign.slots import slot_event_id
from aios_rl.campaign.students import StudentConfig
from aios_rl.contracts.config import (
    MAX_PASSES,
    MAX_SEED,
    MAX_TORCH_THREADS,
    MIN_SEED,
    ConfigModel,
    validate_stored,
)
from aios_rl.contracts.errors import ConfigError
from aios_rl.control.compare import CompareConfig
from aios_rl.control.events import ControlConfig
from aios_rl.control.plane import ControlPlane
from aios_rl.control.reward import RewardConfig
from aios_rl.envs.shell.env import ShellEnvConfig
from aios_rl.storage.db import RunStore
from aios_rl.teacher.gateway import TeacherConfig, canonical_teacher_spec, with_api_key_of

CAMPAIGN_KEY = "campaign"  # run meta: {"config", "campaign_id", "tasks_dir"}
MAX_CAMPAIGN_TASKS = 1_000_000  # each slot runs an episode: more is a typo, and a campaign that never ends


class CampaignConfig(ConfigModel):
    """Everything `aios-rl shell campaign` does; stored with the run so the directory reproduces it.

    The micro-batch size, rollback threshold, monitoring window and freeze rule live in ``control``
    (``--online-batch-size`` is ``control.ledger.batch_size``, ``--rollback-threshold`` is
    ``control.ledger.rollback_threshold``).
    """

    max_tasks: int = Field(
        default=24, ge=1, le=MAX_CAMPAIGN_TASKS,
        description="Task slots to run (a resume may raise it; at most 1000000).",
    )
    seed: int = Field(
        default=0, ge=MIN_SEED, le=MAX_SEED,
        description="Seeds the task order, the episodes and the student.",
    )
    torch_threads: int = Field(
        default=1, ge=1, le=MAX_TORCH_THREADS, description="CPU threads for the student."
    )
    temperature: float = Field(default=1.0, gt=0, description="Sampling temperature of campaign episodes.")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus mass of campaign episodes.")
    teacher: str = Field(default="oracle", description="none, or teacher backends in fallback order.")
    teacher_config: TeacherConfig = Field(
        default_factory=lambda: TeacherConfig(backend="oracle"), description="Teacher gateway settings."
    )
    require_teacher: bool = Field(
        default=True, description="With a teacher, admit only episodes it answered (complete/fallback)."
    )
    warm_start_epochs: int = Field(
        default=3, ge=0, le=MAX_PASSES,
        description="Oracle-demonstration distillation passes for the initial checkpoint (at most 100000).",
    )
    drill: Drill = Field(default="none", description="none | bad-update | crash-after-update.")
    drill_at: int = Field(default=1, ge=1, description="The update the drill acts on (1 = the first).")
    drill_steps: int = Field(default=20, ge=1, description="bad-update: unlikelihood steps.")
    drill_lr_scale: float = Field(default=10.0, gt=0, description="bad-update: learning-rate multiplier.")
    compare: CompareConfig = Field(default_factory=CompareConfig, description="Matched comparison settings.")
    control: ControlConfig = Field(
        default_factory=ControlConfig, description="Ledger, lanes and freeze rule."
    )
    student: StudentConfig = Field(
        default_factory=StudentConfig, description="Which student and its settings."
    )
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="Update hyperparameters.")
    reward: RewardConfig = Field(default_factory=RewardConfig, description="Reward fusion.")
    env: ShellEnvConfig = Field(default_factory=ShellEnvConfig, description="Shell environment settings.")

    @field_validator("teacher")
    @classmethod
    def _canonical_teacher(cls, spec: str) -> str:
        return canonical_teacher_spec(spec)  # 'Oracle' is the oracle, first, as in shell train


# Trainer settings no campaign update reads: offline_update has no clipped surrogate (advantage estimator,
# eps_low/eps_high, agg), no value head or GAE (value_coef, value_clip, gamma, lam), no GiGPO step advantage
# (step_*), and a campaign has no self-imitation archive.
CAMPAIGN_UNUSED_TRAINER_FIELDS = (
    "advantage", "eps_low", "eps_high", "agg", "value_coef", "value_clip", "gamma", "lam",
    "step_advantage_coef", "step_gamma", "self_imitation_coef",
)


def check_trainer(trainer: TrainerConfig) -> None:
    """Refuse update settings a new campaign would silently not use (a stored campaign keeps its own).

    Raises:
        ConfigError: ``trainer.algo`` is ``ppo``, or a field of :data:`CAMPAIGN_UNUSED_TRAINER_FIELDS` differs
            from its default: every campaign update is the importance-weighted policy gradient of
            :func:`aios_rl.algos.grpo.offline_update`, which has no value head or GAE and reads none of them.
    """
    if trainer.algo == "ppo":
        raise ConfigError(
            "trainer.algo 'ppo' is not available in a campaign: its updates are always an "
            "importance-weighted policy gradient on the micro-batch and replay lanes; remove trainer.algo "
            "(PPO runs with `aios-rl shell train --algo ppo`)"
        )
    defaults = TrainerConfig()
    unused = [f"trainer.{name} ({getattr(trainer, name)!r})" for name in CAMPAIGN_UNUSED_TRAINER_FIELDS
              if getattr(trainer, name) != getattr(defaults, name)]
    if unused:
        raise ConfigError(
            f"{', '.join(unused)}: never read by a campaign, whose updates are always an importance-weighted "
            "policy gradient on the micro-batch and replay lanes (no clipped surrogate, GAE, step-level "
            "advantage or self-imitation); remove them (they are `aios-rl shell train` settings)"
        )


def resume_config(
    stored: CampaignConfig, given: CampaignConfig | None, overrides: dict[str, Any]
) -> CampaignConfig:
    """The stored config, with ``max_tasks`` raisable; anything else given must equal what is stored.

    Args:
        stored: the configuration the campaign started with.
        given: a full config (``--config FILE``), or None; its ``max_tasks`` counts only when set in it.
        overrides: dotted CLI values; None means the flag was not given.

    Raises:
        ConfigError: naming every value that differs from the stored one.
    """
    differ = []
    if given is not None:  # the API key is never stored: the one given now is kept
        stored = stored.model_copy(update={"teacher_config": with_api_key_of(stored.teacher_config,
                                                                             given.teacher_config)})
    if given is not None:
        # control.semantics is the run's own: the stored fold rules, whatever today's default is.
        control = given.control.model_copy(update={"semantics": stored.control.semantics})
        if given.model_copy(update={"max_tasks": stored.max_tasks, "control": control}) != stored:
            differ.append("--config file")
    flat = stored.model_dump(mode="json")
    for key, value in overrides.items():
        if value is None or key == "max_tasks":
            continue
        if key == "teacher":  # stored canonically: `--teacher Oracle` resumes a run it started
            value = canonical_teacher_spec(value)
        node: Any = flat
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != value:
            differ.append(f"{key} (stored {node!r}, given {value!r})")
    if differ:
        raise ConfigError(
            f"--resume keeps the campaign's stored configuration; these differ: {', '.join(differ)} "
            "(only --max-tasks may change; start a new --run to change the rest)"
        )
    # A config file that leaves max_tasks out keeps the stored value, not the field's default.
    given_max = given.max_tasks if given is not None and "max_tasks" in given.model_fields_set else None
    max_tasks = overrides.get("max_tasks")
    if max_tasks is None:
        max_tasks = given_max or stored.max_tasks
    if max_tasks < 1:  # the field's own bound: model_copy does not validate
        raise ConfigError(f"max_tasks (--max-tasks) must be >= 1, got {max_tasks}; pass a positive number")
    if max_tasks > MAX_CAMPAIGN_TASKS:  # the field's other bound: a typo, and a campaign that never ends
        raise ConfigError(f"max_tasks (--max-tasks) must be at most {MAX_CAMPAIGN_TASKS}, got {max_tasks}; "
                          "each task slot runs an episode")
    return stored.model_copy(update={"max_tasks": max_tasks})


def stored_campaign(run_dir: Path) -> dict[str, Any] | None:
    """The campaign meta of ``run_dir`` (read-only; None when it holds no campaign)."""
    path = Path(run_dir) / "control.db"
    if not path.exists():
        return None
    with RunStore(path) as store:
        meta = store.get_meta(CAMPAIGN_KEY)
    return meta if isinstance(meta, dict) else None


def stored_config(run_dir: Path) -> CampaignConfig | None:
    """The configuration the campaign in ``run_dir`` started with (None when there is none)."""
    meta = stored_campaign(run_dir)
    return None if meta is None else validate_stored_config(meta["config"], run_dir)


def validate_stored_config(stored: dict[str, Any], run_dir: Path) -> CampaignConfig:
    """A campaign's stored configuration, validated by this version's rules (see
    :func:`~aios_rl.contracts.config.validate_stored`: ``cannot resume RUN_DIR:`` and each problem)."""
    return validate_stored(CampaignConfig, stored, run_dir, "resume")


@dataclass
class CampaignSummary:
    """Where a campaign stands (printed by the CLI; ``--json`` prints :meth:`as_json`)."""

    run: str
    status: str  # completed | frozen
    tasks_run: int
    max_tasks: int
    updates: int
    failed_updates: int
    promotions: int
    rollbacks: int
    frozen: bool
    admitted: int
    rejected: int
    comparisons: dict[str, int]
    lanes: dict[str, int]
    pointers: dict[str, str | None]
    epoch: int | None
    phase: str | None
    streak: int
    rollback_files: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def campaign_summary(
    plane: ControlPlane, campaign_id: str, status: str, tasks_run: int, max_tasks: int
) -> CampaignSummary:
    """The summary of a campaign from its store (comparisons and admissions counted from the slot events)."""
    state = plane.state
    comparisons = {"better": 0, "same": 0, "worse": 0, "failed": 0}
    admitted = rejected = failed_updates = 0
    prefix = slot_event_id(campaign_id, 0)[:-1]
    for event in plane.store.events():
        failed_updates += event.kind == "update.failed"
        if not event.event_id.startswith(prefix):
            continue
        admitted += bool(event.payload.get("admitted"))
        rejected += not event.payload.get("admitted")
        if event.kind == "comparison.recorded":
            failed = event.payload["status"] == "comparison_failed"
            comparisons["failed" if failed else event.payload["relative_outcome"]] += 1
    epoch = state.ledger.current
    return CampaignSummary(
        run=str(plane.run_dir),
        status=status,
        tasks_run=tasks_run,
        max_tasks=max_tasks,
        updates=state.lineage.updates,
        failed_updates=failed_updates,
        promotions=state.lineage.promotions,
        rollbacks=state.lineage.rollbacks,
        frozen=state.lineage.frozen,
        admitted=admitted,
        rejected=rejected,
        comparisons=comparisons,
        lanes=dict(state.replay.counts()),
        pointers=state.lineage.pointers(),
        epoch=epoch.epoch if epoch else None,
        phase=epoch.phase if epoch else None,
        streak=epoch.streak if epoch else 0,
        rollback_files=sorted(str(p) for p in (plane.run_dir / "rollbacks").glob("*.json")),
    )

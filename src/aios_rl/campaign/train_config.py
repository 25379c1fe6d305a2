"""`shell train`'s configuration, and how a stored one is resolved when its run resumes: settings added
after a run was stored take the value it ran with, and defaults that changed keep the stored one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from aios_rl.algos.trainer import TrainerConfig
from aios_rl.campaign.students import StudentConfig
from aios_rl.campaign.validation import ValidationConfig
from aios_rl.contracts.config import (
    MAX_GROUP_SIZE,
    MAX_PASSES,
    MAX_SEED,
    MAX_TORCH_THREADS,
    MAX_WORKERS,
    MIN_SEED,
    ConfigModel,
    validate_stored,
)
from aios_rl.contracts.errors import ConfigError
from aios_rl.control.events import ControlConfig
from aios_rl.control.plane import ControlPlane
from aios_rl.control.reward import RewardConfig
from aios_rl.envs.shell.env import ShellEnvConfig
from aios_rl.rollout.allocators import AllocatorConfig, canonical_allocator_name, parse_allocator_name
from aios_rl.teacher.calibrate import MonitorConfig
from aios_rl.teacher.gateway import TeacherConfig, canonical_teacher_spec, with_api_key_of

TRAIN_CONFIG_KEY = "train_config"


class ShellTrainConfig(ConfigModel):
    """Everything `aios-rl shell train` does; stored with the run so the directory reproduces it."""

    epochs: int = Field(
        default=5, ge=1, le=MAX_PASSES,
        description="Update epochs (one update and checkpoint each; at most 100000).",
    )
    tasks_per_epoch: int = Field(default=8, ge=1, description="Training tasks sampled per epoch.")
    task_sampling: Literal["uniform", "frontier"] = Field(
        default="frontier", description="Which tasks an RL epoch runs: 'frontier' the least visited of those "
        "neither solved by the student (self-imitation archive) nor labelled by the teacher first, then the rest "
        "(campaign/task_sampling); 'uniform' a uniform draw. Distillation-only epochs always draw uniformly.",
    )
    group_size: int = Field(
        default=4, ge=1, le=MAX_GROUP_SIZE,
        description="Episodes per task per epoch (the GRPO group; at most 1024).",
    )
    allocator: str | None = Field(
        default=None, description="Rollout allocator: uniform-N, dapo-N, arpo-N, tree-N, vip-N, rail or rail-N "
        "(None: uniform-<group_size>); kept under its canonical name (grpo-N is uniform-N, rail is "
        "rail-<allocation.rail_cap>).",
    )
    allocation: AllocatorConfig = Field(default_factory=AllocatorConfig, description="Allocator and RAIL settings.")
    rollout_budget: int = Field(
        default=0, ge=0, description="Total rollouts the run may spend, branches included (0: no limit). An "
        "epoch it leaves short runs fewer episodes than planned, or none once it is spent: a warning says so "
        "and rollout/budget_shortfall counts the rollouts cut.",
    )
    seed: int = Field(
        default=0, ge=MIN_SEED, le=MAX_SEED,
        description="Seeds task sampling, rollouts and the student's initialisation.",
    )
    workers: int = Field(
        default=2, ge=1, le=MAX_WORKERS, description="Parallel environment workers (at most 1024)."
    )
    torch_threads: int = Field(
        default=1, ge=1, le=MAX_TORCH_THREADS,
        description="CPU threads for the student; small batches run fastest on one.",
    )
    temperature: float = Field(default=1.0, gt=0, description="Sampling temperature of training rollouts.")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus mass of training rollouts.")
    distinct_first: bool = Field(
        default=False, description="The fresh rollouts of a task in an epoch draw distinct first actions (without "
        "replacement while the student gives other candidates mass), so a group of G tries G different first "
        "moves instead of repeating the one the student is sure of (policy/sampling).",
    )
    distinct_states: bool = Field(
        default=False, description="The rollouts of a task in an epoch draw distinct actions at every "
        "state they share (the opening state, and the states a revert returns to): no action is drawn twice "
        "from one state while the student gives others mass, so a group explores up to group_size x "
        "attempts different patches. Includes distinct_first.",
    )
    teacher: str = Field(
        default="oracle",
        description="none, or teacher backends in fallback order: oracle, claude, codex, gemini, opencode, openai "
        "(e.g. 'claude,oracle').",
    )
    teacher_config: TeacherConfig = Field(
        default_factory=lambda: TeacherConfig(backend="oracle"),
        description="Gateway settings (timeouts, retries, concurrency, CLI/HTTP backend options).",
    )
    monitor: MonitorConfig = Field(default_factory=MonitorConfig, description="Teacher-disagreement alarm.")
    rl: bool = Field(default=True, description="False: distillation only (no RL updates), for ablations.")
    self_imitation_tasks: int = Field(
        default=64, ge=1, description="RL epochs: most tasks of the self-imitation archive imitated per epoch (a "
        "fresh random subset each epoch when it holds more; see trainer.self_imitation_coef).",
    )
    warm_start_epochs: int = Field(
        default=60, ge=0, le=MAX_PASSES, description="Distillation passes over teacher demonstrations before "
        "RL (teacher only; at most 100000). 60: chosen on held-back training tasks "
        "(benchmarks/warm_start_passes.py; README, a longer warm start).",
    )
    consolidation_passes: int = Field(
        default=0, ge=0, le=MAX_PASSES,
        description="After each epoch's update, this many distillation-only passes (at most 100000) over the "
        "run's standing targets: the oracle's demonstrations (with demo_replay) and, in RL epochs, the "
        "self-imitation archive of verified fixes. An update sweeps them only trainer.update_epochs times, "
        "beside its other terms, while the warm start needed about 60 passes to fit its demonstrations. "
        "Distillation-only epochs consolidate their demonstrations alike. 0: off.",
    )
    redistill_passes: int = Field(
        default=0, ge=0, le=MAX_PASSES,
        description="RL runs: after the last epoch, a fresh student (the active "
        "checkpoint's architecture, initialised anew) is distilled for this many passes on the oracle's "
        "demonstrations plus demonstrations of the same kind built from each verified fix in the "
        "self-imitation archive, and its checkpoint becomes active (expert iteration: RL finds fixes the "
        "teacher cannot label, distillation fits them as the warm start fits the teacher's; `shell "
        "redistill` does it on demand). 0: off; at most 100000.",
    )
    demo_replay: bool = Field(
        default=True, description="The oracle's demonstrations (those of the warm start) join the distillation "
        "term of every epoch, so what the teacher taught is kept while the epochs' rollouts go elsewhere (as "
        "InstructGPT's PPO-ptx mixes its supervised objective into RL updates). Oracle teacher first only.",
    )
    student: StudentConfig = Field(default_factory=StudentConfig, description="Which student and its settings.")
    init_from: str | None = Field(
        default=None,
        description="Start from another run's checkpoint instead of a fresh student: 'RUN_DIR' (its active "
        "checkpoint) or 'RUN_DIR:CHECKPOINT' (active, last_stable, initial or an id). The student kind must match; "
        "its settings come from that checkpoint. No oracle warm start then: that is for fresh students.",
    )
    validation: ValidationConfig = Field(
        default_factory=ValidationConfig, description="Validation gate: each update is scored on held-out training "
        "tasks and rolled back when worse than its parent (campaign/validation; off by default).",
    )
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="Update hyperparameters.")
    reward: RewardConfig = Field(default_factory=RewardConfig, description="Reward fusion.")
    control: ControlConfig = Field(
        default_factory=ControlConfig, description="Control-plane settings (replay lanes, the rollback "
        "freeze count, snapshots), stored in RUN/control.db with the run; as `shell campaign`'s control.",
    )
    env: ShellEnvConfig = Field(default_factory=ShellEnvConfig, description="Shell environment settings.")

    @field_validator("init_from")
    @classmethod
    def _absolute_source(cls, spec: str | None) -> str | None:
        """The run directory of ``init_from`` made absolute (kept so in the stored configuration), so a run
        that starts from it, or descends from this run, finds it from any working directory."""
        if spec is None:
            return None
        if ":" not in spec:
            return str(Path(spec).resolve())
        run, _, name = spec.rpartition(":")
        return f"{Path(run).resolve()}:{name}"

    @field_validator("teacher")
    @classmethod
    def _canonical_teacher(cls, spec: str) -> str:
        return canonical_teacher_spec(spec)  # 'Oracle' is the oracle, first, everywhere the spec is read

    @model_validator(mode="after")
    def _canonical_allocator(self) -> ShellTrainConfig:
        """The allocator under the one name of what it builds ('Dapo-3' is 'dapo-3', 'grpo-4' 'uniform-4',
        'rail' 'rail-<allocation.rail_cap>'), so a resume that spells it another way asks for the same run,
        and a run stored under another spelling reads as its canonical name."""
        if self.allocator is not None:  # ConfigError with a did-you-mean for an unknown name
            name = canonical_allocator_name(self.allocator, self.allocation.rail_cap)
            object.__setattr__(self, "allocator", name)  # frozen model: set once, while validating
        return self

    @model_validator(mode="after")
    def _redistill_needs_rl(self) -> ShellTrainConfig:
        if self.redistill_passes and not self.rl:
            raise ConfigError("redistill_passes needs RL epochs (rl: true): without them the self-imitation "
                              "archive holds no verified fix to redistil")
        if self.trainer.distill_coef == 0:
            oracle_first = self.teacher.split(",")[0].strip() == "oracle"
            parts = [name for name, used in (
                ("rl: false (distillation is the only update)", not self.rl and self.teacher != "none"),
                ("the oracle warm start",
                 oracle_first and self.warm_start_epochs > 0 and self.init_from is None),
                ("consolidation_passes", self.consolidation_passes > 0),
                ("redistill_passes", self.redistill_passes > 0),
            ) if used]
            if parts:
                raise ConfigError(f"trainer.distill_coef 0 leaves nothing to train in {', '.join(parts)}, "
                                  "which only distil; set distill_coef > 0 or turn them off")
        return self

    def allocator_name(self) -> str:
        return self.allocator or f"uniform-{self.group_size}"


def check_group_size(config: ShellTrainConfig) -> None:
    """Refuse a group_size set beside an allocator whose name sets another: the allocator's size is the
    one trained with, so the given one would be ignored without a word.

    Only fields the command set count (``model_fields_set``: the keys of ``--config`` and the flags given).
    A stored configuration holds every field, so this is for a command building a new one, not a resume.

    Raises:
        ConfigError: naming both settings and how to agree them.
    """
    if config.allocator is None or "group_size" not in config.model_fields_set:
        return
    kind, size = parse_allocator_name(config.allocator)
    if size != config.group_size:
        rail = kind == "rail"  # its name is canonical (rail-<cap>); groups start at its base group
        sets = (f"sets its own group sizes ({config.allocation.rail_base_group} rollouts, branched up to {size})"
                if rail else f"sets the group size ({size})")
        example = "" if rail else f", e.g. '{kind}-{config.group_size}'"
        raise ConfigError(f"group_size {config.group_size} is not used: allocator '{config.allocator}' "
                          f"{sets}; leave group_size (--group-size) out, or name the size in the "
                          f"allocator{example}")


# Settings added after runs were stored, by path, with the value that reproduces such a run (what it ran
# with). A run stored without one resumes with that value, not with today's default.
LEGACY_SETTINGS: dict[tuple[str, ...], Any] = {
    ("trainer", "self_imitation_coef"): 0.0,
    ("task_sampling",): "uniform",
    ("demo_replay",): False,
    ("allocation", "rail", "promotion_margin"): None,
}
# Settings whose default changed, by path, with the old default. A run stored with the old default and
# resumed by a command that leaves the setting at today's default (the same command as before) keeps its
# stored value. The price: asking for today's default explicitly cannot be told apart, and also resumes.
CHANGED_DEFAULTS: dict[tuple[str, ...], Any] = {
    ("allocation", "rail", "l2"): 0.1,
    ("allocation", "rail", "promotion_margin"): None,
    ("warm_start_epochs",): 20,
    ("control", "semantics"): 2,
}


def _get_path(model: BaseModel, path: tuple[str, ...]) -> Any:
    for name in path:
        model = getattr(model, name)
    return model


def _with_path(model: BaseModel, path: tuple[str, ...], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    return model.model_copy(update={head: _with_path(getattr(model, head), tuple(rest), value)})


def _stored_section(stored: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The dict of a stored config that holds the last field of ``path`` (created when missing)."""
    for name in path[:-1]:
        stored = stored.setdefault(name, {})
    return stored


def resolve_stored_config(plane: ControlPlane, config: ShellTrainConfig) -> ShellTrainConfig:
    """The configuration a run trains with: ``config`` stored on its first start; on a resume the stored one
    (with ``config``'s epochs), read as the same command would have asked for it when it was stored.

    A resume's epoch count is not stored here: :func:`store_epochs` does that once the run is set up.

    Raises:
        ConfigError: ``config`` differs from the stored configuration in more than its epochs, or the run
            directory holds the events of another command's run (an online campaign, a demo).
    """
    raw = plane.store.get_meta(TRAIN_CONFIG_KEY)
    if raw is None and plane.store.event_count() > 0:
        raise ConfigError(f"{plane.run_dir} is not a `shell train` run: it holds another command's run "
                          "(no training configuration); use a new --run")
    if raw is None:
        plane.store.set_meta(TRAIN_CONFIG_KEY, config.model_dump(mode="json"))
        return config
    stored = copy.deepcopy(raw)  # filled in below; what the run stored stays as stored
    asked, today = config, ShellTrainConfig()
    for path, value in LEGACY_SETTINGS.items():
        fields = _stored_section(stored, path)
        if path[-1] in fields:
            continue
        fields[path[-1]] = value
        if _get_path(asked, path) == _get_path(today, path):  # the same command as before
            asked = _with_path(asked, path, value)
    for path, old_default in CHANGED_DEFAULTS.items():
        stored_value = _stored_section(stored, path).get(path[-1])
        if stored_value == old_default and _get_path(asked, path) == _get_path(today, path):
            asked = _with_path(asked, path, old_default)
    resolved = stored_train_config(stored, plane.run_dir, "continue")
    teacher = with_api_key_of(resolved.teacher_config, config.teacher_config)  # the key is never stored
    resolved = resolved.model_copy(update={"epochs": config.epochs, "teacher_config": teacher})
    if resolved != asked:
        raise ConfigError(f"{plane.run_dir} was trained with a different configuration; resume it unchanged or use a new --run")
    return resolved


def stored_train_config(stored: dict[str, Any], run_dir: Path, action: str) -> ShellTrainConfig:
    """A run's stored training configuration, validated by this version's rules (see
    :func:`~aios_rl.contracts.config.validate_stored`: ``cannot ACTION RUN_DIR:`` and each problem)."""
    return validate_stored(ShellTrainConfig, stored, run_dir, action)


def store_epochs(plane: ControlPlane, epochs: int) -> None:
    """Store the epoch count a resume asked for (the rest of the stored configuration as it was), so a later
    ``shell train --run RUN`` without ``--epochs`` continues to the count asked for last. Called once the run
    is set up, so a command that fails before that (a teacher or student error) leaves the count unchanged."""
    raw = plane.store.get_meta(TRAIN_CONFIG_KEY)
    if raw is not None and raw.get("epochs") != epochs:
        plane.store.set_meta(TRAIN_CONFIG_KEY, raw | {"epochs": epochs})

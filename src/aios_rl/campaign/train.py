"""`aios-rl shell train`: epochs of grouped rollouts, teacher shaping, an update and a checkpoint each.

Each epoch samples training tasks, runs a group of episodes per task with the active checkpoint, fuses the
teacher's shaping into the rewards, updates the student (GRPO family or PPO; or distillation only), writes
a checkpoint through the control plane (``update.completed``: the new checkpoint becomes ``active``, its
parent ``pre_update_ref``) and appends one line to ``RUN/metrics.jsonl``, with the phase's wall seconds
(``time/phase_s``: the warm start, an epoch's rollouts, update and validation gate, or a redistillation). A
killed run resumes from its active checkpoint and the epochs it already finished.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aios_rl.algos.batch import DistillBatch
from aios_rl.algos.distill import distill_batch_from, distill_from_episodes, distill_update
from aios_rl.algos.grpo import grpo_update
from aios_rl.algos.ppo import ppo_update
from aios_rl.algos.self_imitation import archived_fixes, pick_archived, self_imitation_batch, update_archive
from aios_rl.algos.trainer import Trainer, UpdateStats, trainable_parameters
from aios_rl.campaign.collect import RolloutCollector
from aios_rl.campaign.demos import distill_passes, fix_demonstrations, oracle_demonstrations
from aios_rl.campaign.metrics import EPOCH_PHASES, append_metrics, read_metrics
from aios_rl.campaign.online_update import load_episodes
from aios_rl.campaign.students import check_student, make_student, restore_student, start_conflicts
from aios_rl.campaign.task_sampling import frontier_tasks, visit_counts
from aios_rl.campaign.train_config import (
    TRAIN_CONFIG_KEY,
    ShellTrainConfig,
    resolve_stored_config,
    store_epochs,
    stored_train_config,
)
from aios_rl.campaign.validation import SPLIT_KEY, ValidationGate, stored_split, validation_split
from aios_rl.contracts.config import MAX_PASSES
from aios_rl.contracts.episode import DecodingRegime, Episode, Task
from aios_rl.contracts.errors import ConfigError, StorageError
from aios_rl.contracts.protocols import Env, Teacher
from aios_rl.control.plane import ControlPlane
from aios_rl.control.replay import route_episode
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.oracle import ShellOracle, reference_action
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.envs.shell.task import load_tasks
from aios_rl.policy.base import Policy
from aios_rl.policy.factory import build_policy
from aios_rl.rollout.allocators import check_rail_cap
from aios_rl.rollout.engine import GroupOutcome
from aios_rl.teacher.calibrate import DisagreementMonitor, agrees
from aios_rl.teacher.gateway import (
    TeacherConfig,
    TeacherGateway,
    checked_backends,
    resolve_backend,
    teacher_backends,
)

log = logging.getLogger(__name__)

SELF_IMITATION_KEY = "self_imitation_archive"
EPOCH_TASKS_KEY = "epoch_tasks"
PENDING_EPOCH_KEY = "pending_epoch"
# The alarm the last alarming training episode raised, committed with that episode: a kill before its
# teacher.alarm event leaves it here, and the resumed run records it.
PENDING_ALARM_KEY = "pending_teacher_alarm"
EPISODE_NAMESPACE_KEY = "episode_namespace"  # the run's UUID, which its training episodes' ids derive from
_READ_CHUNK = 500  # stored episodes parsed at a time when the disagreement monitor is restored


@dataclass
class EpochReport:
    epoch: int
    checkpoint: str
    metrics: dict[str, float]


Progress = Callable[[str, dict[str, float]], None]


@dataclass
class Consolidation:
    """What an epoch's consolidation passes fitted: how many targets, and the last pass's statistics."""

    targets: int
    stats: UpdateStats


def check_run_outside_tasks(run_dir: Path, *task_dirs: Path | str | None) -> None:
    """Refuse a run directory that is, or lies inside, a task directory: its control.db, checkpoints/ and
    metrics.jsonl would join the task set, and every later load of that set would reject it.

    Raises:
        ConfigError: it is.
    """
    run = Path(run_dir).resolve()
    for tasks in task_dirs:
        if tasks is not None and run.is_relative_to(Path(tasks).resolve()):
            raise ConfigError(f"--run {run_dir} lies inside the task directory {tasks}, whose task set its "
                              "files would break; choose a --run outside it")


def build_teacher(config: ShellTrainConfig, run_dir: Path | None = None) -> Teacher | None:
    """The oracle alone, or the gateway over the chosen backends (the oracle available to it).

    The gateway's answer cache lives in the run directory (``RUN/teacher_cache.db``) unless configured.
    """
    names = teacher_backends(config.teacher)
    if not names:
        return None
    if names == ["oracle"]:
        return ShellOracle()
    update: dict[str, object] = {"backend": names[0], "fallbacks": tuple(names[1:])}
    if run_dir is not None and config.teacher_config.cache_path is None:
        update["cache_path"] = str(run_dir / "teacher_cache.db")
    gateway_config = config.teacher_config.model_copy(update=update)
    return TeacherGateway(TeacherConfig.model_validate(gateway_config.model_dump()), oracle=ShellOracle())


def watched(episode: Episode) -> bool:
    """Whether the disagreement monitor watches ``episode``: a judge answered it, not the oracle (ground
    truth: its shaping rewards partial progress on failed episodes by design), whether the oracle is the
    teacher or the backend of a gateway that answered this episode."""
    signal = episode.teacher_signal
    return signal is not None and signal.backend != "oracle"


def watched_episodes(plane: ControlPlane, window: int) -> list[Episode]:
    """The stored episodes (oldest first) the disagreement monitor last scored, at most ``window``: what a
    resumed run's monitor is restored from, read newest first until the window is full."""
    ids, found = plane.store.episode_ids(), []
    for end in range(len(ids), 0, -_READ_CHUNK):
        chunk = ids[max(0, end - _READ_CHUNK) : end]
        bodies = plane.store.episode_bodies(chunk)
        for episode_id in reversed(chunk):
            episode = Episode.model_validate_json(bodies[episode_id])
            if watched(episode) and agrees(episode.teacher_signal, episode) is not None:
                found.append(episode)
        if len(found) >= window:
            break
    return found[:window][::-1]


def labelled_tasks(teacher: str, tasks: list[Task]) -> set[str]:
    """The ids of the tasks whose states the teacher can label: with the oracle first, those with a reference
    fix; with another teacher first, every task (a judge answers for any state); with none, no task."""
    backends = teacher_backends(teacher)
    if not backends:
        return set()
    if backends[0] != "oracle":
        return {t.task_id for t in tasks}
    return {t.task_id for t in tasks if reference_action(t) is not None}


def split_source(spec: str) -> tuple[Path, str]:
    """``"RUN_DIR"`` or ``"RUN_DIR:CHECKPOINT"`` → (the run directory, absolute; the checkpoint name)."""
    run, _, name = spec.rpartition(":") if ":" in spec else (spec, ":", "active")
    return Path(run).resolve(), name or "active"


def load_train_tasks(tasks_dir: Path) -> list[Task]:
    """The train split of ``tasks_dir`` (what `shell train` and a campaign train on).

    Raises:
        ConfigError: a directory without train-split tasks.
        ContractError: not a task directory, or an invalid task in it.
    """
    tasks = load_tasks(Path(tasks_dir), split="train")
    if not tasks:
        raise ConfigError(
            f"{tasks_dir} holds no train-split tasks; generate some with `aios-rl shell benchmark-generate`"
        )
    return tasks


def load_student_from(spec: str, kind: str) -> tuple[Policy, str]:
    """The student stored in another run's checkpoint (``RUN_DIR`` or ``RUN_DIR:CHECKPOINT``), and where it
    came from as ``"RUN_DIR:ID"``.

    Raises:
        ConfigError: not a run directory, or its student is not of ``kind``.
        StorageError: no such checkpoint in that run.
    """
    run_dir, name = split_source(spec)  # recorded absolute, so the source is found from any working directory
    if not (run_dir / "control.db").is_file():
        raise ConfigError(f"init_from: {run_dir} is not a run directory (no control.db)")
    plane = ControlPlane(run_dir, writer=False)
    try:
        checkpoint = plane.resolve_checkpoint(name)
        tensors, meta = plane.load_checkpoint(checkpoint)
    finally:
        plane.close()
    found = meta["policy"]["kind"]
    if found != kind:
        raise ConfigError(f"init_from: {run_dir}:{checkpoint} holds a {found} student, but this run trains {kind}")
    source = f"{run_dir}:{checkpoint}"
    return restore_student(meta["policy"], tensors, source=f"checkpoint {source}"), source


def _stored_run(run_dir: Path) -> tuple[dict[str, Any] | None, str | None, list[str] | None]:
    """The training configuration, the task directory and the validation task ids stored in a run directory
    (None where absent)."""
    plane = ControlPlane(run_dir, writer=False)
    try:
        store = plane.store
        return store.get_meta(TRAIN_CONFIG_KEY), store.get_meta("tasks_dir"), store.get_meta(SPLIT_KEY)
    finally:
        plane.close()


def trained_task_ids(run_dir: Path, *, depth: int = 8) -> set[str]:
    """The ids of the tasks a `shell train` run (and the runs it started from, ``init_from``) trained on: its
    task directory's train split without its own validation set. Empty for a directory that records no task
    set (a run of another command) or whose task directory is gone.

    Raises:
        ConfigError: ``run_dir`` (or a run it started from) is not a run directory any more.
    """
    if not (run_dir / "control.db").is_file():  # never open (and so create) a store where there is none
        raise ConfigError(f"init_from: {run_dir}, a run this one descends from, is gone, so the tasks it "
                          "trained on cannot be checked against the validation set")
    stored, tasks_dir, held = _stored_run(run_dir)
    if stored is None or tasks_dir is None or not Path(tasks_dir).is_dir():
        return set()
    config = stored_train_config(stored, run_dir, "check the tasks of")
    train_tasks = load_tasks(Path(tasks_dir), split="train")
    if held is not None:
        ids = {t.task_id for t in train_tasks} - set(held)
    else:  # recorded by older code: the split drawn again
        try:
            ids = {t.task_id for t in validation_split(config.validation, train_tasks, config.seed)[0]}
        except ConfigError:  # its validation directory changed since: count every training task as trained on
            ids = {t.task_id for t in train_tasks}
    if config.init_from and depth > 0:
        ids |= trained_task_ids(split_source(config.init_from)[0], depth=depth - 1)
    return ids


def open_training(run_dir: Path, *, epochs: int | None = None) -> ShellTraining:
    """An existing `shell train` run, reopened with the configuration and the task directory it stored
    (``epochs``, when given, replaces the stored count: more epochs continue the run).

    Raises:
        StorageError: not a run directory.
        ConfigError: the run records no training configuration or task directory, that directory is gone, or
            ``epochs`` is below 1.
    """
    if not (run_dir / "control.db").is_file():
        raise StorageError(f"{run_dir} is not a run directory (no control.db); train first with "
                           "`aios-rl shell train`")
    stored, tasks_dir, _ = _stored_run(run_dir)
    if stored is None or tasks_dir is None:
        raise ConfigError(f"{run_dir} is not a `shell train` run: it records no training configuration")
    if not Path(tasks_dir).is_dir():
        raise ConfigError(f"{run_dir} trained on {tasks_dir}, which no longer exists")
    if epochs is not None:
        stored = stored | {"epochs": epochs}
    config = stored_train_config(stored, run_dir, "continue")  # e.g. --epochs 0
    return ShellTraining(run_dir, Path(tasks_dir), config)


def _check_start(source: str, validation: list[Task]) -> None:
    """Refuse a start checkpoint (``"RUN_DIR:ID"``) whose run trained on any of the validation tasks.

    Raises:
        ConfigError: it did.
    """
    seen = sorted(trained_task_ids(split_source(source)[0]) & {t.task_id for t in validation})
    if seen:
        raise ConfigError(f"init_from: {source} was trained on {len(seen)} of this run's validation "
                          f"task(s) (e.g. {seen[0]}); validate on tasks it never saw (--val-tasks DIR)")


class ShellTraining:
    """One training run in one run directory."""

    def __init__(self, run_dir: Path, tasks_dir: Path, config: ShellTrainConfig) -> None:
        check_run_outside_tasks(run_dir, tasks_dir, config.validation.tasks_dir)
        new_run = not (run_dir / "control.db").exists()
        if new_run and config.student.kind != "causal-lm" and config.student.model_path is not None:
            raise ConfigError(f"student.model_path ({config.student.model_path}) is for the causal-lm "
                              f"student, but this run trains a {config.student.kind} one; set student.kind: "
                              "causal-lm")
        # A bad --init-from (or a start checkpoint whose student cannot train), teacher name, validation set,
        # student setting (no --model, an unknown student.causal_lm key, a model that does not load) or a RAIL
        # cap with no room to branch fails before the run directory exists, so fixing it needs no new --run.
        # (A run stored with such a cap resumes as it ran.)
        if new_run:
            check_rail_cap(config.allocator_name(), config.allocation)
            checked_backends(config.teacher)
            if not config.init_from:
                check_student(config.student, seed=config.seed)  # at once; the student is built below
        start: tuple[Policy, str | None] | None = None
        if new_run and config.init_from:
            start = load_student_from(config.init_from, config.student.kind)
        conflicts = start_conflicts(config.student, start[0].config_dict()) if start is not None else []
        if start is not None and conflicts:
            raise ConfigError(f"init_from: this run starts from the student in {start[1]} and keeps its "
                              f"settings, which differ from the ones asked for: {'; '.join(conflicts)}; "
                              "leave those settings out (or match them), or train a fresh student without "
                              "--init-from")
        if start is not None:  # one that loads but cannot train (float16, no LoRA): the Trainer refuses it
            trainable_parameters(start[0])
        train_tasks = load_train_tasks(tasks_dir)
        # A new run stores ``config`` as given, so this split is the run's own.
        split = validation_split(config.validation, train_tasks, config.seed) if new_run else None
        if split is not None and start is not None and start[1] is not None:
            _check_start(start[1], split[1])
        if new_run and start is None:  # the fresh student, built (and so checked) before the store exists
            start = (make_student(config.student, seed=config.seed), None)
        self.plane = ControlPlane(run_dir, config.control if new_run else None)
        try:
            self.config = resolve_stored_config(self.plane, config)
            stored_tasks = self.plane.store.get_meta("tasks_dir")
            if stored_tasks is not None and Path(stored_tasks) != Path(tasks_dir).resolve():
                raise ConfigError(f"{run_dir} trains on the tasks in {stored_tasks}, not {tasks_dir}; "
                                  "continue it with the same --tasks (or none) or use a new --run")
            self.plane.store.set_meta("tasks_dir", str(Path(tasks_dir).resolve()))
            held = self.plane.store.get_meta(SPLIT_KEY)
            self.tasks, self.val_tasks = split or stored_split(self.config.validation, train_tasks,
                                                               self.config.seed, held)
            self.plane.store.set_meta(SPLIT_KEY, [t.task_id for t in self.val_tasks])
            self.teacher = build_teacher(self.config, run_dir)
            # Demonstrations (warm start, replay) are the oracle's ground truth: only when it is the first
            # teacher.
            self.oracle_first = teacher_backends(self.config.teacher)[:1] == ["oracle"]
            self.labelled = labelled_tasks(self.config.teacher, self.tasks)
            self._demos: DistillBatch | None = None
            self.monitor = DisagreementMonitor(self.config.monitor)
            if any(resolve_backend(n) != "oracle" for n in teacher_backends(self.config.teacher)):
                # only a judge's answers are watched: a run without one has none to read back
                _raise_pending_alarm(self.plane)
                self.monitor.restore(watched_episodes(self.plane, self.config.monitor.window),
                                     alarms=self.plane.state.alarms)  # only this monitor raises alarms
            self.metrics_path = run_dir / "metrics.jsonl"
            # The allocator lives as long as the run; its state resumes from the store.
            allocator = self.config.allocator_name()
            self.collector = RolloutCollector(self.plane, allocator, self.config.allocation,
                                              rollout_budget=self.config.rollout_budget)
            self.sandbox = Sandbox(self.config.env.sandbox)  # one sandbox shared by every environment worker
            torch.set_num_threads(self.config.torch_threads)
            torch.manual_seed(self.config.seed)
            self.policy, self.trainer = self._student(start)
            self.gate = ValidationGate(self.plane, self.config.validation, self.val_tasks, self.make_env,
                                       workers=self.config.workers) if self.val_tasks else None
            store_epochs(self.plane, self.config.epochs)  # only now: a failed set-up leaves the count
        except BaseException:
            self.plane.close()  # a failed set-up leaves no open store behind
            raise

    def make_env(self) -> Env:
        return ShellBugfixEnv(self.config.env, sandbox=self.sandbox)

    def load_student(self, checkpoint: str = "active") -> Policy:
        """A separate copy of this run's student at ``checkpoint`` (active, last_stable, initial or an id),
        e.g. ``"initial"`` for the untrained student to compare against; the student being trained is
        ``self.policy``.

        Raises:
            StorageError: the run has no such checkpoint, or its files do not verify.
        """
        checkpoint = self.plane.resolve_checkpoint(checkpoint)
        tensors, meta = self.plane.load_checkpoint(checkpoint)
        source = f"checkpoint {self.plane.run_dir}:{checkpoint}"
        return restore_student(meta["policy"], tensors, source=source)

    def _student(self, start: tuple[Policy, str | None] | None) -> tuple[Policy, Trainer]:
        lineage = self.plane.state.lineage
        if lineage.active is None and "ckpt-0000" in lineage.checkpoints:
            # registered by a first start that a kill ended before it initialised the lineage: its student
            self.plane.initialize("ckpt-0000")
            lineage = self.plane.state.lineage
        if lineage.active is None:
            if start is None and self.config.init_from:  # a first start that failed after creating the store
                start = load_student_from(self.config.init_from, self.config.student.kind)
                _check_start(start[1], self.val_tasks)
            policy, source = start or (make_student(self.config.student, seed=self.config.seed), None)
            trainer = Trainer(policy, self.config.trainer)
            tensors, meta = trainer.state_tensors()
            if source is not None:
                meta["init_from"] = source
            self.plane.save_checkpoint("ckpt-0000", tensors, meta, config_hash=self.config.config_hash(),
                                       env_versions={"shell": "bugfix-v1"})
            self.plane.initialize("ckpt-0000")
            return policy, trainer
        tensors, meta = self.plane.load_checkpoint(lineage.active)
        source = f"checkpoint {self.plane.run_dir}:{lineage.active}"
        policy = restore_student(meta["policy"], tensors, source=source)
        trainer = Trainer(policy, self.config.trainer)
        trainer.load_state_tensors(tensors, meta)
        log.info("resumed %s from %s", self.plane.run_dir, lineage.active)
        return policy, trainer

    # -- one epoch ------------------------------------------------------------------------------------

    def _kl_reference(self) -> Policy | None:
        """With ``trainer.kl_coef`` > 0, a frozen copy of the student before this update (the active
        checkpoint), which the KL penalty holds the update close to; else None."""
        return self.load_student("active") if self.config.trainer.kl_coef > 0 else None

    def _next_checkpoint_id(self, phase: str, epoch: int, data_window: list[str]) -> str:
        """The id of the checkpoint of ``phase`` (epoch ``epoch``'s, trained on ``data_window``): the one an
        earlier attempt of this very phase registered and a kill kept from being applied (the pending record
        names it; trained from ``active`` on the same episodes), else the next new one. A resumed phase so
        applies its own update instead of registering a second beside it."""
        lineage = self.plane.state.lineage
        pending = self.plane.store.get_meta(PENDING_EPOCH_KEY)
        if pending and (pending["phase"], pending["epoch"]) == (phase, epoch):
            left = lineage.checkpoints.get(pending["checkpoint"])
            if (left is not None and left.checkpoint_id not in lineage.pointers().values()
                    and (left.verdict, left.parent, left.data_window) == (None, lineage.active, data_window)):
                return left.checkpoint_id
        return f"ckpt-{len(lineage.checkpoints):04d}"

    def _checkpoint(
        self, label: str, checkpoint_id: str, data_window: list[str], with_meta: dict[str, Any] | None = None
    ) -> str:
        """Save the trainer's state as checkpoint ``checkpoint_id`` and make it active; ``with_meta`` values
        (the rollout state) commit in the same transaction as the pointer move. A ``checkpoint_id`` already
        registered (:meth:`_next_checkpoint_id`: this phase's, a kill came before it was applied) is applied
        as it is, and the trainer takes its state, which is what the active checkpoint holds."""
        self.plane.ensure_can_update()
        if checkpoint_id in self.plane.state.lineage.checkpoints:
            tensors, meta = self.plane.load_checkpoint(checkpoint_id)
            self.trainer.load_state_tensors(tensors, meta)
        else:
            tensors, meta = self.trainer.state_tensors()
            meta["label"] = label
            self.plane.save_checkpoint(
                checkpoint_id, tensors, meta, parent=self.plane.state.lineage.active,
                config_hash=self.config.config_hash(), data_window=data_window,
                teacher_backend=self.config.teacher if self.teacher else None,
                env_versions={"shell": "bugfix-v1"},
            )
        self.plane.complete_update(checkpoint_id, in_epoch=False, meta=with_meta)
        return checkpoint_id

    def warm_start(self, progress: Progress | None = None) -> EpochReport | None:
        """Distillation from oracle demonstrations (:mod:`aios_rl.campaign.demos`): the reference fix at each
        training task's opening state, and revert-then-fix after a wrong patch. Fresh students only (not
        with ``init_from``), once per run, before its first epoch: a run stored before ``--teacher Oracle``
        read as the oracle first ran its epochs without one and does not get one in the middle."""
        wanted = self.oracle_first and self.config.init_from is None and self.config.warm_start_epochs > 0
        labels = self._done_labels()
        pending = self.plane.store.get_meta(PENDING_EPOCH_KEY)
        trained = any(label in EPOCH_PHASES for label in labels) or (
            pending is not None and pending.get("phase") in EPOCH_PHASES
        )
        if not wanted or "warm_start" in labels or trained:
            return None
        record = self._unfinished(0, phase="warm_start")  # committed before a kill: only its line is missing
        if record is None:
            started = time.perf_counter()
            demonstrations = self._demonstrations(progress)
            stats = distill_passes(self.trainer, demonstrations, seed=self.config.seed,
                                   passes=self.config.warm_start_epochs)
            record = {"epoch": 0, "phase": "warm_start",
                      "checkpoint": self._next_checkpoint_id("warm_start", 0, []),
                      "demonstrations": len(demonstrations), "tasks": len(self.tasks),
                      "time/phase_s": time.perf_counter() - started} | stats.metrics()
            self.plane.store.set_meta(PENDING_EPOCH_KEY, record)
            self._checkpoint("warm_start", record["checkpoint"], [])
        append_metrics(self.metrics_path, record)
        self.plane.store.set_meta(PENDING_EPOCH_KEY, None)
        return EpochReport(0, record["checkpoint"], record)

    def _demonstrations(self, progress: Progress | None = None) -> DistillBatch:
        """The oracle's demonstrations on the training tasks (:mod:`aios_rl.campaign.demos`), built once per
        process: the same seed gives the same ones, so a run started ``init_from`` a warm start of the same
        seed replays the demonstrations that warm start was distilled on."""
        if self._demos is None:
            self._demos = distill_batch_from(oracle_demonstrations(
                self.tasks, self.make_env, seed=self.config.seed, workers=self.config.workers,
                progress=(lambda: progress("demonstrations", {})) if progress else None,
            ))
        return self._demos

    def redistill(self, passes: int | None = None, progress: Progress | None = None) -> EpochReport | None:
        """Distil a fresh student on the teacher's demonstrations and the archive's verified fixes.

        A fresh student of the active checkpoint's architecture (its own initialisation, so for a compact
        student the weights it started from) is distilled for ``passes`` (default ``redistill_passes``) on the
        oracle's demonstrations (oracle teacher first) and on demonstrations built the same way
        (:func:`aios_rl.campaign.demos.fix_demonstrations`) from the verified fix of each archived task the
        oracle cannot label. Its checkpoint becomes active, through the validation gate when the run has one.

        Returns None, with a warning logged, when the archive holds no verified fix of such a task that is a
        candidate action (a student that writes its actions archives text, which no candidate equals).
        Callers that resume check :meth:`redistilled` first, so a redistillation is not repeated. As with an
        epoch, a kill after the checkpoint's commit and before the metrics line leaves a record behind, and
        calling again finishes it (gate and line) instead of distilling a second student on top of the first.

        Raises:
            ConfigError: ``passes`` outside 1..MAX_PASSES, not every epoch of the run has been trained, or an epoch past
                them committed its checkpoint before a kill and is not finished.
            LineageError: the lineage is frozen.
        """
        passes = self.config.redistill_passes if passes is None else passes
        if not 1 <= passes <= MAX_PASSES:  # as the redistill_passes setting: a typo would run without end
            raise ConfigError(f"redistillation needs at least one pass and at most {MAX_PASSES}, got {passes}")
        done = self.epochs_done()
        if done < self.config.epochs:
            run = self.plane.run_dir
            end_here = ""
            if done:  # at least one epoch to end the run at
                end_here = f", or end the run at {done} (`aios-rl shell train --run {run} --epochs {done}`)"
            raise ConfigError(f"{run} has trained {done} of its {self.config.epochs} epochs; finish them "
                              f"(`aios-rl shell train --run {run}`){end_here} before redistilling")
        pending = self.plane.store.get_meta(PENDING_EPOCH_KEY)
        if pending and pending["phase"] in EPOCH_PHASES and self._unfinished(pending["epoch"]) is not None:
            # its update is the active student's, and the redistillation's record would replace its own
            run, epoch = self.plane.run_dir, pending["epoch"]
            raise ConfigError(f"{run}: epoch {epoch} committed its checkpoint {pending['checkpoint']} but "
                              f"was killed before its metrics line; finish it (`aios-rl shell train --run "
                              f"{run} --epochs {epoch}`) before redistilling")
        started = time.perf_counter()
        record = resumed = self._unfinished(done, phase="redistill")
        if record is None:
            record = self._train_redistilled(done, passes, progress, started)
            if record is None:
                return None
        return self._finish(record, started, resumed is not None, name=f"redistill-after-epoch-{done}")

    def _train_redistilled(
        self, epoch: int, passes: int, progress: Progress | None, started: float
    ) -> dict[str, Any] | None:
        """The fresh student's distillation and its checkpoint; its record (stored as pending, then returned),
        or None when no verified fix can be distilled."""
        self.plane.ensure_can_update()
        archive = self.plane.store.get_meta(SELF_IMITATION_KEY, {})
        ids = [str(archive[task]["episode_id"]) for task in sorted(archive)]
        found = archived_fixes(load_episodes(self.plane, ids))
        taught = {t.task_id for t in self.tasks if self.oracle_first and reference_action(t) is not None}
        kept_patch = len(set(archive) - set(found) - taught)  # successes whose last action may not fix alone
        if kept_patch:
            log.warning("%s: %d archived successes of unlabelled tasks kept an earlier patch, so their "
                        "last action is no fix from the opening state; they are not redistilled",
                        self.plane.run_dir, kept_patch)
        fixes = [(t, found[t.task_id]) for t in self.tasks if t.task_id in found and t.task_id not in taught]

        def demonstrations(fixes: list[tuple[Task, str]]) -> DistillBatch:
            return distill_batch_from(fix_demonstrations(
                fixes, self.make_env, seed=self.config.seed, workers=self.config.workers,
                progress=(lambda: progress("discovered demonstrations", {})) if progress else None,
            ))

        discovered = demonstrations(fixes) if fixes else None
        offered = set(discovered.targets) if discovered is not None else set()
        usable = [(t, fix) for t, fix in fixes if fix in offered]
        if discovered is None or not usable:
            log.warning("%s: the self-imitation archive holds no verified fix of an unlabelled task that "
                        "is a candidate action (%d archived); nothing to redistil",
                        self.plane.run_dir, len(fixes))
            return None
        if len(usable) < len(fixes):  # a fix no state offers would leave only its revert demonstrations
            log.warning("%s: %d of %d archived fixes are no candidate action; redistilling on the other %d",
                        self.plane.run_dir, len(fixes) - len(usable), len(fixes), len(usable))
            fixes, discovered = usable, demonstrations(usable)
        teacher = self._demonstrations(progress) if self.oracle_first else None
        batch = discovered if teacher is None else teacher + discovered
        active = self.plane.state.lineage.active
        _, meta = self.plane.load_checkpoint(active)
        del self.policy, self.trainer  # the old student's memory (an LM's too) is freed before the new one's
        # the active student's architecture, initialised anew
        self.policy = build_policy(meta["policy"], source=f"checkpoint {self.plane.run_dir}:{active}")
        self.trainer = Trainer(self.policy, self.config.trainer)
        stats = distill_passes(self.trainer, batch, seed=self.config.seed, passes=passes)
        record = {"epoch": epoch, "phase": "redistill",
                  "checkpoint": self._next_checkpoint_id("redistill", epoch, ids),
                  "passes": passes, "demonstrations": len(batch), "discovered_tasks": len(fixes),
                  "discovered_demonstrations": len(discovered), "discovered_kept_patch": kept_patch,
                  "time/phase_s": time.perf_counter() - started} | stats.metrics()
        self.plane.store.set_meta(PENDING_EPOCH_KEY, record)
        self._checkpoint("redistill", record["checkpoint"], ids)
        return record

    def redistilled(self) -> bool:
        """Whether the run's last phase was a redistillation (no epoch trained since)."""
        return self._done_labels()[-1:] == ["redistill"]

    def _done_labels(self) -> list[str]:
        return [r.get("phase", "") for r in read_metrics(self.metrics_path)]

    def epochs_done(self) -> int:
        labels = self._done_labels()  # one read of metrics.jsonl
        return sum(labels.count(phase) for phase in EPOCH_PHASES)

    def run_epoch(self, epoch: int, progress: Progress | None = None) -> EpochReport:
        """One epoch: rollouts, an update and its checkpoint, the validation gate's decision (when the run
        has one), and the epoch's line in ``metrics.jsonl``.

        The epoch's record is stored before its checkpoint is committed. A kill after the commit and before
        the metrics line leaves it behind, and running the epoch again finishes it (gate and line) instead
        of training a second update on top of the first.
        """
        started = time.perf_counter()
        left = self._unfinished(epoch - 1, phase="redistill")
        if left is not None:  # a redistillation killed before its line: finish it before training on top
            self._finish(left, started, True, name=f"redistill-after-epoch-{epoch - 1}")
            started = time.perf_counter()
        record = resumed = self._unfinished(epoch)
        if record is None:
            self.plane.ensure_can_update()  # a frozen lineage refuses before the rollouts, not after them
            record = self._train_epoch(epoch, progress, started)
        return self._finish(record, started, resumed is not None)

    def _finish(
        self, record: dict[str, Any], started: float, resumed: bool, name: str | None = None
    ) -> EpochReport:
        """The validation gate's decision (when the run has one), the phase's wall seconds and its line in
        ``metrics.jsonl``; the pending record is then cleared.

        ``time/phase_s`` is this process's time on the phase since ``started``, plus, when it finishes a
        record left by a killed process, the time that process stored with it (up to the record, not what
        the kill interrupted after it); unknown (null) for a record stored before phase times existed.
        """
        if self.gate is not None:
            record |= self.gate.judge(record["epoch"], record["checkpoint"], self.trainer, name=name)
        earlier = record.get("time/phase_s") if resumed else 0.0
        elapsed = time.perf_counter() - started
        record["time/phase_s"] = None if earlier is None else earlier + elapsed
        append_metrics(self.metrics_path, record)
        self.plane.store.set_meta(PENDING_EPOCH_KEY, None)
        return EpochReport(record["epoch"], record["checkpoint"], record)

    def _unfinished(self, epoch: int, phase: str | None = None) -> dict[str, Any] | None:
        """The stored record of ``epoch`` (of its redistillation with ``phase="redistill"``, of the warm start
        with ``phase="warm_start"``) if its update was committed but its metrics line never written (a kill
        after the line and before the record was cleared leaves a record that is finished already)."""
        pending = self.plane.store.get_meta(PENDING_EPOCH_KEY)
        kind = pending["phase"] if pending and pending["phase"] in ("redistill", "warm_start") else None
        if not pending or pending["epoch"] != epoch or kind != phase:
            return None
        lineage = self.plane.state.lineage
        checkpoint = lineage.checkpoints.get(pending["checkpoint"])
        committed = lineage.active == pending["checkpoint"] or (checkpoint is not None and checkpoint.verdict == "rolled_back")
        written = any((r.get("phase"), r.get("checkpoint")) == (pending["phase"], pending["checkpoint"])
                      for r in read_metrics(self.metrics_path))
        return pending if committed and not written else None

    def _train_epoch(self, epoch: int, progress: Progress | None, started: float) -> dict[str, Any]:
        """Rollouts, the update and its checkpoint; the epoch's record (stored as pending, with the seconds
        since ``started``, then returned)."""
        cfg = self.config
        rng = random.Random(cfg.seed * 1_000_003 + epoch)
        solved_before = set(self.plane.store.get_meta(SELF_IMITATION_KEY, {}))
        chosen = self._choose_tasks(epoch, rng, solved_before)
        regime = DecodingRegime(name="train", temperature=cfg.temperature, top_p=cfg.top_p)
        active = self.plane.state.lineage.active or ""
        seen: list[Episode] = []

        def group_done(group: GroupOutcome) -> None:
            for episode in (*group.discarded, *group.episodes):
                stored = self._stored_episode(episode.episode_id)
                if stored is not None:  # recorded by an attempt a kill cut short (monitor restored)
                    seen.append(stored)
                    continue
                # Judges are watched against verification; the oracle is ground truth (its shaping rewards
                # partial progress on failed episodes by design), so it is not, whether it is the teacher or
                # the backend of a gateway that answered this episode.
                alarm = self.monitor.observe(episode) if watched(episode) else None
                pending = None if alarm is None else {
                    "kind": alarm.kind, "payload": alarm.payload(),
                    "event_id": f"train/alarm/{episode.episode_id}",
                }  # stored with the episode: the restored monitor replays it alarmed, so would not raise it
                self.plane.record_episode(episode, admitted=False, lane=route_episode(episode),
                                          event_id=_episode_event_id(episode.episode_id),
                                          meta=None if pending is None else {PENDING_ALARM_KEY: pending})
                if pending is not None:
                    _raise_pending_alarm(self.plane)
                seen.append(episode)
            if progress:
                progress("rollouts", {"success": sum(e.outcome == "success" for e in seen) / len(seen),
                                      "reward": sum(e.reward for e in seen) / len(seen)})

        batch = self.collector.collect(
            self.make_env, self.policy, chosen, epoch=epoch, seed=rng.randrange(1 << 30), policy_version=active,
            regime=regime, max_steps=cfg.env.max_steps, workers=cfg.workers, teacher=self.teacher,
            reward_config=cfg.reward, on_group=group_done,
            distinct="states" if cfg.distinct_states else "first" if cfg.distinct_first else "off",
            name=self._episode_namer(epoch, active),
        )
        episodes, groups = batch.training_batch()  # branches train in their task's group; dropped groups do not
        recorded = {e.episode_id: e for e in seen}
        episodes = [recorded[e.episode_id] for e in episodes]  # what is stored is what is trained on
        zero_var = sum(g.zero_variance for g in batch.groups)
        if zero_var:
            log.warning("epoch %d: %d of %d groups had zero reward variance (no learning signal)", epoch, zero_var,
                        len(batch.groups))
        generator = torch.Generator().manual_seed(cfg.seed * 7919 + epoch)
        distill = distill_from_episodes(episodes) if self.teacher is not None else None
        standing: DistillBatch | None = None  # what every epoch distils again: demonstrations, the archive
        replayed = 0
        if distill is not None and cfg.demo_replay and self.oracle_first:
            standing = self._demonstrations(progress)
            replayed = len(standing)
        archived = 0
        committed: dict[str, Any] = {}  # meta values committed with the checkpoint, beside the rollout state
        if cfg.rl and cfg.trainer.self_imitation_coef > 0:
            imitate, archive = self._self_imitation(seen, epoch)
            committed[SELF_IMITATION_KEY], archived = archive, len(archive)
            standing = imitate if standing is None else standing + imitate
        if standing is not None:
            distill = standing if distill is None else distill + standing
        if not cfg.rl:
            stats = distill_update(self.trainer, distill, generator=generator) if distill is not None and len(distill) else UpdateStats()
        elif not episodes:  # every group was dropped, or the run's rollout budget is spent: no update
            stats = UpdateStats()
        elif cfg.trainer.algo == "ppo":
            stats = ppo_update(self.trainer, episodes, generator=generator, distill=distill,
                               reference=self._kl_reference())
        else:
            stats = grpo_update(self.trainer, episodes, groups, generator=generator, distill=distill,
                                reference=self._kl_reference())
        consolidated = self._consolidate(standing, epoch, progress) if episodes or not cfg.rl else None
        teacher_failures = sum(1 for e in seen if e.teacher_signal is not None and e.teacher_signal.status == "failed_all_backends")
        ran = max(1, len(seen))
        phase, window = "rl" if cfg.rl else "distill", [e.episode_id for e in episodes]
        record = {
            "epoch": epoch,
            "phase": phase,
            "checkpoint": self._next_checkpoint_id(phase, epoch, window),
            "rollout/success_rate": sum(e.outcome == "success" for e in seen) / ran,
            "rollout/reward_mean": sum(e.reward for e in seen) / ran,
            "rollout/episodes": len(seen),
            "rollout/trained_episodes": len(episodes),
            "rollout/groups": len(batch.groups),
            "rollout/zero_variance_groups": zero_var,
            "rollout/frac_reward_zero_std": zero_var / max(1, len(batch.groups)),
            "rollout/steps_mean": sum(len(e.trajectory) for e in seen) / ran,
            "rollout/budget_shortfall": self.collector.shortfall,  # rollouts the run's spent budget cut
            "train/self_imitation_tasks": archived,
            "train/demonstrations_replayed": replayed,
            "train/consolidation_targets": consolidated.targets if consolidated else 0,
            "train/consolidation_loss": consolidated.stats.distill_loss if consolidated else None,
            "tasks/unlabelled": sum(t.task_id not in self.labelled for t in chosen),
            "tasks/solved_before": sum(t.task_id in solved_before for t in chosen),
            "teacher/failures": teacher_failures,
            "teacher/disagreement_rate": self.monitor.rate,
            "time/phase_s": time.perf_counter() - started,
        } | stats.metrics() | batch.act_metrics.means() | batch.ledger.metrics() | self.collector.metrics()
        # batch: the epoch's (policy/*: weighted by the observations of each act call); collector: the run's
        self.plane.store.set_meta(PENDING_EPOCH_KEY, record)
        self._checkpoint(phase, record["checkpoint"], window,
                         with_meta=self.collector.state_meta(epoch) | committed)
        self.collector.committed(epoch)
        return record

    def _episode_namer(self, epoch: int, active: str) -> Callable[[Task, int], str]:
        """The ids of epoch ``epoch``'s episodes: derived from the run's namespace (a UUID it stores once),
        the checkpoint that rolls them out (``active``), the epoch, the task and the episode's place in its
        group.

        An epoch killed after some of its episodes were stored runs again from the same seed, so its
        episodes get the ids they were stored under, and recording them again is a no-op: each rollout is
        stored and counted once (ARCHITECTURE.md's exactly-once), and the update, the checkpoint's data
        window and the self-imitation archive name the stored episodes. Should a rollout run again differ
        from the stored one (a wall-clock limit cut it differently), the stored one is kept, counted and
        trained on. An epoch that runs again from another checkpoint (the run ended before it and was
        redistilled, then continued) rolls out another student: its episodes get other ids, and the first
        student's are not taken for the second's.
        """
        namespace = self.plane.store.get_meta(EPISODE_NAMESPACE_KEY)
        if namespace is None:  # a new run, or one stored before its episodes had derived ids
            namespace = str(uuid.uuid4())
            self.plane.store.set_meta(EPISODE_NAMESPACE_KEY, namespace)
        root = uuid.UUID(namespace)
        prefix = f"{active}/epoch/{epoch}/task"
        return lambda task, index: str(uuid.uuid5(root, f"{prefix}/{task.task_id}/{index}"))

    def _stored_episode(self, episode_id: str) -> Episode | None:
        """The episode ``episode_id`` if an earlier attempt of this epoch recorded it already, else None."""
        if not self.plane.store.has_event(_episode_event_id(episode_id)):
            return None
        body = self.plane.store.episode_body(episode_id)
        return None if body is None else Episode.model_validate_json(body)

    def _consolidate(
        self, standing: DistillBatch | None, epoch: int, progress: Progress | None
    ) -> Consolidation | None:
        """``consolidation_passes`` distillation-only passes over the standing targets after the epoch's
        update (demonstrations, the self-imitation archive), so what they teach is fitted, not only visited;
        None when off or when there is nothing to fit."""
        if not self.config.consolidation_passes or standing is None or not len(standing):
            return None
        if progress:
            progress("consolidation", {"targets": float(len(standing))})
        stats = distill_passes(self.trainer, standing, seed=self.config.seed * 7919 + epoch + 1,
                               passes=self.config.consolidation_passes)
        return Consolidation(len(standing), stats)

    def _choose_tasks(self, epoch: int, rng: random.Random, solved: set[str]) -> list[Task]:
        """This epoch's tasks (``task_sampling``), recorded in the store: an epoch killed and run again runs
        the tasks it started with, and the frontier counts visits from the record."""
        cfg = self.config
        record: dict[str, list[str]] = self.plane.store.get_meta(EPOCH_TASKS_KEY, {})
        count = min(cfg.tasks_per_epoch, len(self.tasks))
        if cfg.rl and cfg.task_sampling == "frontier":
            chosen = frontier_tasks(self.tasks, count, rng, visits=visit_counts(record, epoch),
                                    labelled=self.labelled, solved=solved)
        else:
            chosen = rng.sample(self.tasks, count)
        # Drawn either way, so the generator's later draws (the rollout seed) are those of the first attempt.
        if str(epoch) in record:
            by_id = {t.task_id: t for t in self.tasks}
            missing = sorted(set(record[str(epoch)]) - set(by_id))
            if missing:
                raise ConfigError(f"epoch {epoch} of {self.plane.run_dir} ran tasks that the task directory no "
                                  f"longer holds: {', '.join(missing[:3])}")
            return [by_id[task_id] for task_id in record[str(epoch)]]
        record[str(epoch)] = [t.task_id for t in chosen]
        self.plane.store.set_meta(EPOCH_TASKS_KEY, record)
        return chosen

    def _self_imitation(self, episodes: list[Episode], epoch: int) -> tuple[DistillBatch, dict[str, Any]]:
        """The archive of each task's best verified success, updated with this epoch's episodes, as
        distillation targets (at most ``self_imitation_tasks`` of its tasks, drawn per epoch); and the
        archive, to store with the epoch's checkpoint.

        The archive lives in the run store beside the episodes it names, so a resumed run keeps it. It commits
        in the checkpoint's transaction: an epoch killed before its checkpoint leaves it as it was, so the
        epoch run again sees (``tasks/solved_before``, the frontier) what a run never killed would.
        """
        archive = update_archive(self.plane.store.get_meta(SELF_IMITATION_KEY, {}), episodes)
        return self._archived_targets(epoch, archive), archive

    def _archived_targets(self, epoch: int, archive: dict[str, Any]) -> DistillBatch:
        """Epoch ``epoch``'s draw of distillation targets from the self-imitation ``archive``."""
        rng = random.Random(f"self-imitation:{self.config.seed}:{epoch}")
        chosen = pick_archived(archive, self.config.self_imitation_tasks, rng)
        coef = self.config.trainer.self_imitation_coef
        return self_imitation_batch(load_episodes(self.plane, chosen), coef)

    def close(self) -> None:
        self.plane.close()


def _raise_pending_alarm(plane: ControlPlane) -> None:
    """Record the alarm stored with the last alarming episode (a no-op once its teacher.alarm event is: the
    event id makes it so)."""
    pending = plane.store.get_meta(PENDING_ALARM_KEY)
    if pending is not None:
        plane.raise_alarm(pending["kind"], pending["payload"], event_id=pending["event_id"])


def _episode_event_id(episode_id: str) -> str:
    """The id of the event that records a training episode: recording it twice commits it once."""
    return f"train/episode/{episode_id}"

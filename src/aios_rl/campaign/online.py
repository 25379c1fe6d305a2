"""`aios-rl shell campaign`: online updates on a stream of real tasks, watched by matched comparison.

The loop (ARCHITECTURE §2, §5; the original's ``runOnlineCampaign``, reference §9.1, with real episodes):

* **collect**: each task slot runs one episode under ``active``; admitted episodes (see
  :mod:`~aios_rl.campaign.admission`) fill the micro-batch; ``batch_size`` of them seal it.
* **update** (:mod:`~aios_rl.campaign.online_update`): the sealed batch plus positive/neutral lane
  samples, distillation from the positive lane, the negative-lane KL term. The new checkpoint becomes
  ``active`` at once; its parent is frozen as ``pre_update_ref`` for the epoch.
* **monitor**: each following task also runs under ``pre_update_ref``, in its own sandbox with the same
  seed (the two runs go side by side); :func:`~aios_rl.control.compare.compare_matched` gives better /
  same / worse / comparison_failed, which feeds the ledger's streak and routes the episode's lane.
* **close**: a streak of ``rollback_threshold`` rolls back on its own (the streak's episodes go to the
  negative lane, ``RUN/rollbacks/<epoch>.json`` says why); a window with a ``better`` and no ``worse``
  promotes ``active`` to ``last_stable``. After a close without rollback (promotion, or the monitoring
  windows spent) the epoch's post-update episodes become the next sealed batch. More than
  ``max_consecutive_rollbacks`` rollbacks in a row freeze the lineage; the campaign then stops until
  ``aios-rl lineage unfreeze`` and ``--resume``.

Crash safety. Every step is decided from the committed state alone (the loop asks "what does the open
epoch need next?") and every state change is one event. Slot ``k`` has a deterministic task, seed,
episode ids and event id (:mod:`~aios_rl.campaign.slots`), and its episode is committed together with
its matched reference run in ONE event, so the cursor is the first slot without a committed event: a
slot running at a kill is re-run, a committed one never is. An update registered but not applied at a
kill is found again (same parent, same data window) and applied instead of retrained. The campaign stops
before starting an update it has no task slots left to monitor; a resume with a larger ``--max-tasks``
picks it up.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from aios_rl.algos.trainer import Trainer
from aios_rl.campaign.admission import admission, source_fingerprint, with_admission
from aios_rl.campaign.demos import oracle_warm_start
from aios_rl.campaign.diagnosis import write_rollback_diagnosis
from aios_rl.campaign.drills import crash_now
from aios_rl.campaign.metrics import append_metrics, read_metrics
from aios_rl.campaign.online_config import (
    CAMPAIGN_KEY,
    CampaignConfig,
    CampaignSummary,
    campaign_summary,
    check_trainer,
    resume_config,
    validate_stored_config,
)
from aios_rl.campaign.online_update import (
    ENV_VERSIONS,
    load_episodes,
    next_checkpoint_id,
    registered_update,
    train_update,
    update_data,
)
from aios_rl.campaign.slots import (
    find_cursor,
    reference_episode_id,
    slot_episode_id,
    slot_event_id,
    slot_task,
)
from aios_rl.campaign.students import check_student, make_student, restore_student
from aios_rl.campaign.train import (
    ShellTrainConfig,
    build_teacher,
    check_run_outside_tasks,
    load_train_tasks,
)
from aios_rl.contracts.episode import DecodingRegime, Episode, Task, Verification
from aios_rl.contracts.errors import AiosRlError, ConfigError, TrainingError
from aios_rl.control.compare import compare_matched, get_comparator
from aios_rl.control.ledger import CloseDecision
from aios_rl.control.plane import ControlPlane
from aios_rl.control.replay import route_episode
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.sandbox import Sandbox
from aios_rl.policy.base import Policy
from aios_rl.rollout.budget import ActMetrics
from aios_rl.rollout.runner import run_group
from aios_rl.teacher.gateway import checked_backends, teacher_backends

log = logging.getLogger(__name__)

TASKS_DIR_KEY = "tasks_dir"  # also read by `aios-rl shell eval`
# An applied update's metrics line, committed with the pointer move and cleared once the line is written.
PENDING_UPDATE_KEY = "pending_update_metrics"

Progress = Callable[[str, dict[str, Any]], None]


class OnlineCampaign:
    """One online campaign in one run directory (see the module docstring).

    Args:
        run_dir: the run directory; created on a fresh start.
        tasks_dir: the task set (its train split is the task stream); None on resume uses the stored one.
        config: the configuration (on resume it must match the stored one but for ``max_tasks``).
        resume: continue the campaign stored in ``run_dir``.
        on_event: progress callback ``(kind, info)``, kinds ``start`` (a slot starts: ``episodes``
            it runs), ``task`` (it committed), ``update`` and ``close`` (a monitoring window's decision;
            ``closed`` False when the epoch goes on with a fresh window).

    Raises:
        ConfigError: starting over an existing campaign without ``resume``, resuming nothing, a changed
            configuration on resume, or a task directory without train tasks.
    """

    def __init__(
        self,
        run_dir: Path,
        tasks_dir: Path | None,
        config: CampaignConfig,
        *,
        resume: bool = False,
        on_event: Progress | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        existed = (self.run_dir / "control.db").exists()
        if resume and not existed:
            raise ConfigError(
                f"--resume: {run_dir} holds no campaign (no control.db); start one without --resume"
            )
        # A fresh start refuses a bad task set before it creates the store: nothing is left to block a retry.
        fresh = None if existed else train_tasks(tasks_dir)
        if not existed:
            check_run_outside_tasks(self.run_dir, tasks_dir)
            checked_backends(config.teacher)
            check_student(config.student, seed=config.seed)
            check_trainer(config.trainer)
        self.plane = ControlPlane(self.run_dir, None if existed else config.control)
        try:
            self.config, self.campaign_id, self.tasks, meta = self._setup(config, tasks_dir, resume, fresh)
            self.teacher = build_teacher(
                ShellTrainConfig(teacher=self.config.teacher, teacher_config=self.config.teacher_config),
                self.run_dir,
            )
            self.sandbox = Sandbox(self.config.env.sandbox)
            # A new campaign's student, built now so that settings which cannot build one (no --model, an
            # unknown student key) are refused before the commit below; run() trains it.
            self._fresh: Policy | None = None
            if meta is not None:
                self._fresh = make_student(self.config.student, seed=self.config.seed)
                # One meta commit makes the campaign, once everything it runs with could be built: a start
                # refused before it (a bad teacher, sandbox or student setting) leaves a store a corrected
                # one redoes.
                self.plane.store.set_meta(TASKS_DIR_KEY, meta["tasks_dir"])
                self.plane.store.set_meta(CAMPAIGN_KEY, meta)
        except BaseException:
            self.plane.close()
            raise
        self.on_event = on_event or (lambda *_: None)
        torch.set_num_threads(self.config.torch_threads)
        torch.manual_seed(self.config.seed)
        self.regime = DecodingRegime(
            name="campaign", temperature=self.config.temperature, top_p=self.config.top_p
        )
        self.comparator = get_comparator("shell")
        self._policies: dict[str, Policy] = {}
        self._sources: dict[str, str] = {}
        # What the active student reported about its acts since the last update line (in this process: a
        # resumed campaign counts from its restart); the next update line carries their policy/* means.
        self.act_metrics = ActMetrics()
        self.cursor = find_cursor(self.plane.store, self.campaign_id)
        self._write_pending_update()

    def _setup(
        self, config: CampaignConfig, tasks_dir: Path | None, resume: bool, tasks: list[Task] | None
    ) -> tuple[CampaignConfig, str, list[Task], dict[str, Any] | None]:
        """The configuration, campaign id and tasks, and for a new campaign the meta still to commit."""
        stored = self.plane.store.get_meta(CAMPAIGN_KEY)
        if stored is not None:
            if not resume:
                raise ConfigError(
                    f"{self.run_dir} already holds a campaign; pass --resume to continue it "
                    "or choose a new --run directory"
                )
            resolved = resume_config(validate_stored_config(stored["config"], self.run_dir), config, {})
            if tasks_dir is not None and Path(tasks_dir).resolve() != Path(stored["tasks_dir"]):
                raise ConfigError(
                    f"--resume: this campaign runs the tasks in {stored['tasks_dir']}, not {tasks_dir}"
                )
            return resolved, str(stored["campaign_id"]), train_tasks(Path(stored["tasks_dir"])), None
        if self.plane.store.event_count() > 0:
            raise ConfigError(f"{self.run_dir} holds a run that is not an online campaign; use a new --run")
        tasks = tasks if tasks is not None else train_tasks(tasks_dir)
        assert tasks_dir is not None  # train_tasks refused None
        if self.plane.config != config.control:
            # An empty store left by a start killed (or refused) before the campaign meta, maybe before it
            # stored its control settings: no event was folded under the stored ones; this start sets its own
            # (in place: closing the plane to reopen it would free the run's writer lock in between).
            self.plane.replace_config(config.control)
        # One meta commit (by the caller) makes the campaign; a kill before it leaves a store a start redoes.
        meta = {
            "config": config.model_dump(mode="json"),
            "campaign_id": str(uuid.uuid4()),
            "tasks_dir": str(Path(tasks_dir).resolve()),
        }
        return config, meta["campaign_id"], tasks, meta

    # -- the loop ----------------------------------------------------------------------------------

    def run(self) -> CampaignSummary:
        """Run until ``max_tasks`` slots are done or the lineage freezes; returns the summary."""
        self._initialize()
        if self.cursor > self.config.max_tasks:
            log.warning("this campaign already ran %d task slots, more than --max-tasks %d: nothing to run; "
                        "raise --max-tasks to continue it", self.cursor, self.config.max_tasks)
        while True:
            state = self.plane.state
            if state.lineage.frozen:
                log.warning(
                    "lineage is frozen after %d consecutive rollbacks; run `aios-rl lineage unfreeze "
                    "--run %s`, then --resume",
                    state.lineage.consecutive_rollbacks,
                    self.run_dir,
                )
                return self.summary("frozen")
            epoch = state.ledger.open_epoch
            if epoch is None:
                self.plane.open_epoch(self._carry())
                continue
            if epoch.phase == "monitoring":
                decision = self.plane.pending_decision()
                if decision is not None:
                    self._close(decision)
                    continue
            if self.cursor >= self.config.max_tasks:
                return self.summary("completed")
            if epoch.phase == "update":
                self._update()
                continue
            self._run_slot(self.cursor)
            self.cursor += 1

    def _carry(self) -> list[str]:
        last = self.plane.state.ledger.current
        if last is None or last.close_reason not in ("promoted", "no_improvement"):
            return []
        return last.monitored[-self.plane.config.ledger.batch_size :]

    def _initialize(self) -> None:
        """The initial checkpoint: a fresh student, distilled on oracle demonstrations when configured."""
        lineage = self.plane.state.lineage
        if lineage.active is not None:
            return
        roots = [c.checkpoint_id for c in lineage.checkpoints.values() if c.parent is None]
        if roots:  # registered before a kill, not yet initialised
            self.plane.initialize(roots[0])
            return
        student, self._fresh = self._fresh or make_student(self.config.student, seed=self.config.seed), None
        trainer = Trainer(student, self.config.trainer)
        label = "initial"
        if teacher_backends(self.config.teacher)[:1] == ["oracle"] and self.config.warm_start_epochs:
            demonstrations, _ = oracle_warm_start(
                trainer, self.tasks, self.make_env, seed=self.config.seed, passes=self.config.warm_start_epochs
            )
            label = f"initial (oracle warm start on {demonstrations} demonstrations)"
        tensors, meta = trainer.state_tensors()
        meta["label"] = label
        checkpoint_id = next_checkpoint_id(self.plane)
        self.plane.save_checkpoint(
            checkpoint_id, tensors, meta, config_hash=self.config.config_hash(), env_versions=ENV_VERSIONS
        )
        self.plane.initialize(checkpoint_id)

    # -- one task slot -----------------------------------------------------------------------------

    def make_env(self) -> ShellBugfixEnv:
        return ShellBugfixEnv(self.config.env, sandbox=self.sandbox)

    def policy(self, checkpoint_id: str) -> Policy:
        """The student at a registered checkpoint (verified on load; the last few stay loaded)."""
        if checkpoint_id not in self._policies:
            tensors, meta = self.plane.load_checkpoint(checkpoint_id)
            if len(self._policies) >= 3:
                self._policies.pop(next(iter(self._policies)))
            self._policies[checkpoint_id] = restore_student(
                meta["policy"], tensors, source=f"checkpoint {self.plane.run_dir}:{checkpoint_id}"
            )
        return self._policies[checkpoint_id]

    def _episode(
        self, task: Task, seed: int, checkpoint_id: str, policy: Policy, episode_id: str,
        act_metrics: ActMetrics | None = None,
    ) -> Episode:
        """One episode of ``task`` under a checkpoint; an environment that cannot run gives a blocked one.
        ``act_metrics`` receives what the policy reports about its acts (``run_group``)."""
        try:
            episode = run_group(
                self.make_env,
                task,
                policy,
                size=1,
                seed=seed,
                same_seed=True,
                policy_version=checkpoint_id,
                regime=self.regime,
                teacher=self.teacher,
                reward_config=self.config.reward,
                workers=1,
                act_metrics=act_metrics,
            )[0]
        except AiosRlError as exc:  # env/sandbox boundary: the slot is recorded as a blocked episode
            log.warning("task %s under %s could not run: %s", task.task_id, checkpoint_id, exc)
            episode = Episode(
                environment=task.environment,
                task_id=task.task_id,
                split=task.split,
                trajectory=[],
                outcome="blocked",
                reward=0.0,
                env_reward=0.0,
                policy_version=checkpoint_id,
                seed=seed,
                decoding_regime=self.regime,
                verification=Verification(
                    completed=False, outcome="blocked", evidence={"error": str(exc)[:500]}
                ),
            )
        return episode.model_copy(update={"episode_id": episode_id})

    def _run_slot(self, k: int) -> None:
        task, seed = slot_task(self.tasks, self.config.seed, k)
        lineage, epoch = self.plane.state.lineage, self.plane.state.ledger.open_epoch
        assert epoch is not None and lineage.active is not None
        active, reference = lineage.active, lineage.pre_update_ref
        monitoring = epoch.phase == "monitoring"
        self.on_event("start", {"slot": k, "task": task.task_id, "episodes": 2 if monitoring else 1})
        before = self._sources.setdefault(task.task_id, source_fingerprint(task))
        episode_id = slot_episode_id(self.campaign_id, k)
        policy = self.policy(active)
        ref_episode = None
        if monitoring:
            assert reference is not None, "a monitoring epoch always has its pre-update reference"
            ref_policy = self.policy(reference)
            ref_id = reference_episode_id(self.campaign_id, episode_id)
            with ThreadPoolExecutor(max_workers=1) as pool:
                ref_future = pool.submit(self._episode, task, seed, reference, ref_policy, ref_id)
                episode = self._episode(task, seed, active, policy, episode_id, self.act_metrics)
                ref_episode = ref_future.result()
        else:
            episode = self._episode(task, seed, active, policy, episode_id, self.act_metrics)
        episode = self._admit(task, episode, before)
        event_id = slot_event_id(self.campaign_id, k)
        comparison = None
        if monitoring and ref_episode is not None and reference is not None:
            # A rejected episode is compared too: an update whose episodes stop verifying (retried, then
            # comparison_failed) or act only invalidly (worse than a reference that fixes) must feed the
            # streak. It is stored unadmitted: never counted as monitored, never in a replay lane.
            compared, ref_episode, rerun = self._compare(task, seed, episode, ref_episode, active, reference)
            if rerun:  # the comparison ended on a fresh run: that one is stored, with its own admission
                compared = self._admit(task, compared, before)
            episode, comparison = compared, compared.comparison
            admitted = episode.admission_status == "admitted"
            self.plane.record_comparison(episode, admitted=admitted, reference=ref_episode, event_id=event_id)
        else:
            admitted = episode.admission_status == "admitted"
            lane = route_episode(episode) if admitted else None
            self.plane.record_episode(episode, admitted=admitted, lane=lane, event_id=event_id)
        if not admitted:
            log.warning("slot %d (%s): episode not admitted: %s", k, task.task_id, episode.admission_reason)
        self.on_event("task", {
            "slot": k,
            "task": task.task_id,
            "outcome": episode.outcome,
            "admitted": admitted,
            "reason": episode.admission_reason,
            "comparison": (comparison.relative_outcome or comparison.status) if comparison else None,
        })

    def _admit(self, task: Task, episode: Episode, before: str) -> Episode:
        """The episode with its admission status (:mod:`.admission`); ``before`` is the source fingerprint."""
        isolated = source_fingerprint(task) == before
        if not isolated:
            log.warning(
                "task %s: its source repository changed during an episode (sandbox isolation)", task.task_id
            )
        status, reason = admission(
            episode,
            isolation_held=isolated,
            require_teacher=self.config.require_teacher and self.teacher is not None,
        )
        return with_admission(episode, status, reason)

    def _compare(
        self, task: Task, seed: int, episode: Episode, ref_episode: Episode, active: str, reference: str
    ) -> tuple[Episode, Episode, bool]:
        """Matched comparison; the first attempt uses the two runs already made, a retry runs both afresh.
        Returns the candidate run the comparison ended on (carrying it), the reference run, and whether that
        candidate run is a fresh one (not ``episode``)."""
        calls = {"candidate": 0, "reference": 0}
        latest = {"candidate": episode, "reference": ref_episode}

        def run_candidate() -> Verification:
            calls["candidate"] += 1
            if calls["candidate"] > 1:
                policy = self.policy(active)
                latest["candidate"] = self._episode(
                    task, seed, active, policy, episode.episode_id, self.act_metrics
                )
            return _verification(latest["candidate"])

        def run_reference() -> Verification:
            calls["reference"] += 1
            if calls["reference"] > 1:
                latest["reference"] = self._episode(
                    task, seed, reference, self.policy(reference), ref_episode.episode_id
                )
            return _verification(latest["reference"])

        comparison = compare_matched(
            run_candidate,
            run_reference,
            self.comparator,
            max_attempts=self.config.compare.max_attempts,
            candidate_checkpoint=active,
            reference_checkpoint=reference,
        )
        ref = with_admission(
            latest["reference"], "rejected", f"matched reference run under {reference}; never trained on"
        )
        return latest["candidate"].model_copy(update={"comparison": comparison}), ref, calls["candidate"] > 1

    # -- update and close --------------------------------------------------------------------------

    def _write_pending_update(self) -> None:
        """Append the applied update's metrics line unless a kill already let it be written; then clear it."""
        record = self.plane.store.get_meta(PENDING_UPDATE_KEY)
        if record is None:
            return
        path = self.run_dir / "metrics.jsonl"
        written = any(r.get("phase") == "campaign_update" and r.get("checkpoint") == record["checkpoint"]
                      for r in read_metrics(path))
        if not written:
            append_metrics(path, record)
        self.plane.store.set_meta(PENDING_UPDATE_KEY, None)

    def _update(self) -> None:
        self.plane.ensure_can_update()
        state = self.plane.state
        epoch, active = state.ledger.open_epoch, state.lineage.active
        assert epoch is not None and active is not None
        number = state.lineage.updates + 1
        drilled = self.config.drill == "bad-update" and number == self.config.drill_at
        data = update_data(self.plane, self.config.seed, max_staleness=self.config.trainer.max_staleness)
        checkpoint_id = registered_update(self.plane, active, data.window)
        if checkpoint_id is not None:  # trained and registered before a kill: its numbers are in its meta
            stored = self.plane.load_checkpoint(checkpoint_id)[1].get("update_metrics", {})
            metrics = {"resumed": 1.0} | stored
        else:
            label = f"update {number} (epoch {epoch.epoch})" + (" DRILL bad-update" if drilled else "")
            try:
                checkpoint_id, stats = train_update(
                    self.plane,
                    self.config,
                    data,
                    label=label,
                    with_teacher=self.teacher is not None,
                    drilled=drilled,
                )
            except TrainingError as exc:
                failed = [
                    with_admission(e, "update_failed", str(exc)[:300])
                    for e in load_episodes(self.plane, epoch.sealed)
                ]
                self.plane.fail_update(str(exc), episodes=failed)
                log.warning("update of epoch %d failed: %s", epoch.epoch, exc)
                self.on_event("update", {"epoch": epoch.epoch, "failed": str(exc)})
                return
            metrics = stats.metrics()
        record = {
            "phase": "campaign_update",
            "update": number,
            "epoch": epoch.epoch,
            "checkpoint": checkpoint_id,
            "drill": "bad-update" if drilled else None,
            "replay/batch": len(data.batch),
            "replay/positive": len(data.positive),
            "replay/neutral": len(data.neutral),
            "replay/negative": len(data.negative),
        } | self.act_metrics.means() | metrics
        self.plane.complete_update(checkpoint_id, meta={PENDING_UPDATE_KEY: record})
        self.act_metrics = ActMetrics()
        self._write_pending_update()
        self.on_event("update", {"epoch": epoch.epoch, "checkpoint": checkpoint_id, "drill": drilled})
        if self.config.drill == "crash-after-update" and number == self.config.drill_at:
            crash_now(f"update {number} committed: active={checkpoint_id}")

    def _close(self, decision: CloseDecision) -> None:
        epoch = self.plane.state.ledger.open_epoch
        assert epoch is not None
        triggers: list[str] = []
        reason = str(decision)
        if decision == "rollback":
            threshold = self.plane.config.ledger.rollback_threshold
            reason = (
                f"degradation streak {epoch.streak} >= {threshold} after the update to "
                f"{self.plane.state.lineage.active}"
            )
            drill = "bad-update" if self.config.drill == "bad-update" else None
            triggers = write_rollback_diagnosis(
                self.plane, self.campaign_id, reason, drill=drill, drill_at=self.config.drill_at
            )
        self.plane.close_epoch(decision, reason=reason, trigger_episodes=triggers)
        after = self.plane.state
        closed = after.ledger.open_epoch is None  # else a window ended undecided and the next one starts
        self.on_event(
            "close",
            {
                "epoch": epoch.epoch,
                "decision": decision,
                "closed": closed,
                "active": after.lineage.active,
                "reason": after.ledger.current.close_reason if closed and after.ledger.current else decision,
                "frozen": after.lineage.frozen,
            },
        )

    # -- summary -----------------------------------------------------------------------------------

    def summary(self, status: str) -> CampaignSummary:
        return campaign_summary(self.plane, self.campaign_id, status, self.cursor, self.config.max_tasks)

    def close(self) -> None:
        self.plane.close()
        close = getattr(self.teacher, "close", None)
        if callable(close):
            close()


def train_tasks(tasks_dir: Path | None) -> list[Task]:
    """The train split of ``tasks_dir`` (the campaign's task stream).

    Raises:
        ConfigError: no directory given, or one without train-split tasks.
        ContractError: not a task directory, or an invalid task in it.
    """
    if tasks_dir is None:
        raise ConfigError("--tasks is needed to start a campaign")
    return load_train_tasks(Path(tasks_dir))


def _verification(episode: Episode) -> Verification:
    return episode.verification or Verification(
        completed=False, outcome="blocked", evidence={"error": "no verdict"}
    )

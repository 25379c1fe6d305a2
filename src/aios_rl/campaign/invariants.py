"""What must hold in an online campaign's store at every instant, even right after a SIGKILL.

:func:`campaign_problems` reads a run directory (read-only) and lists every violated invariant; the crash
tests and ``benchmarks/crash_resume.py`` call it after each kill, and after the resumed campaign ends.

1. The loaded state (snapshot + tail) equals a fresh fold of every committed event.
2. Every pointer names a registered checkpoint whose files verify, and so does every registered one.
3. Slots are committed in order: the slot events are exactly slots ``0 .. cursor-1``, each of the kind
   its phase calls for, and each slot's episode is stored under its deterministic id, for its planned
   task; a compared slot also stored its matched reference run, under its deterministic id.
4. No other episode is stored (nothing lost, no orphan of an uncommitted slot) and no episode is
   counted by two events.
5. A stored episode's admission status agrees with how its event counted it, and the ledger and the
   lanes only name stored episodes; ``episodes_recorded`` counts the ``episode.recorded`` events.
6. In a monitoring epoch ``pre_update_ref`` is the parent of ``active``.
7. Every automatic rollback has its diagnosis file naming the trigger episodes of its close event.
"""

from __future__ import annotations

import json
from pathlib import Path

from aios_rl.campaign.online_config import CAMPAIGN_KEY
from aios_rl.campaign.slots import (
    find_cursor,
    reference_episode_id,
    slot_episode_id,
    slot_event_id,
    slot_task,
)
from aios_rl.contracts.episode import Episode
from aios_rl.control.plane import ControlPlane
from aios_rl.envs.shell.task import load_tasks


def campaign_problems(run_dir: Path) -> list[str]:
    """Every violated invariant of the campaign in ``run_dir`` (empty when all hold; see the module)."""
    if not (Path(run_dir) / "control.db").exists():
        return []  # killed before the store existed: nothing to check
    plane = ControlPlane(Path(run_dir), writer=False)
    try:
        return _problems(plane)
    finally:
        plane.close()


def _problems(plane: ControlPlane) -> list[str]:
    problems = []
    if plane.state != plane.replay_from_scratch():
        problems.append("loaded state differs from a fresh replay of the committed events")
    problems += plane.verify_pointers()
    for cid, record in plane.state.lineage.checkpoints.items():
        try:
            plane.checkpoints.verify(cid, sha256=record.sha256, meta_sha256=record.meta_sha256)
        except Exception as exc:  # noqa: BLE001 - reported: this is a health check
            problems.append(f"registered checkpoint {cid} does not verify: {exc}")
    meta = plane.store.get_meta(CAMPAIGN_KEY)
    if meta is None:
        return problems + ([] if plane.store.event_count() == 0 else ["events but no campaign meta"])
    return problems + _slot_problems(plane, meta) + _ledger_problems(plane)


def _slot_problems(plane: ControlPlane, meta: dict) -> list[str]:
    campaign_id, seed = str(meta["campaign_id"]), int(meta["config"]["seed"])
    tasks = load_tasks(Path(meta["tasks_dir"]), split="train")
    cursor = find_cursor(plane.store, campaign_id)
    prefix = slot_event_id(campaign_id, 0)[:-1]
    events = {e.event_id: e for e in plane.store.events() if e.event_id.startswith(prefix)}
    problems = []
    if set(events) != {slot_event_id(campaign_id, k) for k in range(cursor)}:
        problems.append(f"slot events are not exactly slots 0..{cursor - 1}: {sorted(events)[:5]}")
    expected: set[str] = set()
    for k in range(cursor):
        event = events.get(slot_event_id(campaign_id, k))
        episode_id = slot_episode_id(campaign_id, k)
        expected.add(episode_id)
        body = plane.store.episode_body(episode_id)
        if event is None or body is None:
            problems.append(f"slot {k}: event or episode {episode_id} missing")
            continue
        episode = Episode.model_validate_json(body)
        task, _ = slot_task(tasks, seed, k)
        if event.payload["episode_id"] != episode_id or episode.task_id != task.task_id:
            problems.append(
                f"slot {k}: event/episode {episode.task_id} is not the planned task {task.task_id}"
            )
        counted = bool(event.payload.get("admitted"))
        if counted != (episode.admission_status in ("admitted", "update_failed")):
            problems.append(f"slot {k}: counted admitted={counted} but stored {episode.admission_status}")
        if event.kind == "comparison.recorded":
            ref_id = reference_episode_id(campaign_id, episode_id)
            expected.add(ref_id)
            if plane.store.episode_body(ref_id) is None or episode.comparison is None:
                problems.append(f"slot {k}: compared, but its reference run or comparison is missing")
    stored = plane.store.episode_ids()
    if len(stored) != len(set(stored)) or set(stored) != expected:
        extra, missing = set(stored) - expected, expected - set(stored)
        problems.append(
            f"stored episodes differ from the committed slots: {len(extra)} extra, {len(missing)} missing"
        )
    counted: dict[str, int] = {}
    for event in plane.store.events():
        if event.kind in ("episode.recorded", "comparison.recorded"):
            counted[event.payload["episode_id"]] = counted.get(event.payload["episode_id"], 0) + 1
    twice = sorted(i for i, n in counted.items() if n > 1)
    if twice:
        problems.append(f"{len(twice)} episode(s) counted by more than one event, e.g. {twice[0]}")
    return problems


def _ledger_problems(plane: ControlPlane) -> list[str]:
    state = plane.state
    stored = set(plane.store.episode_ids())
    problems = []
    recorded = sum(e.kind == "episode.recorded" for e in plane.store.events())
    if state.episodes_recorded != recorded:
        problems.append(f"episodes_recorded {state.episodes_recorded} != {recorded} episode.recorded events")
    named = {e.episode_id for e in state.replay.entries}
    epoch = state.ledger.current
    if epoch is not None:
        named |= {
            *epoch.batch,
            *epoch.sealed,
            *epoch.monitored,
            *(i for b in epoch.failed_batches for i in b),
        }
    if not named <= stored:
        problems.append(f"ledger or lanes name {len(named - stored)} episode(s) that are not stored")
    lineage = state.lineage
    open_epoch = state.ledger.open_epoch
    if open_epoch is not None and open_epoch.phase == "monitoring" and lineage.active:
        if lineage.checkpoints[lineage.active].parent != lineage.pre_update_ref:
            problems.append("monitoring epoch whose pre_update_ref is not the parent of active")
    rollbacks = [
        e for e in plane.store.events() if e.kind == "epoch.closed" and e.payload["decision"] == "rollback"
    ]
    epochs = [s.epoch for s in state.ledger.history if s.close_reason == "rollback"]
    for event, number in zip(rollbacks, epochs, strict=False):
        path = plane.run_dir / "rollbacks" / f"{number}.json"
        if not path.exists():
            problems.append(f"rollback of epoch {number} has no diagnosis file")
        elif json.loads(path.read_text())["trigger_episodes"] != event.payload["trigger_episodes"]:
            problems.append(f"diagnosis of epoch {number} names other triggers than its close event")
    return problems

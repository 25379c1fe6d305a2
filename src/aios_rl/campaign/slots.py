"""Task slots of an online campaign: which task and seed slot ``k`` runs, and its deterministic ids.

Everything here is a pure function of the campaign id (a uuid4 drawn once when the campaign starts and
stored with it), the seed and the slot index, so a slot re-run after a kill produces the same episode ids
and the same event id, and re-committing it is a no-op. The cursor (the next slot to run) is the first
slot without a committed event.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

from aios_rl.contracts.episode import Task
from aios_rl.storage.db import RunStore


def slot_task(tasks: Sequence[Task], seed: int, k: int) -> tuple[Task, int]:
    """Slot ``k``'s task (each pass over the tasks is a fresh seeded shuffle) and its episode seed."""
    n = len(tasks)
    order = list(range(n))
    random.Random(seed * 1_000_003 + k // n).shuffle(order)
    return tasks[order[k % n]], random.Random(f"{seed}/{k}").randrange(1 << 30)


def slot_event_id(campaign_id: str, k: int) -> str:
    """The id of the one event that commits slot ``k`` (its episode, and its reference run if monitored)."""
    return f"campaign/{campaign_id}/task/{k}"


def slot_episode_id(campaign_id: str, k: int) -> str:
    """The id of slot ``k``'s episode under ``active``."""
    return str(uuid.uuid5(uuid.UUID(campaign_id), f"task/{k}/active"))


def reference_episode_id(campaign_id: str, episode_id: str) -> str:
    """The id of the matched reference run of a monitored episode."""
    return str(uuid.uuid5(uuid.UUID(campaign_id), f"{episode_id}/ref"))


def find_cursor(store: RunStore, campaign_id: str) -> int:
    """The first slot without a committed event (slots commit in order)."""
    k = 0
    while store.has_event(slot_event_id(campaign_id, k)):
        k += 1
    return k

"""Drawing candidate indices, optionally without replacement across the rows of one group.

A GRPO group of G rollouts from one reset state learns only from how its members differ. When the
student is confident, independent draws often give every member the same first patch, and the group
then has nothing to compare. Rows that share a group id here draw distinct actions instead: each row
draws from its own sampling distribution with the actions drawn by the earlier rows of its group taken
out and the rest renormalised (sequential sampling without replacement, the distribution Gumbel-top-k
draws from: Kool et al. 2019, https://arxiv.org/abs/1903.06059). A row whose distribution has no mass
left outside the earlier draws draws from the whole distribution again, so a group larger than the
candidate set (or a greedy regime) still gets an action for every row.

A caller may also keep the drawn actions of each group across calls (``drawn``): the rollout runner does
so to make a task's rollouts draw distinct actions at every state they share, over a whole group's
episodes, not only within one batched call.

The log-probability a policy records for such a draw stays the one under its own sampling distribution
(not the renormalised one), so the ratio against ``evaluate`` is 1 before an update as for any draw.
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence

import torch
from torch import Tensor

from aios_rl.contracts.errors import PolicyError

__all__ = ["draw_indices"]


def draw_indices(
    probs: Sequence[Tensor],
    candidates: Sequence[Sequence[str]],
    groups: Sequence[Hashable | None] | None,
    generator: torch.Generator | None,
    drawn: MutableMapping[Hashable, set[str]] | None = None,
) -> list[int]:
    """One candidate index per row, drawn from ``probs[b]`` (1-D, over ``candidates[b]``, summing to 1).

    Args:
        probs: each row's sampling distribution over its candidates.
        candidates: each row's candidate texts; a text listed twice is one action (both positions are
            taken out once it is drawn).
        groups: a group id per row; rows with the same id (not None) draw distinct actions in row order.
            None: every row draws independently.
        generator: CPU generator for reproducible draws.
        drawn: the actions each group drew in earlier calls, excluded like the earlier rows' (while mass is
            left) and updated in place with this call's draws. None: this call's rows only.

    Raises:
        PolicyError: ``groups`` does not have one id per row.
    """
    if groups is not None and len(groups) != len(probs):
        raise PolicyError(f"distinct: {len(groups)} group ids for {len(probs)} observations; give one per row")
    taken: MutableMapping[Hashable, set[str]] = {} if drawn is None else drawn
    out = []
    for b, (row, texts) in enumerate(zip(probs, candidates)):
        row = row.float().cpu()  # (C,)
        group = None if groups is None else groups[b]
        seen = taken.setdefault(group, set()) if group is not None else set()
        if seen:
            left = row.masked_fill(torch.tensor([t in seen for t in texts]), 0.0)
            row = left if float(left.sum()) > 0 else row
        index = int(torch.multinomial(row, 1, generator=generator))
        seen.add(texts[index])
        out.append(index)
    return out

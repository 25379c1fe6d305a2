"""The uniform-random candidate policy: the floor every trained student must clear."""

from __future__ import annotations

import math
from collections.abc import Hashable, MutableMapping, Sequence
from typing import Any

import torch

from aios_rl.contracts.episode import DecodingRegime, Observation
from aios_rl.contracts.errors import PolicyError
from aios_rl.policy.base import ActionSample, Evaluation
from aios_rl.policy.sampling import draw_indices


class UniformPolicy:
    """Chooses uniformly among the admissible candidates; has no parameters and learns nothing."""

    hidden_size = 0

    @property
    def last_act_metrics(self) -> dict[str, float]:
        """Always empty: a uniform draw has nothing to report (a property, so subclasses need no init)."""
        return {}

    def act(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        regime: DecodingRegime,
        generator: torch.Generator | None = None,
        distinct: Sequence[Hashable | None] | None = None,
        drawn: MutableMapping[Hashable, set[str]] | None = None,
    ) -> list[ActionSample]:
        """One uniform draw per observation; rows sharing a ``distinct`` id draw distinct candidates
        (and none that ``drawn`` holds for their id)."""
        if any(not obs.candidates for obs in observations):
            raise PolicyError("the uniform policy needs candidates to choose from")
        if distinct is None and drawn is None:
            indices = [int(torch.randint(len(obs.candidates), (1,), generator=generator)) for obs in observations]
        else:
            rows = [torch.full((len(obs.candidates),), 1.0 / len(obs.candidates)) for obs in observations]
            indices = draw_indices(rows, [obs.candidates for obs in observations], distinct, generator, drawn)
        samples = []
        for obs, index in zip(observations, indices):
            n = len(obs.candidates)
            samples.append(ActionSample(obs.candidates[index], index, -math.log(n), math.log(n), 0.0))
        return samples

    def evaluate(
        self, observations: Sequence[Observation], environments: Sequence[str], actions: Sequence[str]
    ) -> Evaluation:
        """Log-probability of each recorded action (its share of the candidates), as ``CompactStudent``'s.

        Raises:
            PolicyError: an empty batch, mismatched lengths, an observation without candidates, or an
                action that is not among its observation's candidates.
        """
        if not observations or len(actions) != len(observations):
            raise PolicyError(
                f"UniformPolicy.evaluate: {len(observations)} observations, {len(actions)} actions"
            )
        hits = [sum(c == a for c in o.candidates) for o, a in zip(observations, actions, strict=True)]
        if not all(hits):
            row = hits.index(0)
            raise PolicyError(f"UniformPolicy.evaluate: action {actions[row]!r} of row {row} is not among "
                              f"its {len(observations[row].candidates)} candidates")
        width = max(len(o.candidates) for o in observations)
        mask = torch.tensor([[i < len(o.candidates) for i in range(width)] for o in observations])  # (B, C)
        counts = mask.sum(dim=1).float()  # (B,)
        return Evaluation(
            logprobs=torch.tensor(hits, dtype=torch.float32).log() - counts.log(),
            entropy=counts.log(),
            values=torch.zeros(len(observations)),
            candidate_logits=torch.zeros(len(observations), width),
            candidate_mask=mask,
        )

    def parameters(self) -> list[torch.nn.Parameter]:
        return []

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        return None

    def config_dict(self) -> dict[str, Any]:
        return {"kind": "uniform"}

"""The compact CPU student: hashed n-gram bag encoders that score candidate actions (ARCHITECTURE §7).

Each step the student sees an observation and a list of candidate action strings and picks one. It
encodes the observation (hashed word/character n-gram bag + hashed numeric features + an environment
embedding) into a fixed-size vector ``o``, and every candidate (its own bag, an "edit" bag of what a patch
changes, hashed numeric features and two lexical-overlap features) into ``c`` of the same size; a small
MLP over ``[o, c, o * c]`` (the text scorer) gives one logit per candidate, and a value head reads ``o``.
A feature scorer sees only the numeric features of the candidate and the observation (including the
lexical overlap of the two texts) and the environment embedding, and adds its logit: it carries what transfers between repositories
(where the tests point, how suspicious a line is, whether the last patch failed).

The text scorer is off by default (``text_scorer``), a choice the shell learning benchmark justifies: on
held-out tasks after oracle distillation, the reference fix ranks first for 28 % of holdout tasks (top 6:
61 %) with the feature scorer alone and for 25 % (top 6: 42 %) with both, because the n-gram path fits the
training repositories' text instead of the cue that transfers. The observation encoder (value head,
hidden state for RAIL) reads the n-grams either way. Featurisation
lives in :mod:`aios_rl.policy.featurize` and is cached per text, because candidate strings recur across
steps, branches and the trainer's re-evaluation.

With the defaults (2^16 buckets x 48 dims) the network has about 3.3 M parameters, 95 % of them in the
embedding table, and scores a batch of 16 observations x 40 candidates in milliseconds on a CPU.

Probabilities are over action STRINGS: if a string appears at several candidate positions (duplicates
with different features), its probability is the sum over those positions, in ``act`` and ``evaluate``
alike, so the two agree whichever position was sampled.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from pydantic import Field, model_validator
from torch import Tensor, nn

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import DecodingRegime, Observation
from aios_rl.contracts.errors import ConfigError, PolicyError
from aios_rl.policy.base import ActionSample, Evaluation
from aios_rl.policy.featurize import (
    LEXICAL_FEATURES,
    CandidateText,
    FeatureHasher,
    HashedBag,
    TextHasher,
    lexical_overlap,
    stable_hash,
)
from aios_rl.policy.sampling import draw_indices

__all__ = ["CandidateScores", "CompactStudent", "CompactStudentConfig"]


class CompactStudentConfig(ConfigModel):
    """Sizes and featurisation settings of :class:`CompactStudent` (defaults: about 3.3 M parameters)."""

    buckets: int = Field(
        default=2**16, ge=16, le=2**31, description="Rows of the shared hashed n-gram embedding table."
    )
    embed_dim: int = Field(default=48, ge=1, description="Width of the n-gram embeddings.")
    hidden_size: int = Field(
        default=64, ge=1, description="Size of the observation and candidate encodings (ActionSample.hidden)."
    )
    mlp_size: int = Field(
        default=128, ge=1, description="Hidden width of the encoder, scorer and value MLPs."
    )
    feature_slots: int = Field(
        default=128,
        ge=2,
        description="Columns numeric feature names are hashed into (two signed slots per name).",
    )
    environments: tuple[str, ...] = Field(
        default=("shell", "browser", "orchestrator"),
        description="Environments with a reserved embedding row; other names are hashed into the rest.",
    )
    env_buckets: int = Field(default=32, ge=2, description="Rows of the environment embedding table.")
    env_dim: int = Field(default=16, ge=1, description="Width of the environment embedding.")
    char_ngram: int = Field(default=3, ge=0, description="Character n-gram length per word (0 disables).")
    diff_weight: float = Field(
        default=3.0, gt=0.0, description="Weight of a patch's changed (-/+) line tokens relative to others."
    )
    max_text_chars: int = Field(
        default=8000,
        ge=16,
        description="Longer texts keep their first and last half of this many characters.",
    )
    cache_size: int = Field(default=32768, ge=1, description="Featurised candidate texts kept (LRU).")
    observation_cache_size: int = Field(
        default=1024, ge=1, description="Featurised observation texts kept (LRU); each may be up to ~100 KB."
    )
    greedy_temperature: float = Field(
        default=1e-3,
        gt=0.0,
        description="act() takes the argmax (logprob 0) when the regime's temperature is below this.",
    )
    feature_scorer: bool = Field(
        default=True, description="Add a logit from the numeric features alone (see the module docstring)."
    )
    text_scorer: bool = Field(
        default=False, description="Add a logit from the candidate's n-gram encoding (see the module docstring)."
    )
    seed: int = Field(default=0, description="Seed of the parameter initialisation.")

    @model_validator(mode="after")
    def _check(self) -> CompactStudentConfig:
        if not (self.text_scorer or self.feature_scorer):
            raise ConfigError("compact student needs text_scorer or feature_scorer (or both) to score candidates")
        if len(set(self.environments)) != len(self.environments):
            raise ConfigError(
                f"compact.environments has duplicates: {list(self.environments)}; list each once"
            )
        if self.env_buckets <= len(self.environments):
            raise ConfigError(
                f"compact.env_buckets={self.env_buckets} must exceed the {len(self.environments)} reserved "
                f"environments so unknown ones have rows to hash into; set env_buckets >= "
                f"{len(self.environments) + 1}"
            )
        return self


@dataclass(frozen=True)
class CandidateScores:
    """One forward pass over B observations padded to C candidates."""

    logits: Tensor  # (B, C) candidate scores, 0 where mask is False
    mask: Tensor  # (B, C) bool, True at real candidates
    values: Tensor  # (B,) value-head estimates
    hidden: Tensor  # (B, H) observation encodings


@dataclass(frozen=True)
class _Bags:
    ids: Tensor  # (sum of bag lengths,) int64
    offsets: Tensor  # (n_bags,) int64
    weights: Tensor  # (sum of bag lengths,) float32


@dataclass(frozen=True)
class _Inputs:
    """One featurised batch: B observations holding N candidates in all, padded to C per row."""

    obs_bags: _Bags  # B bags
    cand_bags: _Bags  # N bags
    edit_bags: _Bags  # N bags
    obs_numeric: Tensor  # (B, S) hashed observation features
    cand_numeric: Tensor  # (N, S + LEXICAL_FEATURES) hashed candidate features + lexical overlap
    env: Tensor  # (B,) environment embedding rows
    row: Tensor  # (N,) row of each candidate
    col: Tensor  # (N,) position of each candidate in its row
    shape: tuple[int, int]  # (B, C)


class CompactStudent(nn.Module):
    """The compact candidate-scoring student (implements :class:`aios_rl.policy.base.Policy`).

    Example:
        >>> student = CompactStudent(CompactStudentConfig())
        >>> obs = Observation(text="FAILED tests/test_a.py::test_sum", candidates=["read a.py", "stop done"])
        >>> [s.action in obs.candidates for s in student.act([obs], ["shell"], DecodingRegime())]
        [True]
    """

    def __init__(self, config: CompactStudentConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config if config is not None else CompactStudentConfig()
        self.hidden_size = cfg.hidden_size
        self.last_act_metrics: dict[str, float] = {}  # nothing to report: it only picks among candidates
        self.text_hasher = TextHasher(
            cfg.buckets,
            cfg.char_ngram,
            cfg.diff_weight,
            cfg.max_text_chars,
            cfg.cache_size,
            cfg.observation_cache_size,
        )
        self.feature_hasher = FeatureHasher(cfg.feature_slots)
        self._env_rows = {name: i for i, name in enumerate(cfg.environments)}
        d, h, m, s = cfg.embed_dim, cfg.hidden_size, cfg.mlp_size, cfg.feature_slots
        # Same weights for the same config, whatever the caller's global RNG state.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            # One table for observation and candidate n-grams: a word shared by a traceback and a patch
            # maps to the same row, which the o * c interaction can pick up.
            self.embed = nn.EmbeddingBag(cfg.buckets, d, mode="sum")
            self.env_embed = nn.Embedding(cfg.env_buckets, cfg.env_dim)
            self.obs_encoder = _mlp(d + s + cfg.env_dim, m, h, norm=True)
            self.cand_encoder = _mlp(2 * d + s + LEXICAL_FEATURES, m, h, norm=True) if cfg.text_scorer else None
            self.scorer = _mlp(3 * h, m, 1) if cfg.text_scorer else None
            self.value_head = _mlp(h, m, 1)
            self.feature_head = _mlp(2 * s + LEXICAL_FEATURES + cfg.env_dim, m, 1) if cfg.feature_scorer else None

    # ------------------------------------------------------------------ Policy protocol

    def act(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        regime: DecodingRegime,
        generator: torch.Generator | None = None,
        distinct: Sequence[Hashable | None] | None = None,
        drawn: MutableMapping[Hashable, set[str]] | None = None,
    ) -> list[ActionSample]:
        """Sample one candidate per observation under ``regime`` (no gradients).

        Temperature divides the logits, then top-p keeps the smallest set of most likely candidates whose
        tempered mass reaches ``top_p`` (Holtzman et al. 2020, https://arxiv.org/abs/1904.09751), and the
        kept probabilities are renormalised. Below ``config.greedy_temperature`` the argmax is taken
        (first on ties) and its sampling logprob is 0.

        Args:
            observations: B observations, each with at least one candidate.
            environments: the environment id of each observation.
            regime: temperature and top-p.
            generator: CPU generator for reproducible sampling (the global RNG when None).
            distinct: a group id per observation; in a sampled regime, rows of one group draw distinct
                candidates while their distributions have mass left (``policy.sampling.draw_indices``).
                None: independent draws. A greedy regime takes the argmax either way.
            drawn: the actions each ``distinct`` group drew in earlier calls (excluded too; updated in place).

        Returns:
            One :class:`ActionSample` per observation: ``logprob`` under the sampling distribution
            (tempered, nucleus-truncated, summed over duplicate positions of the action string),
            ``entropy`` of the untempered distribution, ``value`` and ``hidden`` (the observation
            encoding).

        Raises:
            PolicyError: an observation has no candidates, misaligned candidate features, or the
                lengths of ``observations`` and ``environments`` differ.
        """
        if not observations:
            _check_lengths(observations, environments)
            return []
        with torch.no_grad():
            scores = self(observations, environments)
            logits, mask = scores.logits.float().cpu(), scores.mask.cpu()
            entropy = _entropy_from_logits(logits, mask)  # (B,)
            if regime.temperature < self.config.greedy_temperature:
                index = logits.masked_fill(~mask, -math.inf).argmax(-1)  # (B,)
                probs = torch.zeros_like(logits).scatter_(1, index[:, None], 1.0)  # (B, C)
            else:
                probs = _sampling_probs(logits, mask, regime.temperature, regime.top_p)  # (B, C)
                if distinct is None and drawn is None:
                    index = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (B,)
                else:
                    rows = [probs[b, : len(o.candidates)] for b, o in enumerate(observations)]
                    texts = [o.candidates for o in observations]
                    index = torch.tensor(draw_indices(rows, texts, distinct, generator, drawn))  # (B,)
        samples = []
        for b, obs in enumerate(observations):
            j = int(index[b])
            action = obs.candidates[j]
            p = sum(float(probs[b, k]) for k, c in enumerate(obs.candidates) if c == action)
            samples.append(
                ActionSample(
                    action=action,
                    index=j,
                    logprob=math.log(p),
                    entropy=float(entropy[b]),
                    value=float(scores.values[b]),
                    hidden=tuple(scores.hidden[b].tolist()),
                )
            )
        return samples

    def evaluate(
        self, observations: Sequence[Observation], environments: Sequence[str], actions: Sequence[str]
    ) -> Evaluation:
        """Re-score recorded actions with gradients, under the UNTEMPERED distribution.

        Args:
            observations: B observations, each with at least one candidate.
            environments: the environment id of each observation.
            actions: the action taken at each observation; must be one of its candidates.

        Returns:
            :class:`Evaluation` with ``logprobs`` (log of the summed probability of every position holding
            the action string), ``entropy``, ``values``, ``candidate_logits`` (padding entries are 0: use
            ``candidate_mask``) and ``candidate_mask``, all ``(B,)`` or ``(B, C)``.

        Raises:
            PolicyError: an empty batch, mismatched lengths, an observation without candidates, or an
                action that is not among its observation's candidates (named in the message).
        """
        if not observations:
            raise PolicyError("CompactStudent.evaluate: empty batch; pass at least one observation")
        if len(actions) != len(observations):
            raise PolicyError(
                f"CompactStudent.evaluate: {len(observations)} observations but {len(actions)} actions"
            )
        scores = self(observations, environments)
        match = torch.zeros_like(scores.mask)  # (B, C) positions holding the recorded action string
        for b, (obs, action) in enumerate(zip(observations, actions)):
            hits = [k for k, c in enumerate(obs.candidates) if c == action]
            if not hits:
                raise PolicyError(
                    f"CompactStudent.evaluate: action {action!r} of row {b} is not among its "
                    f"{len(obs.candidates)} candidates (first: {obs.candidates[:3]!r})"
                )
            match[b, hits] = True
        logp, _ = _masked_log_softmax(scores.logits, scores.mask)  # (B, C)
        logprobs = logp.masked_fill(~match, -math.inf).logsumexp(-1)  # (B,)
        return Evaluation(
            logprobs=logprobs,
            entropy=_entropy_from_logits(scores.logits, scores.mask),
            values=scores.values,
            candidate_logits=scores.logits,
            candidate_mask=scores.mask,
        )

    def config_dict(self) -> dict[str, Any]:
        """The config as a JSON-serialisable dict (rebuild with :meth:`from_config_dict`)."""
        return self.config.model_dump(mode="json")

    @classmethod
    def from_config_dict(cls, data: dict[str, Any]) -> CompactStudent:
        """A freshly initialised student built from :meth:`config_dict` output (then load its state dict)."""
        return cls(CompactStudentConfig.model_validate(data))

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    # ------------------------------------------------------------------ network

    def forward(self, observations: Sequence[Observation], environments: Sequence[str]) -> CandidateScores:
        """Score every candidate of every observation (with gradients unless the caller disables them).

        Raises:
            PolicyError: as :meth:`act`, and on an empty batch.
        """
        x = self._inputs(observations, environments)
        obs_bag = self._embed(x.obs_bags)  # (B, D)
        env = self.env_embed(x.env)  # (B, E)
        o = self.obs_encoder(torch.cat([obs_bag, x.obs_numeric, env], dim=-1))  # (B, H)
        flat = o.new_zeros(x.row.shape[0])  # (N,)
        if self.cand_encoder is not None and self.scorer is not None:
            cand_bag, edit_bag = self._embed(x.cand_bags), self._embed(x.edit_bags)  # (N, D) each
            c = self.cand_encoder(torch.cat([cand_bag, edit_bag, x.cand_numeric], dim=-1))  # (N, H)
            o_n = o[x.row]  # (N, H)
            flat = flat + self.scorer(torch.cat([o_n, c, o_n * c], dim=-1)).squeeze(-1)
        if self.feature_head is not None:
            numeric = torch.cat([x.cand_numeric, x.obs_numeric[x.row], env[x.row]], dim=-1)  # (N, 2S + LEX + E)
            flat = flat + self.feature_head(numeric).squeeze(-1)
        # Only real candidates are scored, then scattered: padding cannot influence any row.
        logits = flat.new_zeros(x.shape).index_put((x.row, x.col), flat)  # (B, C)
        mask = torch.zeros(x.shape, dtype=torch.bool, device=flat.device)
        mask[x.row, x.col] = True  # (B, C)
        return CandidateScores(logits=logits, mask=mask, values=self.value_head(o).squeeze(-1), hidden=o)

    def _inputs(self, observations: Sequence[Observation], environments: Sequence[str]) -> _Inputs:
        """Featurise a batch (cached per text) into the tensors :meth:`forward` consumes."""
        _check_lengths(observations, environments)
        if not observations:
            raise PolicyError("CompactStudent: empty batch; pass at least one observation")
        obs_texts = [self.text_hasher.observation(o.text) for o in observations]
        rows: list[int] = []
        cols: list[int] = []
        cand_texts: list[CandidateText] = []
        cand_feats: list[Mapping[str, float]] = []
        lexical: list[tuple[float, float]] = []
        for b, obs in enumerate(observations):
            _check_candidates(obs, b)
            feats = obs.candidate_features or [{}] * len(obs.candidates)
            for j, text in enumerate(obs.candidates):
                ct = self.text_hasher.candidate(text)
                rows.append(b)
                cols.append(j)
                cand_texts.append(ct)
                cand_feats.append(feats[j])
                lexical.append(lexical_overlap(obs_texts[b], ct))
        cand_numeric = np.concatenate(
            [self.feature_hasher.matrix(cand_feats), np.asarray(lexical, dtype=np.float32)], axis=1
        )  # (N, S + LEXICAL_FEATURES)
        device = self.embed.weight.device
        return _Inputs(
            obs_bags=_pack([t.bag for t in obs_texts], device),
            cand_bags=_pack([t.bag for t in cand_texts], device),
            edit_bags=_pack([t.edit for t in cand_texts], device),
            obs_numeric=self._tensor(self.feature_hasher.matrix([o.features for o in observations])),
            cand_numeric=self._tensor(cand_numeric),
            env=torch.tensor([self.environment_row(e) for e in environments], device=device),
            row=torch.tensor(rows, device=device),
            col=torch.tensor(cols, device=device),
            shape=(len(observations), max(len(o.candidates) for o in observations)),
        )

    def environment_row(self, environment: str) -> int:
        """Embedding row of an environment id: its reserved row, else a stable hash into the others."""
        row = self._env_rows.get(environment)
        if row is not None:
            return row
        reserved = len(self._env_rows)
        return reserved + stable_hash(environment) % (self.config.env_buckets - reserved)

    def _embed(self, bags: _Bags) -> Tensor:
        return self.embed(bags.ids, bags.offsets, per_sample_weights=bags.weights)  # (n_bags, D)

    def _tensor(self, array: np.ndarray) -> Tensor:
        return torch.from_numpy(array).to(self.embed.weight.device)


# ---------------------------------------------------------------------- helpers


def _mlp(n_in: int, n_hidden: int, n_out: int, norm: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(n_in, n_hidden), nn.GELU(), nn.Linear(n_hidden, n_out)]
    if norm:
        layers.append(nn.LayerNorm(n_out))  # encodings on one scale for o * c and for RAIL's features
    return nn.Sequential(*layers)


def _pack(bags: Sequence[HashedBag], device: torch.device) -> _Bags:
    lengths = np.fromiter((b.ids.size for b in bags), dtype=np.int64, count=len(bags))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    ids = np.concatenate([b.ids for b in bags]).astype(np.int64) if bags else np.zeros(0, np.int64)
    weights = np.concatenate([b.weights for b in bags]) if bags else np.zeros(0, np.float32)
    return _Bags(
        ids=torch.from_numpy(ids).to(device),
        offsets=torch.from_numpy(offsets).to(device),
        weights=torch.from_numpy(weights).to(device),
    )


def _check_lengths(observations: Sequence[Observation], environments: Sequence[str]) -> None:
    if len(environments) != len(observations):
        raise PolicyError(
            f"CompactStudent: {len(observations)} observations but {len(environments)} environment ids; "
            "pass one environment id per observation"
        )


def _check_candidates(obs: Observation, row: int) -> None:
    if not obs.candidates:
        raise PolicyError(
            f"CompactStudent: observation {row} has no candidates; the compact student only scores "
            "candidate actions (use the causal-LM student for free generation)"
        )
    if obs.candidate_features and len(obs.candidate_features) != len(obs.candidates):
        raise PolicyError(
            f"CompactStudent: observation {row} has {len(obs.candidates)} candidates but "
            f"{len(obs.candidate_features)} candidate_features; give one dict per candidate or none"
        )


def _sampling_probs(logits: Tensor, mask: Tensor, temperature: float, top_p: float) -> Tensor:
    """Tempered, nucleus-truncated, renormalised candidate probabilities, 0 outside the kept set."""
    logp, _ = _masked_log_softmax(logits / temperature, mask)  # (B, C)
    probs = torch.where(mask, logp.exp(), 0.0)  # (B, C)
    if top_p >= 1.0:  # keep everything; avoids dropping a tail candidate to cumsum round-off
        return probs
    sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)  # (B, C)
    before = sorted_p.cumsum(-1) - sorted_p  # mass of the strictly more likely candidates
    keep = torch.zeros_like(mask).scatter(-1, order, before < top_p)  # (B, C); the top-1 always stays
    probs = torch.where(keep, probs, 0.0)
    return probs / probs.sum(-1, keepdim=True)


# masked_log_softmax / entropy_from_logits of aios_rl.algos.losses, restated here because policy/ sits
# left of algos/ in the import chain (tests/test_import_direction.py); a test checks they agree.


def _masked_log_softmax(logits: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    filled = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    return torch.log_softmax(filled, dim=-1).masked_fill(~mask, 0.0), mask  # (..., C)


def _entropy_from_logits(logits: Tensor, mask: Tensor) -> Tensor:
    logp, _ = _masked_log_softmax(logits, mask)  # (..., C)
    return -(torch.where(mask, logp.exp(), 0.0) * logp).sum(-1)  # (...,)

"""Hashed featurisation of texts and numeric features for the compact student (ARCHITECTURE §7).

Texts become weighted bags of ids into one shared embedding table (the hashing trick, Weinberger et al.
2009, https://arxiv.org/abs/0902.2206, with fastText's character n-grams, Bojanowski et al. 2017,
https://arxiv.org/abs/1607.04606): lower-cased word unigrams and bigrams plus character n-grams of each
word. A ``patch`` candidate's unified diff is parsed so its changed ``-``/``+`` lines weigh more and carry
role-tagged ids (removed, added, file, enclosing function), and it gets a second, small "edit" bag holding
what the patch takes out, what it puts in and the (out, in) pairs, e.g. ``<`` -> ``<=``.

Numeric feature dicts, whose keys differ per environment, are hashed by NAME into a fixed number of
signed slots: no vocabulary has to be learned or stored with the checkpoint, and a new environment's
keys just work. Each name writes into two slots (with independent signs), so two names that collide in
one slot are still told apart by the other; values are squashed with ``sign(x) * log1p(|x|)`` so counts
and flags share one scale.

Hashes come from ``zlib.crc32`` mixed with splitmix64, so they are stable across processes (Python's
``hash`` is salted per process) and a checkpoint means the same thing wherever it is loaded.
"""

from __future__ import annotations

import keyword
import re
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from aios_rl.contracts.code_tokens import CODE_TOKEN

__all__ = [
    "LEXICAL_FEATURES",
    "CandidateText",
    "FeatureHasher",
    "HashedBag",
    "LRUCache",
    "ObservationText",
    "TextHasher",
    "lexical_overlap",
    "stable_hash",
]

K = TypeVar("K")
V = TypeVar("V")

LEXICAL_FEATURES = 2  # columns appended by lexical_overlap: fraction and log-count of shared words

_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")
_STOP = frozenset(keyword.kwlist) | {"self", "cls", "none", "true", "false"}
_MASK64 = (1 << 64) - 1
_BIGRAM_PRIME = np.uint64(1_000_003)
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_CHAR_WEIGHT = 0.35  # a word yields several n-grams; keep their sum comparable to the word's own id


def stable_hash(text: str, seed: int = 0) -> int:
    """A 32-bit hash of ``text`` that is the same in every process (crc32 seeded with ``seed``)."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"), seed & 0xFFFFFFFF)


def _salt(role: str) -> np.uint64:
    return np.uint64(stable_hash(role, 0x5EED) * 0x9E3779B97F4A7C15 & _MASK64)


def _mix(keys: np.ndarray, salt: np.uint64) -> np.ndarray:
    """splitmix64 finaliser of ``keys ^ salt``: spreads 32-bit crc values over 64 bits per role."""
    x = keys ^ salt
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


_ROLES = {
    r: _salt(r)
    for r in ("word", "bigram", "char", "kind", "file", "func", "del", "add", "lost", "gained", "pair")
}


class LRUCache(Generic[K, V]):
    """A bounded least-recently-used cache (an OrderedDict; deep-copies and pickles with its owner)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()

    def get_or_compute(self, key: K, compute: Callable[[K], V]) -> V:
        """The cached value of ``key``, computing and storing it (evicting the oldest) on a miss."""
        try:
            self._data.move_to_end(key)
            return self._data[key]
        except KeyError:
            value = compute(key)
            self._data[key] = value
            if len(self._data) > self.maxsize:
                self._data.popitem(last=False)
            return value

    def __len__(self) -> int:
        return len(self._data)


@dataclass(frozen=True)
class HashedBag:
    """One text as a weighted bag of embedding rows (input of ``nn.EmbeddingBag`` in ``sum`` mode).

    Weights are L2-normalised so the bag's embedding has the same scale for a 10-token candidate and a
    2,000-token observation at initialisation; an empty bag embeds to zeros.
    """

    ids: np.ndarray  # (N,) int32 rows of the embedding table (int32 halves what the caches hold)
    weights: np.ndarray  # (N,) float32


@dataclass(frozen=True)
class ObservationText:
    """A featurised observation text: its bag and the identifier words it mentions."""

    bag: HashedBag
    words: frozenset[str]


@dataclass(frozen=True)
class CandidateText:
    """A featurised candidate action.

    Attributes:
        kind: the first word of the action (``read``, ``run``, ``stop``, ``patch``, ...), lower-cased.
        bag: all of the candidate's tokens (a patch's changed lines weighted ``diff_weight``).
        edit: the kind plus, for patches, the tokens removed, the tokens added and their pairs.
        words: identifier words the candidate is about (for a patch: changed lines, file, function).
    """

    kind: str
    bag: HashedBag
    edit: HashedBag
    words: frozenset[str]


class _BagBuilder:
    """Collects (keys, role, weight) groups and hashes them into one bag."""

    def __init__(self, buckets: int) -> None:
        self.buckets = np.uint64(buckets)
        self.ids: list[np.ndarray] = []
        self.weights: list[np.ndarray] = []

    def add(self, keys: np.ndarray, role: str, weight: float) -> None:
        if keys.size:
            self.ids.append((_mix(keys, _ROLES[role]) % self.buckets).astype(np.int32))
            self.weights.append(np.full(keys.size, weight, dtype=np.float32))

    def build(self) -> HashedBag:
        if not self.ids:
            return HashedBag(np.zeros(0, np.int32), np.zeros(0, np.float32))
        w = np.concatenate(self.weights)
        return HashedBag(np.concatenate(self.ids), w / np.float32(np.linalg.norm(w)))


class TextHasher:
    """Turns observation and candidate texts into hashed bags, with per-text and per-word LRU caches.

    Args:
        buckets: rows of the embedding table the ids index.
        char_ngram: length of the character n-grams of each word (0 disables them).
        diff_weight: weight of a patch's changed-line tokens relative to other tokens.
        max_chars: texts longer than this keep their first and last ``max_chars // 2`` characters (the
            prompt and the latest test summary sit at the two ends of an observation).
        cache_size: candidate texts kept (they recur across steps; a patch bag is ~2 KB).
        observation_cache_size: observation texts kept (mostly new each step, so this cache only serves
            re-evaluation soon after acting; a long observation's bag is up to ~100 KB).
    """

    def __init__(
        self,
        buckets: int,
        char_ngram: int,
        diff_weight: float,
        max_chars: int,
        cache_size: int,
        observation_cache_size: int,
    ) -> None:
        self.buckets = buckets
        self.char_ngram = char_ngram
        self.diff_weight = diff_weight
        self.max_chars = max_chars
        self._observations: LRUCache[str, ObservationText] = LRUCache(observation_cache_size)
        self._candidates: LRUCache[str, CandidateText] = LRUCache(cache_size)
        self._words: LRUCache[str, tuple[int, np.ndarray]] = LRUCache(4 * cache_size)

    def observation(self, text: str) -> ObservationText:
        """The (cached) featurisation of an observation text."""
        return self._observations.get_or_compute(text, self._observation)

    def candidate(self, text: str) -> CandidateText:
        """The (cached) featurisation of a candidate action text."""
        return self._candidates.get_or_compute(text, self._candidate)

    def _observation(self, text: str) -> ObservationText:
        tokens = self._tokens(text)
        bag = _BagBuilder(self.buckets)
        self._add_plain(bag, tokens, 1.0)
        return ObservationText(bag.build(), _content_words(tokens))

    def _candidate(self, text: str) -> CandidateText:
        head, _, body = self._cap(text).partition("\n")
        head_tokens = _tokenize(head)
        kind = head_tokens[0] if head_tokens else ""
        bag, edit = _BagBuilder(self.buckets), _BagBuilder(self.buckets)
        kind_key = np.array([stable_hash(kind)], dtype=np.uint64)
        bag.add(kind_key, "kind", 1.0)
        edit.add(kind_key, "kind", 1.0)
        self._add_plain(bag, head_tokens, 1.0)
        if kind != "patch":
            self._add_plain(bag, _tokenize(body), 1.0)
            words = _content_words(head_tokens[1:] + _tokenize(body))
            return CandidateText(kind, bag.build(), edit.build(), words)
        parts = _parse_diff(body)
        w = self.diff_weight
        for role, tokens, weight in (("file", parts.file, 1.0), ("func", parts.func, 1.0),
                                     ("del", parts.removed, w), ("add", parts.added, w)):  # fmt: skip
            self._add_plain(bag, tokens, weight)
            bag.add(self._word_keys(tokens), role, weight)
        self._add_plain(bag, parts.context, 1.0)
        self._add_edit(edit, parts.removed, parts.added)
        focus = parts.removed + parts.added + parts.func + parts.file
        return CandidateText(kind, bag.build(), edit.build(), _content_words(focus))

    def _add_plain(self, bag: _BagBuilder, tokens: list[str], weight: float) -> None:
        entries = [self._word(t) for t in tokens]  # one cache lookup per token for both uses
        keys = np.fromiter((e[0] for e in entries), dtype=np.uint64, count=len(entries))  # (T,)
        bag.add(keys, "word", weight)
        if keys.size > 1:
            bag.add(keys[:-1] * _BIGRAM_PRIME + keys[1:], "bigram", weight)
        if self.char_ngram > 0 and entries:
            bag.add(np.concatenate([e[1] for e in entries]), "char", weight * _CHAR_WEIGHT)

    def _add_edit(self, edit: _BagBuilder, removed: list[str], added: list[str]) -> None:
        # Multiset differences: a context token that appears on both sides is not part of the edit.
        before, after = Counter(removed), Counter(added)
        lost, gained = list((before - after).elements()), list((after - before).elements())
        lost_keys, gained_keys = self._word_keys(lost[:8]), self._word_keys(gained[:8])
        edit.add(self._word_keys(lost), "lost", 1.0)
        edit.add(self._word_keys(gained), "gained", 1.0)
        pairs = (lost_keys[:, None] * _BIGRAM_PRIME + gained_keys[None, :]).ravel()  # (L * G,)
        edit.add(pairs, "pair", 1.0)

    def _word_keys(self, tokens: Sequence[str]) -> np.ndarray:
        return np.fromiter((self._word(t)[0] for t in tokens), dtype=np.uint64, count=len(tokens))

    def _word(self, token: str) -> tuple[int, np.ndarray]:
        return self._words.get_or_compute(token, self._hash_word)

    def _hash_word(self, token: str) -> tuple[int, np.ndarray]:
        n = self.char_ngram
        grams: list[int] = []
        if n > 0 and len(token) >= n and token[0].isalpha():
            padded = f"<{token}>"
            grams = [stable_hash(padded[i : i + n], 0xC4A2) for i in range(len(padded) - n + 1)]
        return stable_hash(token), np.array(grams, dtype=np.uint64)

    def _tokens(self, text: str) -> list[str]:
        return _tokenize(self._cap(text))

    def _cap(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        half = self.max_chars // 2
        return f"{text[:half]}\n{text[-half:]}"


@dataclass(frozen=True)
class _DiffParts:
    file: list[str]
    func: list[str]
    removed: list[str]
    added: list[str]
    context: list[str]


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _parse_diff(body: str) -> _DiffParts:
    """Split a unified diff into file-header, function-context, removed, added and context tokens.

    A hunk ends after the line counts its ``@@`` header gives, so a next file's ``---``/``+++`` header
    is read as a header, not as removed and added code (a header without counts keeps its hunk open).
    """
    parts = _DiffParts([], [], [], [], [])
    in_hunk = False
    old_left = new_left = -1  # lines of the current hunk still to come; -1: unknown
    for line in body.split("\n"):
        if in_hunk and old_left == new_left == 0:
            in_hunk = False
        if not in_hunk and line.startswith(("--- ", "+++ ")):
            path = line[4:].split("\t")[0].strip()
            parts.file.extend(_tokenize(re.sub(r"^[ab]/", "", path)))
        elif line.startswith("@@"):
            in_hunk = True
            counts = _HUNK.match(line)
            old_left, new_left = (-1, -1) if counts is None else (
                int(counts.group(1) or 1), int(counts.group(2) or 1))
            parts.func.extend(_tokenize(line.split("@@", 2)[-1]))  # git's "@@ ... @@ def f(" context
        elif in_hunk and line.startswith("-"):
            old_left -= 1
            parts.removed.extend(_tokenize(line[1:]))
        elif in_hunk and line.startswith("+"):
            new_left -= 1
            parts.added.extend(_tokenize(line[1:]))
        else:
            if in_hunk and line.startswith(" "):
                old_left, new_left = old_left - 1, new_left - 1
            text = line[1:] if line.startswith(" ") else line
            if (m := _DEF.match(text)) is not None:
                parts.func.append(m.group(1).lower())
            parts.context.extend(_tokenize(text))
    return parts


def _tokenize(text: str) -> list[str]:
    return CODE_TOKEN.findall(text.lower())


def _content_words(tokens: Iterable[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if len(t) >= 3 and (t[0].isalpha() or t[0] == "_") and t not in _STOP)


def lexical_overlap(observation: ObservationText, candidate: CandidateText) -> tuple[float, float]:
    """How much of what a candidate is about the observation mentions.

    A traceback names the failing function, file and source line; a patch that touches those is a
    better bet. The network cannot compute set overlap from two bag embeddings, so it gets it as input.

    Returns:
        ``(fraction of the candidate's words found in the observation, log1p(number found))``.
    """
    if not candidate.words:
        return 0.0, 0.0
    shared = len(candidate.words & observation.words)
    return shared / len(candidate.words), float(np.log1p(shared))


class FeatureHasher:
    """Maps ``{name: value}`` dicts with environment-specific names onto ``slots`` fixed columns.

    Args:
        slots: width of the output vectors.
        cache_size: feature names whose slots are remembered.
    """

    def __init__(self, slots: int, cache_size: int = 4096) -> None:
        self.slots = slots
        self._names: LRUCache[str, tuple[int, int, float, float]] = LRUCache(cache_size)

    def matrix(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """A ``(len(rows), slots)`` float32 matrix: each value squashed, signed, added to its two slots.

        Rows are handled in groups that share their names in order (an environment's candidates usually do),
        a group's values as one array; within a row, contributions are summed in the row's name order.
        """
        out = np.zeros((len(rows), self.slots), dtype=np.float32)
        groups: dict[tuple[str, ...], list[int]] = {}
        for r, row in enumerate(rows):
            if row:
                groups.setdefault(tuple(row), []).append(r)
        for names, members in groups.items():
            places = [self._names.get_or_compute(name, self._place) for name in names]
            cols = np.array([c for a, b, _, _ in places for c in (a, b)], dtype=np.int64)  # (2K,) a1 b1 a2 b2 ...
            signs = np.array([s for _, _, sa, sb in places for s in (sa, sb)], dtype=np.float32)  # (2K,)
            values = np.array([list(rows[r].values()) for r in members], dtype=np.float64)  # (R, K)
            # Contracts accept any finite float; past float32's range the cast would give inf and NaN logits.
            values = np.clip(values, -_FLOAT32_MAX, _FLOAT32_MAX).astype(np.float32)
            v = np.repeat(values, 2, axis=1) * signs  # (R, 2K)
            # Two slots per name: scale by 1/sqrt(2) so a feature's total energy does not double.
            squashed = np.sign(v) * np.log1p(np.abs(v)) / np.sqrt(2)
            rows_of = np.asarray(members)
            for j, col in enumerate(cols):  # in the row's name order, as colliding names add up
                out[rows_of, col] += squashed[:, j]
        return out

    def _place(self, name: str) -> tuple[int, int, float, float]:
        h1, h2 = stable_hash(name, 0xFEA1), stable_hash(name, 0xFEA2)
        a = h1 % self.slots
        b = (a + 1 + h2 % (self.slots - 1)) % self.slots  # always a different slot than a
        return a, b, 1.0 if h1 >> 31 else -1.0, 1.0 if h2 >> 31 else -1.0

"""draw_indices: rows of one group draw distinct actions, with the without-replacement distribution."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch

from aios_rl.contracts.episode import DecodingRegime, Observation
from aios_rl.contracts.errors import PolicyError
from aios_rl.policy.compact import CompactStudent, CompactStudentConfig
from aios_rl.policy.sampling import draw_indices
from aios_rl.policy.uniform import UniformPolicy


def test_a_group_draws_the_sequential_without_replacement_distribution() -> None:
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    texts = ["a", "b", "c", "d"]
    generator = torch.Generator().manual_seed(0)
    draws = 20_000
    pairs = Counter(tuple(draw_indices([p, p], [texts, texts], ["g", "g"], generator)) for _ in range(draws))
    for i, j in itertools.permutations(range(4), 2):
        expected = float(p[i] * p[j] / (1 - p[i]))  # P(first i) * P(second j | i taken out)
        assert pairs[(i, j)] / draws == pytest.approx(expected, abs=0.012)
    assert all(i != j for i, j in pairs)


def test_rows_without_a_group_draw_independently() -> None:
    p = torch.tensor([0.9, 0.1])
    generator = torch.Generator().manual_seed(1)
    draws = [draw_indices([p, p], [["a", "b"]] * 2, [None, None], generator) for _ in range(400)]
    assert sum(d == [0, 0] for d in draws) / 400 == pytest.approx(0.81, abs=0.06)
    independent = [draw_indices([p, p], [["a", "b"]] * 2, None, generator) for _ in range(400)]
    assert sum(d == [0, 0] for d in independent) / 400 == pytest.approx(0.81, abs=0.06)


def test_groups_are_separate_and_exhausted_groups_draw_again_from_everything() -> None:
    p = torch.tensor([0.2, 0.0, 0.8])  # one candidate has no mass: it is never drawn
    texts = ["a", "b", "c"]
    generator = torch.Generator().manual_seed(2)
    for _ in range(50):
        out = draw_indices([p] * 5, [texts] * 5, ["x", "y", "x", "x", "y"], generator)
        assert {out[0], out[2]} == {0, 2}  # group x: both candidates with mass, once each
        assert out[1] != out[4]  # group y: distinct
        assert out[3] in (0, 2)  # x has nothing left: a plain draw, never the massless candidate
    one_hot = torch.tensor([0.0, 1.0, 0.0])  # a greedy row
    assert draw_indices([one_hot] * 3, [texts] * 3, ["g"] * 3, generator) == [1, 1, 1]


def test_a_text_listed_twice_is_one_action() -> None:
    p = torch.tensor([0.4, 0.4, 0.2])
    generator = torch.Generator().manual_seed(3)
    for _ in range(50):
        first, second = draw_indices([p, p], [["a", "a", "b"]] * 2, ["g", "g"], generator)
        if first in (0, 1):
            assert second == 2


def test_drawn_carries_a_groups_draws_across_calls_and_is_updated_in_place() -> None:
    p = torch.tensor([0.7, 0.2, 0.1])
    texts = ["a", "b", "c"]
    generator = torch.Generator().manual_seed(4)
    for _ in range(50):
        drawn: dict = {}
        calls = [draw_indices([p], [texts], ["g"], generator, drawn)[0] for _ in range(3)]
        assert sorted(calls) == [0, 1, 2] and drawn == {"g": {"a", "b", "c"}}
        assert draw_indices([p], [texts], ["h"], generator, drawn)[0] in (0, 1, 2)  # other groups are free
    repeats = sum(len(set(draw_indices([p], [texts], ["g"], generator)[0] for _ in range(3))) < 3
                  for _ in range(50))
    assert repeats > 40  # without the memory, separate calls repeat the likely action


def test_one_group_id_per_row() -> None:
    with pytest.raises(PolicyError, match="one per row"):
        draw_indices([torch.tensor([1.0])], [["a"]], ["g", "g"], None)


def observation(n: int) -> Observation:
    return Observation(text="1 failed", candidates=[f"patch {i}" for i in range(n)])


def test_the_compact_student_draws_distinct_first_actions_and_records_its_own_logprobs() -> None:
    student = CompactStudent(CompactStudentConfig(seed=0))
    obs = [observation(6)] * 4
    regime = DecodingRegime(temperature=1.0)
    for seed in range(20):
        samples = student.act(obs, ["shell"] * 4, regime, torch.Generator().manual_seed(seed), distinct=["t"] * 4)
        assert len({s.action for s in samples}) == 4
        evaluation = student.evaluate(obs, ["shell"] * 4, [s.action for s in samples])
        recorded = torch.tensor([s.logprob for s in samples])
        assert torch.allclose(recorded, evaluation.logprobs, atol=1e-5)  # ratio 1 before an update
    repeats = 0
    for seed in range(20):
        plain = student.act(obs, ["shell"] * 4, regime, torch.Generator().manual_seed(seed))
        repeats += len({s.action for s in plain}) < 4
    assert repeats > 0  # independent draws do repeat here, so the assertion above could fail
    greedy = student.act(obs, ["shell"] * 4, DecodingRegime(temperature=1e-6), None, distinct=["t"] * 4)
    assert len({s.action for s in greedy}) == 1 and all(s.logprob == 0.0 for s in greedy)


def test_the_compact_student_excludes_what_its_group_drew_in_earlier_calls() -> None:
    student = CompactStudent(CompactStudentConfig(seed=0))
    regime = DecodingRegime(temperature=1.0)
    generator = torch.Generator().manual_seed(0)
    drawn: dict = {}
    remembered = [student.act([observation(6)], ["shell"], regime, generator, distinct=["t"], drawn=drawn)[0]
                  for _ in range(6)]
    assert sorted(s.index for s in remembered) == list(range(6)) and len(drawn["t"]) == 6
    evaluation = student.evaluate([observation(6)] * 6, ["shell"] * 6, [s.action for s in remembered])
    assert torch.allclose(torch.tensor([s.logprob for s in remembered]), evaluation.logprobs, atol=1e-5)
    forgetful = [student.act([observation(6)], ["shell"], regime, generator, distinct=["t"])[0]
                 for _ in range(6)]
    assert len({s.index for s in forgetful}) < 6  # separate calls without the memory repeat themselves


def test_the_uniform_policy_draws_a_permutation_for_a_full_group() -> None:
    policy = UniformPolicy()
    for seed in range(10):
        samples = policy.act([observation(3)] * 3, ["shell"] * 3, DecodingRegime(),
                             torch.Generator().manual_seed(seed), distinct=["t"] * 3)
        assert sorted(s.index for s in samples) == [0, 1, 2]
        assert all(s.logprob == pytest.approx(-math.log(3)) for s in samples)


def test_the_uniform_policy_evaluates_what_it_draws_and_refuses_what_it_cannot() -> None:
    from aios_rl.contracts.episode import Observation
    from aios_rl.contracts.errors import PolicyError

    policy = UniformPolicy()
    twice = Observation(text="o", candidates=["a", "b", "a", "c"])
    evaluation = policy.evaluate([observation(3), twice], ["shell"] * 2, [observation(3).candidates[1], "a"])
    assert evaluation.logprobs.tolist() == pytest.approx([-math.log(3), math.log(2 / 4)])
    for observations, actions in (([], []), ([twice], ["nowhere"]), ([Observation(text="o")], ["a"]),
                                  ([twice], ["a", "b"])):
        with pytest.raises(PolicyError):
            policy.evaluate(observations, ["shell"] * len(observations), actions)

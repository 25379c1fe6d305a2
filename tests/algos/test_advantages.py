"""Advantage estimators: plain-loop references on random inputs, hand-computed cases, input errors."""

from __future__ import annotations

import math
import random

import pytest
import torch

from aios_rl.algos.advantages import (
    anchor_step_advantages,
    discounted_returns,
    dr_grpo_advantages,
    gae,
    group_reward_std,
    grpo_advantages,
    rloo_advantages,
    tree_grpo_advantages,
    zero_variance_groups,
)
from aios_rl.contracts.errors import TrainingError

SEEDS = range(5)


# ---------------------------------------------------------------- plain-loop references


def ref_gae(rewards, values, dones, last_value, gamma, lam):
    adv = [[0.0] * len(row) for row in rewards]
    for b in range(len(rewards)):
        running = 0.0
        for t in reversed(range(len(rewards[b]))):
            if dones[b][t]:
                next_v, running = 0.0, 0.0
            else:
                next_v = last_value[b] if t == len(rewards[b]) - 1 else values[b][t + 1]
            delta = rewards[b][t] + gamma * next_v - values[b][t]
            running = delta + gamma * lam * running
            adv[b][t] = running
    ret = [[a + v for a, v in zip(ar, vr)] for ar, vr in zip(adv, values)]
    return adv, ret


def _groups(rewards, ids):
    groups: dict[int, list[float]] = {}
    for r, g in zip(rewards, ids):
        groups.setdefault(g, []).append(r)
    return groups


def ref_grpo(rewards, ids, eps, normalize_std):
    groups = _groups(rewards, ids)
    out = []
    for r, g in zip(rewards, ids):
        members = groups[g]
        if len(members) == 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(members) / len(members)
            std = math.sqrt(sum((x - mean) ** 2 for x in members) / (len(members) - 1))
        out.append((r - mean) / (std + eps) if normalize_std else r - mean)
    return out


def ref_rloo(rewards, ids):
    out = []
    for i, (r, g) in enumerate(zip(rewards, ids)):
        others = [rj for j, (rj, gj) in enumerate(zip(rewards, ids)) if gj == g and j != i]
        out.append(r - sum(others) / len(others) if others else 0.0)
    return out


def ref_group_std(rewards, ids):
    groups = _groups(rewards, ids)
    result = {}
    for g, members in groups.items():
        if len(members) == 1:
            result[g] = 0.0
        else:
            mean = sum(members) / len(members)
            result[g] = math.sqrt(sum((x - mean) ** 2 for x in members) / (len(members) - 1))
    return result


def random_groups(seed):
    """Rewards and shuffled, non-contiguous group ids; includes singletons and all-equal groups."""
    rng = random.Random(seed)
    rewards, ids = [], []
    for k in range(rng.randint(3, 7)):
        gid = rng.randint(-50, 50) * 10 + k  # distinct, unsorted, possibly negative
        size = rng.choice([1, 1, 2, 3, 4, 8])
        kind = rng.choice(["binary", "gauss", "equal"])
        for _ in range(size):
            if kind == "binary":
                rewards.append(float(rng.random() < 0.5))
            elif kind == "gauss":
                rewards.append(rng.gauss(0.0, 2.0))
            else:
                rewards.append(0.3)
            ids.append(gid)
    order = list(range(len(rewards)))
    rng.shuffle(order)
    return [rewards[i] for i in order], [ids[i] for i in order]


# ---------------------------------------------------------------- GAE


@pytest.mark.parametrize("seed", SEEDS)
def test_gae_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, t = 1 + seed, 3 + 4 * seed
    rewards = torch.randn(b, t, generator=g, dtype=torch.float64)
    values = torch.randn(b, t, generator=g, dtype=torch.float64)
    dones = torch.rand(b, t, generator=g) < 0.2
    last_value = torch.randn(b, generator=g, dtype=torch.float64)
    gamma, lam = 0.9 + 0.02 * seed, 0.8 + 0.04 * seed
    adv, ret = gae(rewards, values, dones, last_value, gamma, lam)
    ref_adv, ref_ret = ref_gae(
        rewards.tolist(), values.tolist(), dones.tolist(), last_value.tolist(), gamma, lam
    )
    assert adv.shape == ret.shape == (b, t)
    torch.testing.assert_close(adv, torch.tensor(ref_adv, dtype=torch.float64))
    torch.testing.assert_close(ret, torch.tensor(ref_ret, dtype=torch.float64))


def test_gae_three_steps_by_hand():
    # gamma = lam = 0.5, V = [1, 2, 3], V_last = 4, r = [1, 0, 2]:
    # d2 = 2 + 0.5*4 - 3 = 1        A2 = 1
    # d1 = 0 + 0.5*3 - 2 = -0.5     A1 = -0.5 + 0.25*1 = -0.25
    # d0 = 1 + 0.5*2 - 1 = 1        A0 = 1 + 0.25*(-0.25) = 0.9375
    rewards = torch.tensor([[1.0, 0.0, 2.0]])
    values = torch.tensor([[1.0, 2.0, 3.0]])
    adv, ret = gae(rewards, values, torch.zeros(1, 3), torch.tensor([4.0]), gamma=0.5, lam=0.5)
    assert adv.tolist() == [[0.9375, -0.25, 1.0]]
    assert ret.tolist() == [[1.9375, 1.75, 4.0]]


def test_gae_episode_end_cuts_bootstrap_and_trace():
    # done at t=1: d1 = 0 - 2 = -2 with no bootstrap and no trace from t=2; A0 = 1 + 0.25*(-2) = 0.5
    rewards = torch.tensor([[1.0, 0.0, 2.0]])
    values = torch.tensor([[1.0, 2.0, 3.0]])
    dones = torch.tensor([[False, True, False]])
    adv, _ = gae(rewards, values, dones, torch.tensor([4.0]), gamma=0.5, lam=0.5)
    assert adv.tolist() == [[0.5, -2.0, 1.0]]


def test_gae_monte_carlo_limit_and_last_value_bootstrap():
    # gamma = lam = 1 with zero values: A_t is the sum of the remaining rewards (SB3 test_gae idea).
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    zeros = torch.zeros(1, 4)
    done_end = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    adv, ret = gae(rewards, zeros, done_end, torch.tensor([100.0]), gamma=1.0, lam=1.0)
    assert adv.tolist() == [[4.0, 3.0, 2.0, 1.0]] and ret.tolist() == adv.tolist()  # last_value ignored
    adv, _ = gae(rewards, zeros, zeros, torch.tensor([100.0]), gamma=1.0, lam=1.0)
    assert adv.tolist() == [[104.0, 103.0, 102.0, 101.0]]  # not done: bootstrapped from last_value


def test_gae_rejects_bad_shapes_and_params():
    x = torch.zeros(2, 3)
    with pytest.raises(TrainingError, match="shapes must match"):
        gae(x, torch.zeros(2, 4), x, torch.zeros(2))
    with pytest.raises(TrainingError, match="last_value"):
        gae(x, x, x, torch.zeros(3))
    with pytest.raises(TrainingError, match=r"\(B, T\)"):
        gae(torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(1))
    with pytest.raises(TrainingError, match="gamma"):
        gae(x, x, x, torch.zeros(2), gamma=1.5)


# ---------------------------------------------------------------- GRPO / Dr. GRPO / RLOO


@pytest.mark.parametrize("seed", SEEDS)
def test_grpo_family_matches_loop_reference(seed):
    rewards, ids = random_groups(seed)
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.tensor(ids)
    expected = torch.tensor(ref_grpo(rewards, ids, 1e-6, True), dtype=r.dtype)
    torch.testing.assert_close(grpo_advantages(r, g), expected)
    torch.testing.assert_close(
        grpo_advantages(r, g, eps=0.1), torch.tensor(ref_grpo(rewards, ids, 0.1, True), dtype=r.dtype)
    )
    expected_dr = torch.tensor(ref_grpo(rewards, ids, 0.0, False), dtype=r.dtype)
    torch.testing.assert_close(dr_grpo_advantages(r, g), expected_dr)
    torch.testing.assert_close(grpo_advantages(r, g, normalize_std=False), expected_dr)
    torch.testing.assert_close(rloo_advantages(r, g), torch.tensor(ref_rloo(rewards, ids), dtype=r.dtype))


@pytest.mark.parametrize("seed", SEEDS)
def test_tree_grpo_matches_loop_reference(seed):
    rewards, ids = random_groups(seed)
    rng = random.Random(seed + 100)
    trees = [g * 1000 + rng.randint(0, 2) for g in ids]  # up to three trees per group, ids unique across groups
    r = torch.tensor(rewards, dtype=torch.float64)
    inter = ref_grpo(rewards, ids, 1e-6, True)
    sizes = {t: trees.count(t) for t in trees}
    intra = [a if sizes[t] > 1 else 0.0 for a, t in zip(ref_grpo(rewards, trees, 1e-6, True), trees)]
    expected = torch.tensor([a + b for a, b in zip(inter, intra)], dtype=r.dtype)
    torch.testing.assert_close(tree_grpo_advantages(r, torch.tensor(ids), torch.tensor(trees)), expected)


def test_tree_grpo_by_hand_and_bad_trees():
    # Group [1, 0, 0, 0]: mean 0.25, sample std 0.5 -> [1.5, -0.5, -0.5, -0.5]; tree {0, 1} adds +-0.7071.
    r, g = torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.zeros(4, dtype=torch.long)
    adv = tree_grpo_advantages(r, g, torch.tensor([5, 5, 6, 7]), eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([1.5 + 0.5 ** 0.5, -0.5 - 0.5 ** 0.5, -0.5, -0.5]))
    # One tree per rollout: plain GRPO.
    torch.testing.assert_close(tree_grpo_advantages(r, g, torch.arange(4)), grpo_advantages(r, g))
    with pytest.raises(TrainingError, match="more than one group"):
        tree_grpo_advantages(r, torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 0, 1]))
    with pytest.raises(TrainingError, match="integers"):
        tree_grpo_advantages(r, g, torch.zeros(4))


def test_grpo_uses_sample_std_by_hand():
    # Group [1, 0]: mean 0.5, sample std sqrt(0.5) = 0.7071 (population std would be 0.5 -> +-1).
    adv = grpo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([3, 3]), eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5]) / math.sqrt(0.5))
    # Group [1, 0, 0, 1]: sample std sqrt(1/3), A = +-0.5 * sqrt(3)
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.zeros(4, dtype=torch.long), eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([1.0, -1.0, -1.0, 1.0]) * 0.5 * math.sqrt(3.0))


def test_singletons_grpo_passes_reward_rloo_gives_zero():
    r = torch.tensor([0.7, 1.0, 0.0])
    g = torch.tensor([9, 1, 1])
    assert grpo_advantages(r, g, eps=0.0)[0].item() == pytest.approx(0.7)  # mean 0, std 1 (verl)
    assert dr_grpo_advantages(r, g)[0].item() == pytest.approx(0.7)
    assert rloo_advantages(r, g).tolist()[0] == 0.0


def test_equal_rewards_give_exactly_zero_in_float32():
    # Seven rewards of 0.3 centre to ~3e-8 with a plain mean in float32; /(std + 1e-6) would make ~0.03.
    r = torch.full((7,), 0.3, dtype=torch.float32)
    g = torch.zeros(7, dtype=torch.long)
    assert grpo_advantages(r, g).abs().max().item() == 0.0
    assert rloo_advantages(r, g).abs().max().item() == 0.0
    assert group_reward_std(r, g)[1].tolist() == [0.0]


def test_rloo_by_hand_and_scaled_mean_identity():
    r = torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=torch.float64)
    g = torch.zeros(4, dtype=torch.long)
    adv = rloo_advantages(r, g)
    assert adv[0].item() == pytest.approx(1.0 - 11.0 / 3.0)
    torch.testing.assert_close(adv, 4.0 / 3.0 * dr_grpo_advantages(r, g))


@pytest.mark.parametrize("seed", SEEDS)
def test_group_advantages_are_centred_per_group(seed):
    rewards, ids = random_groups(seed)
    r, g = torch.tensor(rewards, dtype=torch.float64), torch.tensor(ids)
    for adv in (grpo_advantages(r, g), dr_grpo_advantages(r, g), rloo_advantages(r, g)):
        for gid in set(ids):
            members = g == gid
            if int(members.sum()) > 1:
                assert abs(adv[members].sum().item()) < 1e-9


# ---------------------------------------------------------------- reward std and zero-variance alarm


@pytest.mark.parametrize("seed", SEEDS)
def test_group_reward_std_and_zero_variance_match_loop(seed):
    rewards, ids = random_groups(seed)
    r, g = torch.tensor(rewards, dtype=torch.float64), torch.tensor(ids)
    got_ids, got_std = group_reward_std(r, g)
    expected = ref_group_std(rewards, ids)
    assert got_ids.tolist() == sorted(expected)
    torch.testing.assert_close(got_std, torch.tensor([expected[k] for k in sorted(expected)], dtype=r.dtype))
    zero = zero_variance_groups(r, g)
    assert zero.tolist() == sorted(k for k, s in expected.items() if s <= 1e-8)


def test_zero_variance_groups_by_hand():
    r = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 0.5, 0.5])
    g = torch.tensor([4, 4, 2, 2, 7, 7, 9])  # 4: all equal; 2: mixed; 7: equal; 9: singleton
    assert zero_variance_groups(r, g).tolist() == [4, 7, 9]
    assert zero_variance_groups(r, g, atol=0.0).tolist() == [4, 7, 9]  # equal rewards give std exactly 0
    assert zero_variance_groups(r, g, atol=1.0).tolist() == [2, 4, 7, 9]
    ids, std = group_reward_std(r, g)
    assert ids.tolist() == [2, 4, 7, 9]
    assert std[0].item() == pytest.approx(math.sqrt(0.5)) and std[1:].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "fn", [grpo_advantages, dr_grpo_advantages, rloo_advantages, group_reward_std, zero_variance_groups]
)
def test_group_functions_reject_bad_inputs(fn):
    with pytest.raises(TrainingError, match="N >= 1"):
        fn(torch.zeros(0), torch.zeros(0, dtype=torch.long))
    with pytest.raises(TrainingError, match="does not match"):
        fn(torch.zeros(3), torch.zeros(2, dtype=torch.long))
    with pytest.raises(TrainingError, match="integer"):
        fn(torch.zeros(3), torch.zeros(3))
    with pytest.raises(TrainingError, match="floating-point"):
        fn(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long))


# ---------------------------------------------------------------- GiGPO step level


def ref_returns(rewards, dones, gamma):
    out, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + (0.0 if dones[t] else gamma * running)
        out[t] = running
    return out


def ref_anchor(returns, anchors):
    out = []
    for i, a in enumerate(anchors):
        members = [returns[j] for j in range(len(anchors)) if anchors[j] == a]
        out.append(returns[i] - sum(members) / len(members))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_step_returns_and_anchor_advantages_match_plain_loops(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 6) for _ in range(rng.randint(1, 7))]
    dones = [k == n - 1 for n in lengths for k in range(n)]
    rewards = [rng.uniform(-1, 1) for _ in dones]
    gamma = rng.choice([0.0, 0.5, 0.95, 1.0])
    got = discounted_returns(torch.tensor(rewards), torch.tensor(dones), gamma)
    assert got.tolist() == pytest.approx(ref_returns(rewards, dones, gamma), abs=1e-5)
    anchors = [rng.randrange(4) for _ in dones]
    adv = anchor_step_advantages(got, torch.tensor(anchors))
    assert adv.tolist() == pytest.approx(ref_anchor(got.tolist(), anchors), abs=1e-5)


def test_anchor_advantages_by_hand_and_errors() -> None:
    # Three episodes from one opening state: fix at once (1 step), fix after a wrong patch (2), failure (2).
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, -1.0])
    dones = torch.tensor([True, False, True, False, True])
    returns = discounted_returns(rewards, dones, 0.5)
    assert returns.tolist() == [1.0, 0.5, 1.0, -0.5, -1.0]
    anchors = torch.tensor([0, 0, 1, 0, 2])  # the opening state is shared (mean return 1/3); later ones are not
    assert anchor_step_advantages(returns, anchors).tolist() == pytest.approx([2 / 3, 1 / 6, 0.0, -5 / 6, 0.0])
    with pytest.raises(TrainingError):
        discounted_returns(rewards, torch.tensor([True, False, True, False, False]), 0.5)  # unfinished episode
    with pytest.raises(TrainingError):
        discounted_returns(rewards, dones, 1.5)
    with pytest.raises(TrainingError):
        anchor_step_advantages(returns, torch.tensor([0.0, 0, 1, 0, 2]))

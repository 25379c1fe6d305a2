"""Loss functions: plain-loop references on random inputs, hand-computed cases, gradients, NaN safety."""

from __future__ import annotations

import math

import pytest
import torch

from aios_rl.algos.losses import (
    AGG_MODES,
    SurrogateStats,
    aggregate,
    clipped_surrogate,
    distillation_loss,
    entropy_from_logits,
    kl_k1,
    kl_k2,
    kl_k3,
    masked_log_softmax,
    negative_lane_kl,
    negative_lane_kl_sampled,
    unlikelihood_loss,
    value_loss,
)
from aios_rl.contracts.errors import TrainingError

SEEDS = range(5)
F64 = torch.float64


# ---------------------------------------------------------------- plain-loop references


def ref_aggregate(values, mask, mode, max_len=None):
    if mode == "token-mean":
        picked = [v for vr, mr in zip(values, mask) for v, m in zip(vr, mr) if m]
        return sum(picked) / len(picked) if picked else 0.0
    per_seq = []
    for vr, mr in zip(values, mask):
        picked = [v for v, m in zip(vr, mr) if m]
        if not picked:
            continue  # rows without valid tokens do not count
        if mode == "seq-mean-token-sum":
            per_seq.append(sum(picked))
        elif mode == "seq-mean-token-mean":
            per_seq.append(sum(picked) / len(picked))
        else:
            per_seq.append(sum(picked) / (max_len if max_len is not None else len(vr)))
    return sum(per_seq) / len(per_seq) if per_seq else 0.0


def ref_surrogate(lp, old, adv, mask, eps_low, eps_high, mode):
    per_tok, clipped, kls, ratios = [], 0, [], []
    for b in range(len(lp)):
        row = []
        for t in range(len(lp[b])):
            if not mask[b][t]:
                row.append(0.0)
                continue
            ratio = math.exp(lp[b][t] - old[b][t])
            a = adv[b][t]
            l1 = -a * ratio
            l2 = -a * min(max(ratio, 1 - eps_low), 1 + eps_high)
            row.append(max(l1, l2))
            clipped += l2 > l1
            kls.append(ratio - 1 - math.log(ratio))
            ratios.append(ratio)
        per_tok.append(row)
    n = max(len(ratios), 1)
    return ref_aggregate(per_tok, mask, mode), clipped / n, sum(kls) / n, sum(ratios) / n


def ref_value_loss(v, old, ret, mask, clip, mode):
    per_tok = []
    for b in range(len(v)):
        row = []
        for t in range(len(v[b])):
            loss = 0.5 * (v[b][t] - ret[b][t]) ** 2
            if clip is not None:
                v_clip = old[b][t] + min(max(v[b][t] - old[b][t], -clip), clip)
                loss = max(loss, 0.5 * (v_clip - ret[b][t]) ** 2)
            row.append(loss if mask[b][t] else 0.0)
        per_tok.append(row)
    return ref_aggregate(per_tok, mask, mode)


def ref_kl(lp, ref, kind):
    x = ref - lp  # log(ref / pi)
    if kind == "k1":
        return -x
    if kind == "k2":
        return 0.5 * x * x
    return math.exp(x) - 1 - x


def ref_log_softmax_row(logits_row, mask_row):
    valid = [z for z, m in zip(logits_row, mask_row) if m]
    if not valid:
        return [None] * len(logits_row)
    top = max(valid)
    lse = top + math.log(sum(math.exp(z - top) for z in valid))
    return [z - lse if m else None for z, m in zip(logits_row, mask_row)]


def ref_entropy(logits, mask):
    out = []
    for zr, mr in zip(logits, mask):
        logp = ref_log_softmax_row(zr, mr)
        out.append(-sum(math.exp(lp) * lp for lp in logp if lp is not None))
    return out


def ref_distill(logits, mask, target, weights):
    total, n = 0.0, 0
    for b in range(len(logits)):
        if target[b] < 0:
            continue
        logp = ref_log_softmax_row(logits[b], mask[b])
        total += weights[b] * -logp[target[b]]
        n += 1
    return total / n if n else 0.0


def ref_unlikelihood(logits, mask, target):
    total, n = 0.0, 0
    for b in range(len(logits)):
        if target[b] < 0 or sum(mask[b]) < 2:
            continue
        p = math.exp(ref_log_softmax_row(logits[b], mask[b])[target[b]])
        total += -math.log(1.0 - p)
        n += 1
    return total / n if n else 0.0


def ref_negative_lane_kl(logits, ref_logits, mask):
    total, rows = 0.0, 0
    for b in range(len(logits)):
        if not any(mask[b]):
            continue
        rows += 1
        logp = ref_log_softmax_row(logits[b], mask[b])
        ref_lp = ref_log_softmax_row(ref_logits[b], mask[b])
        total += sum(math.exp(r) * (r - p) for r, p in zip(ref_lp, logp) if r is not None)
    return total / rows if rows else 0.0


# ---------------------------------------------------------------- random inputs


def random_mask(g, b, t):
    """Random (B, T) bool mask with one fully-masked row and one fully-valid row."""
    mask = torch.rand(b, t, generator=g) < 0.7
    mask[0] = False
    mask[-1] = True
    return mask


def poison(x, mask, value=float("nan")):
    """Fill masked-out entries with garbage that must never reach a result."""
    return x.masked_fill(~mask, value)


def random_targets(g, mask, draws):
    """A valid candidate index per row, or -1: a row draws from ``range(draws(valid candidates))`` and
    indices past its candidates (and rows without any) get -1."""
    target = []
    for row in mask.tolist():
        choices = [i for i, m in enumerate(row) if m]
        pick = int(torch.randint(0, draws(len(choices)), (1,), generator=g)) if choices else -1
        target.append(choices[pick] if 0 <= pick < len(choices) else -1)
    return target


def shape_for(seed):
    return 2 + seed, 3 + 2 * seed


# ---------------------------------------------------------------- aggregate


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", AGG_MODES)
def test_aggregate_matches_loop_reference(seed, mode):
    g = torch.Generator().manual_seed(seed)
    b, t = shape_for(seed)
    values = torch.randn(b, t, generator=g, dtype=F64)
    mask = random_mask(g, b, t)
    got = aggregate(poison(values, mask), mask, mode)
    expected = ref_aggregate(values.tolist(), mask.tolist(), mode)
    assert got.item() == pytest.approx(expected, rel=1e-12, abs=1e-12)
    if mode == "seq-mean-token-sum-norm":
        got = aggregate(values, mask, mode, max_len=40)
        assert got.item() == pytest.approx(ref_aggregate(values.tolist(), mask.tolist(), mode, 40), rel=1e-12)


def test_aggregate_by_hand():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])  # nonzero = valid
    assert aggregate(values, mask, "token-mean").item() == pytest.approx(10.0 / 4)
    assert aggregate(values, mask, "seq-mean-token-sum").item() == pytest.approx((6.0 + 4.0) / 2)
    assert aggregate(values, mask, "seq-mean-token-mean").item() == pytest.approx((2.0 + 4.0) / 2)
    assert aggregate(values, mask, "seq-mean-token-sum-norm").item() == pytest.approx((6.0 / 3 + 4.0 / 3) / 2)
    assert aggregate(values, mask, "seq-mean-token-sum-norm", max_len=10).item() == pytest.approx(0.5)


def test_aggregate_all_masked_is_zero_with_grad():
    values = torch.full((2, 3), float("nan"), requires_grad=True)
    for mode in AGG_MODES:
        out = aggregate(values, torch.zeros(2, 3, dtype=torch.bool), mode)
        assert out.item() == 0.0 and out.requires_grad
        out.backward()
        assert torch.equal(values.grad, torch.zeros(2, 3))
        values.grad = None


def test_aggregate_errors():
    with pytest.raises(TrainingError) as info:
        aggregate(torch.zeros(2, 2), torch.ones(2, 2), "seq-mean-tokensum")
    message = str(info.value)
    assert all(mode in message for mode in AGG_MODES) and "Did you mean 'seq-mean-token-sum'" in message
    with pytest.raises(TrainingError, match="mask shape"):
        aggregate(torch.zeros(2, 2), torch.ones(2, 3), "token-mean")
    with pytest.raises(TrainingError, match=r"\(B, T\)"):
        aggregate(torch.zeros(4), torch.ones(4), "seq-mean-token-mean")
    with pytest.raises(TrainingError, match="max_len"):
        aggregate(torch.zeros(2, 2), torch.ones(2, 2), "seq-mean-token-sum-norm", max_len=0)


def test_aggregate_gradcheck():
    g = torch.Generator().manual_seed(0)
    values = torch.randn(3, 4, generator=g, dtype=F64, requires_grad=True)
    mask = random_mask(g, 3, 4)
    for mode in AGG_MODES:
        assert torch.autograd.gradcheck(lambda v, mode=mode: aggregate(v, mask, mode), (values,))


# ---------------------------------------------------------------- clipped surrogate


@pytest.mark.parametrize("seed", SEEDS)
def test_clipped_surrogate_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, t = shape_for(seed)
    old = -torch.rand(b, t, generator=g, dtype=F64) * 3
    lp = old + 0.4 * torch.randn(b, t, generator=g, dtype=F64)  # ratios around 1, many clipped
    adv = torch.randn(b, t, generator=g, dtype=F64)
    mask = random_mask(g, b, t)
    eps_low, eps_high = 0.2, 0.2 + 0.02 * seed
    for mode in AGG_MODES:
        loss, stats = clipped_surrogate(
            poison(lp, mask, -math.inf), poison(old, mask, -math.inf), poison(adv, mask), mask,
            eps_low, eps_high, agg=mode,
        )
        ref_loss, ref_clip, ref_kl_, ref_ratio = ref_surrogate(
            lp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), eps_low, eps_high, mode
        )
        assert loss.item() == pytest.approx(ref_loss, rel=1e-9, abs=1e-12)
        assert stats.clip_fraction == pytest.approx(ref_clip)
        assert stats.approx_kl == pytest.approx(ref_kl_, rel=1e-9)
        assert stats.ratio_mean == pytest.approx(ref_ratio, rel=1e-9)
    assert 0.0 < stats.clip_fraction < 1.0  # the inputs exercise both branches


def test_clipped_surrogate_ratio_one_is_minus_mean_advantage():
    lp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.1, -4.0]], requires_grad=True)
    adv = torch.tensor([[1.0, -2.0, 3.0], [0.5, 7.0, -1.0]])
    mask = torch.tensor([[True, True, True], [True, False, True]])
    loss, stats = clipped_surrogate(lp, lp.detach(), adv, mask)
    assert loss.item() == pytest.approx(-(1.0 - 2.0 + 3.0 + 0.5 - 1.0) / 5)
    assert stats == SurrogateStats(clip_fraction=0.0, approx_kl=0.0, ratio_mean=1.0)
    loss.backward()  # d/d lp of -A * ratio at ratio 1 is -A / n_valid
    torch.testing.assert_close(lp.grad, torch.where(mask, -adv / 5, 0.0))


def _one_token(ratio, adv, eps_low=0.2, eps_high=0.2):
    lp = torch.tensor([[math.log(ratio)]], dtype=F64, requires_grad=True)
    advantages = torch.tensor([[adv]], dtype=F64)
    mask = torch.ones(1, 1, dtype=torch.bool)
    loss, stats = clipped_surrogate(lp, torch.zeros(1, 1, dtype=F64), advantages, mask, eps_low, eps_high)
    loss.backward()
    return loss.item(), stats.clip_fraction, lp.grad.item()


def test_clipped_surrogate_clip_cases_by_hand():
    # A > 0, ratio above 1 + eps: loss -1.2, clipped, no gradient
    assert _one_token(1.5, 1.0) == pytest.approx((-1.2, 1.0, 0.0))
    # DAPO clip-higher: ratio 1.25 is clipped at eps_high 0.2 but not at 0.28 (grad -A * ratio)
    assert _one_token(1.25, 1.0) == pytest.approx((-1.2, 1.0, 0.0))
    assert _one_token(1.25, 1.0, eps_high=0.28) == pytest.approx((-1.25, 0.0, -1.25))
    # A < 0, ratio below 1 - eps: max(0.5, 0.8) = 0.8, clipped, no gradient
    assert _one_token(0.5, -1.0) == pytest.approx((0.8, 1.0, 0.0))
    # A < 0, ratio above 1 + eps: the unclipped (larger) loss 1.5 stays, with gradient -A * ratio
    assert _one_token(1.5, -1.0) == pytest.approx((1.5, 0.0, 1.5))


def test_clipped_surrogate_gradcheck_and_nan_safety():
    g = torch.Generator().manual_seed(1)
    old = -torch.rand(3, 4, generator=g, dtype=F64)
    lp = (old + 0.3 * torch.randn(3, 4, generator=g, dtype=F64)).requires_grad_()
    adv = torch.randn(3, 4, generator=g, dtype=F64)
    mask = random_mask(g, 3, 4)
    for mode in AGG_MODES:
        assert torch.autograd.gradcheck(
            lambda x, mode=mode: clipped_surrogate(x, old, adv, mask, 0.2, 0.28, mode)[0], (lp,)
        )
    bad = poison(lp.detach(), mask, -math.inf).requires_grad_()
    loss, _ = clipped_surrogate(bad, poison(old, mask, -math.inf), poison(adv, mask), mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(bad.grad).all()
    assert torch.equal(bad.grad[~mask], torch.zeros_like(bad.grad[~mask]))


def test_clipped_surrogate_errors():
    x = torch.zeros(2, 3)
    with pytest.raises(TrainingError, match="shapes must match"):
        clipped_surrogate(x, x, torch.zeros(2), torch.ones(2, 3))
    with pytest.raises(TrainingError, match="eps_low"):
        clipped_surrogate(x, x, x, torch.ones(2, 3), eps_low=1.0)
    with pytest.raises(TrainingError, match="valid modes"):
        clipped_surrogate(x, x, x, torch.ones(2, 3), agg="mean")


# ---------------------------------------------------------------- value loss


@pytest.mark.parametrize("seed", SEEDS)
def test_value_loss_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, t = shape_for(seed)
    v, old, ret = (torch.randn(b, t, generator=g, dtype=F64) for _ in range(3))
    mask = random_mask(g, b, t)
    for clip in (None, 0.2):
        for mode in AGG_MODES:
            got = value_loss(poison(v, mask), poison(old, mask), poison(ret, mask), mask, clip=clip, agg=mode)
            expected = ref_value_loss(v.tolist(), old.tolist(), ret.tolist(), mask.tolist(), clip, mode)
            assert got.item() == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_value_loss_clip_by_hand_and_gradcheck():
    one = torch.ones(1, 1, dtype=torch.bool)

    def vl(v, old, ret, clip):
        v = torch.tensor([[v]], dtype=F64, requires_grad=True)
        old, ret = torch.tensor([[old]], dtype=F64), torch.tensor([[ret]], dtype=F64)
        loss = value_loss(v, old, ret, one, clip=clip)
        loss.backward()
        return loss.item(), v.grad.item()

    assert vl(2.0, 0.0, 0.0, None) == pytest.approx((2.0, 2.0))
    assert vl(2.0, 0.0, 0.0, 0.5) == pytest.approx((2.0, 2.0))  # unclipped error is larger: kept
    assert vl(2.5, 2.0, 2.4, 0.2) == pytest.approx((0.02, 0.0))  # clipped error larger: no grad
    g = torch.Generator().manual_seed(3)
    v = torch.randn(3, 4, generator=g, dtype=F64, requires_grad=True)
    old, ret = torch.randn(3, 4, generator=g, dtype=F64), torch.randn(3, 4, generator=g, dtype=F64)
    mask = random_mask(g, 3, 4)
    assert torch.autograd.gradcheck(lambda x: value_loss(x, old, ret, mask, clip=0.3), (v,))
    with pytest.raises(TrainingError, match="clip"):
        value_loss(v, old, ret, mask, clip=0.0)
    with pytest.raises(TrainingError, match="shapes must match"):
        value_loss(v, old[:, :2], ret, mask)


# ---------------------------------------------------------------- KL estimators


@pytest.mark.parametrize("seed", SEEDS)
def test_kl_estimators_match_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, t = shape_for(seed)
    lp = -torch.rand(b, t, generator=g, dtype=F64) * 4
    ref = -torch.rand(b, t, generator=g, dtype=F64) * 4
    mask = random_mask(g, b, t)
    for kind, fn in (("k1", kl_k1), ("k2", kl_k2), ("k3", kl_k3)):
        rows = zip(lp.tolist(), ref.tolist())
        expected = torch.tensor([[ref_kl(a, r, kind) for a, r in zip(ra, rr)] for ra, rr in rows], dtype=F64)
        torch.testing.assert_close(fn(lp, ref), expected)
        masked = fn(poison(lp, mask, -math.inf), poison(ref, mask, -math.inf), mask)
        torch.testing.assert_close(masked, torch.where(mask, expected, 0.0))
    assert (kl_k3(lp, ref) >= 0).all() and (kl_k2(lp, ref) >= 0).all()
    assert (kl_k1(lp, ref) < 0).any()  # k1 is unbiased but not pointwise non-negative


def test_kl_estimators_zero_when_equal_and_k3_nonnegative_at_tiny_ratios():
    lp = -torch.rand(64) * 5
    for fn in (kl_k1, kl_k2, kl_k3):
        assert torch.equal(fn(lp, lp.clone()), torch.zeros(64))
    tiny = torch.linspace(-1e-6, 1e-6, 2001)  # exp(x) - 1 - x would go negative in float32 here
    assert (kl_k3(torch.zeros_like(tiny), tiny) >= 0).all()


def test_kl_estimators_estimate_kl_pi_to_ref_on_samples_from_pi():
    # Convention check: averaged over actions sampled from pi, k1 and k3 estimate KL(pi || ref).
    pi = torch.tensor([0.85, 0.1, 0.04, 0.01], dtype=F64)
    ref = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=F64)
    forward = (pi * (pi / ref).log()).sum().item()
    backward = (ref * (ref / pi).log()).sum().item()
    assert abs(forward - backward) > 0.1  # 0.44 vs 0.58: the test can tell the two directions apart
    g = torch.Generator().manual_seed(0)
    actions = torch.multinomial(pi, 200_000, replacement=True, generator=g)
    lp, ref_lp = pi.log()[actions], ref.log()[actions]
    assert kl_k1(lp, ref_lp).mean().item() == pytest.approx(forward, abs=0.02)
    assert kl_k3(lp, ref_lp).mean().item() == pytest.approx(forward, abs=0.02)


def test_kl_gradcheck_and_errors():
    g = torch.Generator().manual_seed(4)
    lp = (-torch.rand(2, 3, generator=g, dtype=F64)).requires_grad_()
    ref = -torch.rand(2, 3, generator=g, dtype=F64)
    for fn in (kl_k1, kl_k2, kl_k3):
        assert torch.autograd.gradcheck(lambda x, fn=fn: fn(x, ref), (lp,))
        with pytest.raises(TrainingError, match="shapes must match"):
            fn(lp, ref[:, :2])


# ---------------------------------------------------------------- entropy and masked softmax


@pytest.mark.parametrize("seed", SEEDS)
def test_entropy_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, n = shape_for(seed)
    logits = 3 * torch.randn(b, n, generator=g, dtype=F64)
    mask = random_mask(g, b, n)
    got = entropy_from_logits(poison(logits, mask), mask)
    torch.testing.assert_close(got, torch.tensor(ref_entropy(logits.tolist(), mask.tolist()), dtype=F64))
    # without a mask, -inf logits are the invalid entries
    got = entropy_from_logits(poison(logits, mask, -math.inf))
    torch.testing.assert_close(got, torch.tensor(ref_entropy(logits.tolist(), mask.tolist()), dtype=F64))
    logp, valid = masked_log_softmax(poison(logits, mask), mask)
    assert torch.equal(valid, mask) and torch.isfinite(logp).all()
    assert torch.equal(logp[~mask], torch.zeros(int((~mask).sum()), dtype=F64))  # 0, not a huge negative
    rows = mask.any(-1)
    total = logp.exp().masked_fill(~mask, 0).sum(-1)  # (B,)
    torch.testing.assert_close(total[rows], torch.ones(int(rows.sum()), dtype=F64))


def test_entropy_uniform_is_log_n_and_masked_rows_are_safe():
    assert entropy_from_logits(torch.zeros(7)).item() == pytest.approx(math.log(7))
    logits = torch.tensor(
        [[0.0, 0.0, 0.0, -math.inf], [5.0, 5.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0]], requires_grad=True
    )
    mask = torch.tensor([[True, True, True, False], [True, True, False, False], [False] * 4])
    ent = entropy_from_logits(logits, mask)
    assert ent.tolist() == pytest.approx([math.log(3), math.log(2), 0.0])
    ent.sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert torch.equal(logits.grad[~mask], torch.zeros(int((~mask).sum())))


def test_entropy_gradcheck_and_errors():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 5, generator=g, dtype=F64, requires_grad=True)
    mask = random_mask(g, 3, 5)
    assert torch.autograd.gradcheck(lambda x: entropy_from_logits(x, mask), (logits,))
    with pytest.raises(TrainingError, match="mask shape"):
        entropy_from_logits(logits, mask[:, :2])


# ---------------------------------------------------------------- distillation


@pytest.mark.parametrize("seed", SEEDS)
def test_distillation_loss_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, n = shape_for(seed)
    logits = 2 * torch.randn(b, n, generator=g, dtype=F64)
    mask = random_mask(g, b, n)
    target = random_targets(g, mask, lambda valid: 3 * valid // 2 + 1)  # -1 for ~1/3 of the rows
    weights = torch.rand(b, generator=g, dtype=F64)
    targets = torch.tensor(target)
    got = distillation_loss(poison(logits, mask, -math.inf), mask, targets, weights)
    assert got.item() == pytest.approx(ref_distill(logits.tolist(), mask.tolist(), target, weights.tolist()))
    got = distillation_loss(logits, mask, targets)
    assert got.item() == pytest.approx(ref_distill(logits.tolist(), mask.tolist(), target, [1.0] * b))


def test_distillation_ignores_rows_without_target_and_is_zero_with_grad_when_none():
    logits = torch.tensor([[0.0, 0.0], [3.0, -math.inf]], requires_grad=True)
    mask = torch.tensor([[True, True], [True, False]])
    loss = distillation_loss(logits, mask, torch.tensor([1, -1]))
    assert loss.item() == pytest.approx(math.log(2))  # only row 0 counts
    none = distillation_loss(logits, mask, torch.tensor([-1, -1]))
    assert none.item() == 0.0 and none.requires_grad
    none.backward()
    assert torch.equal(logits.grad, torch.zeros(2, 2))


def test_distillation_loss_decreases_under_sgd():
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(4, 5, generator=g, requires_grad=True)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1, 3:] = False
    target = torch.tensor([2, 1, -1, 4])
    optim = torch.optim.SGD([logits], lr=0.5)
    losses = []
    for _ in range(10):
        optim.zero_grad()
        loss = distillation_loss(logits, mask, target)
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert all(later < earlier for earlier, later in zip(losses, losses[1:]))
    assert losses[-1] < 0.5 * losses[0]


def test_distillation_gradcheck_and_errors():
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(3, 4, generator=g, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, True, False, True], [True, True, True, True], [False, True, True, False]])
    target = torch.tensor([3, -1, 2])
    weights = torch.tensor([0.5, 1.0, 2.0], dtype=F64)
    assert torch.autograd.gradcheck(lambda x: distillation_loss(x, mask, target, weights), (logits,))
    with pytest.raises(TrainingError, match="masked-out candidate at rows \\[0\\]"):
        distillation_loss(logits, mask, torch.tensor([2, 0, 1]))
    with pytest.raises(TrainingError, match=r"\[-1, 4\)"):
        distillation_loss(logits, mask, torch.tensor([4, 0, 1]))
    with pytest.raises(TrainingError, match="integer tensor"):
        distillation_loss(logits, mask, torch.tensor([1.0, 0.0, 1.0]))
    with pytest.raises(TrainingError, match="non-negative"):
        distillation_loss(logits, mask, target, torch.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(TrainingError, match="mask shape"):
        distillation_loss(logits, mask[:2], target)


# ---------------------------------------------------------------- negative-lane KL


@pytest.mark.parametrize("seed", SEEDS)
def test_negative_lane_kl_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, n = shape_for(seed)
    logits = 2 * torch.randn(b, n, generator=g, dtype=F64)
    ref_logits = logits + torch.randn(b, n, generator=g, dtype=F64)
    mask = random_mask(g, b, n)
    got = negative_lane_kl(poison(logits, mask, -math.inf), poison(ref_logits, mask), mask)
    expected = ref_negative_lane_kl(logits.tolist(), ref_logits.tolist(), mask.tolist())
    assert got.item() == pytest.approx(expected)
    assert got.item() > 0


def test_negative_lane_kl_zero_iff_same_distribution_and_grad_only_to_policy():
    g = torch.Generator().manual_seed(8)
    logits = torch.randn(3, 4, generator=g)
    mask = torch.tensor([[True, True, False, True], [True] * 4, [False] * 4])
    ref = logits.clone()
    ref[~mask] = 123.0  # differences at invalid candidates do not count
    assert negative_lane_kl(logits, ref, mask).item() == 0.0
    shifted = negative_lane_kl(logits, logits + 5.0, mask).item()
    assert shifted == pytest.approx(0.0, abs=1e-6)  # only the distribution matters, not the logit offset
    theta = logits.clone().requires_grad_()
    ref_param = (logits + torch.randn(3, 4, generator=g)).requires_grad_()
    loss = negative_lane_kl(theta, ref_param, mask)
    assert loss.item() > 0
    loss.backward()
    assert ref_param.grad is None and theta.grad.abs().sum() > 0
    assert torch.equal(theta.grad[~mask], torch.zeros(int((~mask).sum())))


def test_negative_lane_kl_sgd_pulls_toward_reference_and_gradcheck():
    g = torch.Generator().manual_seed(9)
    theta = torch.randn(2, 5, generator=g, requires_grad=True)
    ref = torch.randn(2, 5, generator=g)
    mask = torch.ones(2, 5, dtype=torch.bool)
    optim = torch.optim.SGD([theta], lr=1.0)
    start = negative_lane_kl(theta, ref, mask).item()
    for _ in range(30):
        optim.zero_grad()
        negative_lane_kl(theta, ref, mask).backward()
        optim.step()
    assert negative_lane_kl(theta, ref, mask).item() < 0.1 * start
    x = torch.randn(3, 4, generator=g, dtype=F64, requires_grad=True)
    r = torch.randn(3, 4, generator=g, dtype=F64)
    m = random_mask(g, 3, 4)
    assert torch.autograd.gradcheck(lambda z: negative_lane_kl(z, r, m), (x,))
    with pytest.raises(TrainingError, match="shapes must match"):
        negative_lane_kl(x, r[:, :2], m)


def ref_negative_lane_kl_sampled(logprobs, ref_logprobs, behavior, max_weight):
    total = 0.0
    for lp, rp, bp in zip(logprobs, ref_logprobs, behavior):
        w = min(math.exp(rp - bp), max_weight)
        r = math.exp(lp - rp)
        total += w * (r - 1 - math.log(r))
    return total / len(logprobs)


@pytest.mark.parametrize("seed", SEEDS)
def test_sampled_negative_lane_kl_matches_loop_reference_and_pulls_back(seed):
    g = torch.Generator().manual_seed(seed)
    n = 3 + seed
    ref = -3 * torch.rand(n, generator=g, dtype=F64)
    behavior = ref + 0.5 * torch.randn(n, generator=g, dtype=F64)
    logprobs = (ref + torch.randn(n, generator=g, dtype=F64)).requires_grad_(True)
    got = negative_lane_kl_sampled(logprobs, ref, behavior, max_weight=2.0)
    expected = ref_negative_lane_kl_sampled(logprobs.tolist(), ref.tolist(), behavior.tolist(), 2.0)
    assert got.item() == pytest.approx(expected, rel=1e-9) and got.item() > 0
    got.backward()
    # Each answer's gradient points back toward the reference's log-probability.
    assert bool((torch.sign(logprobs.grad) == torch.sign(logprobs.detach() - ref)).all())
    assert negative_lane_kl_sampled(ref.clone(), ref, behavior).item() == 0.0
    assert negative_lane_kl_sampled(torch.zeros(0), torch.zeros(0), torch.zeros(0)).item() == 0.0
    with pytest.raises(TrainingError):
        negative_lane_kl_sampled(ref, ref[:-1], behavior)


# ---------------------------------------------------------------- unlikelihood


@pytest.mark.parametrize("seed", SEEDS)
def test_unlikelihood_loss_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    b, n = shape_for(seed)
    logits = 2 * torch.randn(b, n, generator=g, dtype=F64)
    mask = random_mask(g, b, n)
    mask[1, 1:] = False  # a row with one candidate: it cannot be made less likely and does not count
    mask[1, 0] = True
    target = random_targets(g, mask, lambda valid: valid + 1)
    target[1] = 0
    got = unlikelihood_loss(poison(logits, mask, math.inf), mask, torch.tensor(target))
    assert got.item() == pytest.approx(ref_unlikelihood(logits.tolist(), mask.tolist(), target))


def test_unlikelihood_pushes_a_certain_target_down_where_log_likelihood_ascent_cannot():
    # pi(target) = 1 to float32 precision: the ascent's gradient 1 - pi vanishes, unlikelihood's is pi.
    logits = torch.tensor([[40.0, 0.0, -1.0]], requires_grad=True)
    mask = torch.ones(1, 3, dtype=torch.bool)
    logp, _ = masked_log_softmax(logits, mask)
    (ascent,) = torch.autograd.grad(logp[0, 0], logits)
    assert ascent.abs().max().item() < 1e-12
    loss = unlikelihood_loss(logits, mask, torch.tensor([0]))
    (grad,) = torch.autograd.grad(loss, logits)
    assert loss.item() == pytest.approx(40.0 - math.log(1 + math.exp(-1.0)), rel=1e-5)
    assert grad[0, 0].item() == pytest.approx(1.0) and grad[0, 1].item() < 0 and grad[0, 2].item() < 0


def test_unlikelihood_gradcheck_zero_without_rows_and_errors():
    g = torch.Generator().manual_seed(8)
    logits = torch.randn(3, 4, generator=g, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, True, False, True], [True, False, False, False], [False, True, True, False]])
    target = torch.tensor([3, 0, 2])
    assert torch.autograd.gradcheck(lambda x: unlikelihood_loss(x, mask, target), (logits,))
    none = unlikelihood_loss(logits, mask, torch.tensor([-1, 0, -1]))  # row 1 has no other candidate
    assert none.item() == 0.0 and none.requires_grad
    with pytest.raises(TrainingError, match="masked-out candidate at rows \\[0\\]"):
        unlikelihood_loss(logits, mask, torch.tensor([2, 0, 1]))
    with pytest.raises(TrainingError, match="integer tensor"):
        unlikelihood_loss(logits, mask, torch.tensor([1.0, 0.0, 1.0]))
    with pytest.raises(TrainingError, match="mask shape"):
        unlikelihood_loss(logits, mask[:, :2], target)

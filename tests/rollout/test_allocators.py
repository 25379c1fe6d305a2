"""Allocators: names, budget safety under random engines (hypothesis), and each baseline's decision rule."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aios_rl.contracts.config import MAX_GROUP_SIZE, MAX_RESAMPLES, load_config
from aios_rl.contracts.errors import ConfigError
from aios_rl.contracts.protocols import Allocator as AllocatorProtocol
from aios_rl.rollout.allocators import (
    ALLOCATOR_KINDS,
    AllocatorConfig,
    Anchor,
    ArpoAllocator,
    BudgetExceeded,
    DapoAllocator,
    GroupPlan,
    GroupResult,
    RailAllocator,
    RolloutBudget,
    TrajectoryShape,
    TreeAllocator,
    UniformAllocator,
    VipAllocator,
    canonical_allocator_name,
    check_rail_cap,
    make_allocator,
    parse_allocator_name,
    proportional_allocation,
)
from aios_rl.rollout.rail import RailConfig
from aios_rl.rollout.rail_features import CONTEXT_DIM, ContextInputs
from aios_rl.storage.rail_traces import RailTraceStore


def anchor(entropies=(0.5, 0.5), group="g", task="t", budget_left=8, hidden=()):
    inputs = ContextInputs(
        step_entropies=tuple(entropies), anchor_logprob=-0.3, group_rewards=(0.0, 1.0), base_group_size=4,
        max_steps=8, budget_left=budget_left, budget_total=16, hidden=hidden,
    )
    return Anchor(group_id=group, task_id=task, step=len(entropies), inputs=inputs)


# ---------------------------------------------------------------- names


@given(kind=st.sampled_from([k for k in ALLOCATOR_KINDS]), n=st.integers(1, MAX_GROUP_SIZE))
def test_every_kind_parses_with_a_size(kind, n):
    assert parse_allocator_name(f"{kind}-{n}") == (kind, n)
    allocator = make_allocator(f"{kind}-{n}")
    assert allocator.kind == kind and allocator.n == n and allocator.name == f"{kind}-{n}"
    assert isinstance(allocator, AllocatorProtocol)


@given(st.text(max_size=20))
def test_any_text_parses_or_raises_config_error(text):
    try:
        kind, n = parse_allocator_name(text)
    except ConfigError:
        return
    assert kind in ALLOCATOR_KINDS and (n is None) == (kind == "rail") and (n is None or n >= 1)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("unifrom-16", "did you mean 'uniform-16'"),
        ("tre-4", "did you mean 'tree-4'"),
        ("rial", "did you mean 'rail'"),
        ("dapo", "needs a group size"),
        ("dapo-0", "N must be >= 1"),
        ("uniform-1025", "N must be at most 1024"),  # a typo's group would never finish
        ("vip-x", "expected 'vip-N'"),
        ("banana-3", "valid: uniform-N"),
    ],
)
def test_bad_names_get_a_did_you_mean(name, message):
    with pytest.raises(ConfigError, match=message):
        make_allocator(name)


@pytest.mark.parametrize("name", ["rail-0", "rail-1025", "rail-x", "RAIL-99999999999"])
def test_the_rail_name_a_parse_error_suggests_is_one_that_can_branch(name):
    # 'e.g. rail-8' named a RAIL that starts at its base group of 8 and never branches: refused in its turn.
    with pytest.raises(ConfigError, match=r"e\.g\. '(rail-\d+)'") as error:
        parse_allocator_name(name)
    example = re.search(r"e\.g\. '(rail-\d+)'", str(error.value)).group(1)
    check_rail_cap(example, AllocatorConfig())  # the suggestion is taken as it is


def test_rail_and_grpo_names():
    assert parse_allocator_name(" GRPO-8 ") == ("uniform", 8)
    rail = make_allocator("rail", AllocatorConfig(rail_cap=24))
    assert isinstance(rail, RailAllocator) and rail.n == 24
    assert make_allocator("rail-12").group_plan("t").cap == 12


@pytest.mark.parametrize(
    ("name", "canonical"),
    [("Dapo-3", "dapo-3"), ("GRPO-8", "uniform-8"), ("rail", "rail-24"), ("RAIL-9", "rail-9")],
)
def test_a_canonical_name_builds_what_its_spelling_builds(name, canonical):
    config = AllocatorConfig(rail_cap=24)
    assert canonical_allocator_name(name, config.rail_cap) == canonical == make_allocator(name, config).name


@pytest.mark.parametrize(("name", "base"), [("rail-9", 8), ("rail", 8), ("rail-3", 2)])
def test_a_rail_cap_above_the_base_group_leaves_room_to_branch(name, base):
    config = AllocatorConfig(rail_base_group=base)
    check_rail_cap(name, config)
    plan = make_allocator(name, config).group_plan("t")
    assert plan.initial == base < plan.cap


def test_a_rail_cap_at_or_below_the_base_group_is_refused():
    assert make_allocator("rail-8").group_plan("t") == GroupPlan(8, 8)  # would start full and never branch
    with pytest.raises(ConfigError, match=r"'rail-8'.*base group of 8 .*cap N = 8.* rail-32.* uniform-8"):
        check_rail_cap("rail-8", AllocatorConfig())
    with pytest.raises(ConfigError, match=r"allocation.rail_cap = 4 \('rail' alone\)"):
        check_rail_cap("rail", AllocatorConfig(rail_cap=4))
    check_rail_cap("uniform-2", AllocatorConfig())  # other kinds have no base group


@pytest.mark.parametrize(
    ("key", "most"),
    [("arpo_beam_size", MAX_GROUP_SIZE), ("tree_expand_nodes", MAX_GROUP_SIZE),
     ("dapo_max_resamples", MAX_RESAMPLES)],
)
def test_counts_the_budget_does_not_bound_have_an_upper_bound(key, most):
    """The batch budget does not bound these, so a typo ran without end or exhausted memory: ARPO drew
    beam_size - 1 random numbers at every anchor (2**70: a raw ValueError), Tree-GRPO looped n times per tree
    in every round even with no budget left, and DAPO's group cap (hence the batch budget) is
    N·(1 + resamples), so a task that always fails was drawn again and again."""
    assert AllocatorConfig(**{key: most}).model_dump()[key] == most
    with pytest.raises(ConfigError, match=rf"{key}: got {most + 1}; expected .*less than or equal to {most}"):
        load_config(AllocatorConfig, overrides={key: most + 1})
    assert f"at most {most}" in AllocatorConfig.model_fields[key].description


@pytest.mark.parametrize("multiple", [1025, 1e306])
def test_a_vip_cap_multiple_beyond_its_bound_is_refused(multiple: float) -> None:
    """cap = multiple x N: 1e306 with vip-1024 raised a raw OverflowError in plan_batch (infinity to int)."""
    with pytest.raises(ConfigError, match=r"vip_cap_multiple: got .*less than or equal to 1024"):
        load_config(AllocatorConfig, overrides={"vip_cap_multiple": multiple})
    plan = VipAllocator(1024, AllocatorConfig(vip_cap_multiple=1024)).plan_batch(["a"], RolloutBudget(100))
    assert list(plan) == ["a"]  # the largest multiple still plans


# ---------------------------------------------------------------- budget counter


def test_rollout_budget_children_debit_the_parent_and_never_go_negative():
    batch = RolloutBudget(10)
    group = batch.sub(6)
    group.spend(4)
    assert (batch.remaining, group.remaining) == (6, 2)
    with pytest.raises(BudgetExceeded):
        group.spend(3)
    other = batch.sub(100)
    assert other.remaining == 6  # limited by the parent
    other.spend(6)
    assert group.remaining == 0 and batch.remaining == 0
    with pytest.raises(BudgetExceeded):
        batch.spend(1)
    with pytest.raises(BudgetExceeded):
        batch.spend(-1)


# ---------------------------------------------------------------- every allocator respects its budget


def build(kind: str, n: int, seed: int):
    rail = RailConfig(entropy_warmup=1, refit_every=4, min_fit_traces=4, seed=seed)
    cfg = AllocatorConfig(seed=seed, rail_base_group=2, rail=rail)
    if kind == "rail-live":
        alloc = make_allocator(f"rail-{n}", cfg)
        ctl = alloc.controller
        ctl.mode = "live"
        theta = np.zeros((1 + len(ctl.model.arms)) * (CONTEXT_DIM + 1))
        theta[CONTEXT_DIM] = 1.0  # every arm looks worth branching: only the budget can stop it
        ctl.model.load_state_dict({"theta": theta.tolist()})
        return alloc
    return make_allocator(f"{kind}-{n}", cfg)


def simulate(alloc, tasks: int, total: int, rng: np.random.Generator) -> tuple[RolloutBudget, int, dict]:
    """A toy engine: runs exactly what the allocator plans and counts every rollout it runs."""
    batch = RolloutBudget(total)
    plans = alloc.plan_batch([f"t{i}" for i in range(tasks)], batch)
    ran, used = sum(p.initial for p in plans.values()), {}
    for task, plan in plans.items():
        group = batch.sub(plan.cap - plan.initial)
        p = rng.choice([0.0, 0.3, 1.0])  # easy, mixed and hopeless tasks

        def draw(k: int) -> list[float]:
            return [float(rng.random() < p) for _ in range(k)]

        rewards = draw(plan.initial)
        shapes = [TrajectoryShape(i, None, int(rng.integers(0, 5))) for i in range(plan.initial)]
        for _ in range(plan.initial * 3):  # anchors at random turn boundaries
            ents = tuple(float(v) for v in rng.uniform(0, 1, size=int(rng.integers(1, 5))))
            branch = alloc.branch(anchor(ents, group=task, task=task), group)
            if branch is not None:
                ran += branch.m
                new = draw(branch.m)
                alloc.record_gain(branch, rewards, new)
                rewards += new
        for round_ in range(3):
            expansions = alloc.expand(shapes, round_, group)
            ran += len(expansions)
            shapes += [TrajectoryShape(shapes[e.parent].tree, e.step, e.step + 1) for e in expansions]
            rewards += draw(len(expansions))
        for round_ in range(10):
            verdict = alloc.finish_group(GroupResult(task, task, tuple(rewards), round_), group)
            if not verdict.fresh_rollouts:
                break
            ran += verdict.fresh_rollouts
            fresh = draw(verdict.fresh_rollouts)
            rewards = fresh if verdict.replace else rewards + fresh
        used[task] = (plan.initial + group.spent, plan.cap)
    return batch, ran, used


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["uniform", "dapo", "arpo", "tree", "vip", "rail", "rail-live"]),
    n=st.integers(1, 12),
    tasks=st.integers(1, 6),
    total=st.integers(0, 150),
    seed=st.integers(0, 2**16),
)
def test_every_allocator_stays_within_its_budget(kind, n, tasks, total, seed):
    alloc = build(kind, n, seed)
    rng = np.random.default_rng(seed)
    for _ in range(2):  # a second batch sees the state the first one left (VIP history, RAIL traces)
        batch, ran, used = simulate(alloc, tasks, total, rng)
        assert batch.spent == ran <= total
        assert all(u <= cap for u, cap in used.values()), used


# ---------------------------------------------------------------- uniform and DAPO


def test_uniform_gives_every_task_n_and_shrinks_evenly():
    alloc = UniformAllocator(4)
    batch = RolloutBudget(100)
    plans = alloc.plan_batch(["a", "b", "c"], batch)
    assert {t: p.initial for t, p in plans.items()} == {"a": 4, "b": 4, "c": 4}
    assert batch.spent == 12
    short = RolloutBudget(10)
    assert [p.initial for p in alloc.plan_batch(["a", "b", "c"], short).values()] == [3, 3, 3]
    assert alloc.branch(anchor(), short) is None and alloc.expand([], 0, short) == []


def test_dapo_resamples_zero_variance_groups_up_to_the_cap_then_drops_them():
    alloc = DapoAllocator(4, AllocatorConfig(dapo_max_resamples=2))
    assert alloc.group_plan("t").cap == 12
    group = RolloutBudget(8)
    mixed = alloc.finish_group(GroupResult("t", "g", (0.0, 1.0, 0.0, 0.0), 0), group)
    assert mixed.keep and mixed.fresh_rollouts == 0 and group.spent == 0
    first = alloc.finish_group(GroupResult("t", "g", (1.0,) * 4, 0), group)
    assert (first.keep, first.fresh_rollouts, first.replace, group.spent) == (False, 4, True, 4)
    second = alloc.finish_group(GroupResult("t", "g", (0.0,) * 4, 1), group)
    assert second.fresh_rollouts == 4 and group.spent == 8
    last = alloc.finish_group(GroupResult("t", "g", (0.0,) * 4, 2), RolloutBudget(100))
    assert (last.keep, last.fresh_rollouts) == (False, 0)  # cap reached: dropped
    broke = alloc.finish_group(GroupResult("t", "g", (0.0,) * 4, 0), RolloutBudget(3))
    assert (broke.keep, broke.fresh_rollouts) == (False, 0)  # cannot afford a fresh group
    assert alloc.metrics() == {"rollout/dapo_resampled_groups": 2.0, "rollout/dapo_dropped_groups": 2.0,
                               "rollout/total_dapo_resampled_groups": 2.0,
                               "rollout/total_dapo_dropped_groups": 2.0}
    alloc.plan_batch(["t"], RolloutBudget(12))  # a new batch counts its own groups; the totals go on
    alloc.finish_group(GroupResult("t", "g", (0.0,) * 4, 0), RolloutBudget(8))
    assert alloc.metrics() == {"rollout/dapo_resampled_groups": 1.0, "rollout/dapo_dropped_groups": 0.0,
                               "rollout/total_dapo_resampled_groups": 3.0,
                               "rollout/total_dapo_dropped_groups": 2.0}


# ---------------------------------------------------------------- ARPO


@pytest.mark.parametrize(("entropies", "p"), [((1.0, 0.0), 0.3), ((0.5, 0.5), 0.5), ((0.0, 1.0), 0.7)])
def test_arpo_branches_with_probability_tau_plus_beta_delta_h(entropies, p):
    alloc = ArpoAllocator(16, AllocatorConfig(seed=1, arpo_branch_probability=0.5, arpo_entropy_weight=0.2))
    trials = 4000
    hits = sum(alloc.branch(anchor(entropies), RolloutBudget(10)) is not None for _ in range(trials))
    assert abs(hits - trials * p) < 5 * math.sqrt(trials * p * (1 - p))


def test_arpo_initial_half_beam_limit_and_top_up():
    alloc = ArpoAllocator(16, AllocatorConfig(arpo_beam_size=3, arpo_branch_probability=1.0))
    assert alloc.group_plan("t").initial == 8 and alloc.group_plan("t").cap == 16
    group = RolloutBudget(8)
    plan = alloc.branch(anchor(), group)
    assert plan.m == 2 and plan.regime is None and group.spent == 2  # beam_size - 1; the group's regime
    assert alloc.branch(anchor(), RolloutBudget(1)).m == 1
    verdict = alloc.finish_group(GroupResult("t", "g", (0.0,) * 10), group)
    assert verdict.keep and verdict.fresh_rollouts == 6 and not verdict.replace and group.remaining == 0
    short = RolloutBudget(3)
    assert alloc.finish_group(GroupResult("t", "g", (0.0,) * 10), short).fresh_rollouts == 3
    assert alloc.finish_group(GroupResult("t", "g", (0.0,) * 16), RolloutBudget(5)).fresh_rollouts == 0


# ---------------------------------------------------------------- Tree-GRPO


def test_tree_expands_n_uniform_nodes_per_tree_for_l_rounds():
    alloc = TreeAllocator(6, AllocatorConfig(seed=3, tree_expand_nodes=2, tree_iterations=1))
    assert alloc.group_plan("t").initial == 2  # m = 6 // (1 + 2)
    shapes = [TrajectoryShape(0, None, 4), TrajectoryShape(1, None, 3), TrajectoryShape(0, 1, 4)]
    owned = {(0, s) for s in range(4)} | {(1, s) for s in range(3)} | {(2, 2), (2, 3)}
    counts: dict[tuple[int, int], int] = {}
    for _ in range(3000):
        out = alloc.expand(shapes, 0, RolloutBudget(10))
        assert len(out) == 4 and sum(shapes[e.parent].tree == 0 for e in out) == 2
        for e in out:
            counts[(e.parent, e.step)] = counts.get((e.parent, e.step), 0) + 1
    assert set(counts) == owned
    tree0 = [k for k in owned if shapes[k[0]].tree == 0]  # 6 nodes, 6000 draws
    for key in tree0:
        assert abs(counts[key] - 1000) < 5 * math.sqrt(6000 * (1 / 6) * (5 / 6))
    assert alloc.expand(shapes, 1, RolloutBudget(10)) == []  # l = 1 round only
    assert len(alloc.expand(shapes, 0, RolloutBudget(3))) == 3


# ---------------------------------------------------------------- VIP


def test_proportional_allocation_by_hand():
    assert proportional_allocation([1, 1, 2], 12, floor=2, cap=10) == [4, 3, 5]
    assert proportional_allocation([1, 0.01], 20, floor=1, cap=8) == [8, 8]
    # Floors that do not fit: the two highest weights are funded and share all 5 (VIP spends Σ n = B).
    assert proportional_allocation([0.1, 0.3, 0.2], 5, floor=2, cap=8) == [0, 3, 2]
    assert proportional_allocation([0.1, 0.3, 0.2], 5, floor=2, cap=2) == [0, 2, 2]  # the cap leaves 1
    assert proportional_allocation([1, 2], 10, floor=0, cap=10) == [3, 7]  # 3.33 / 6.67: largest remainder
    assert proportional_allocation([0, 0, 0], 9, floor=1, cap=9) == [3, 3, 3]
    assert proportional_allocation([], 9, floor=1, cap=9) == []


@given(
    weights=st.lists(st.floats(0, 1), min_size=1, max_size=12),
    total=st.integers(0, 300),
    floor=st.integers(0, 6),
    cap=st.integers(1, 40),
)
def test_proportional_allocation_properties(weights, total, floor, cap):
    n = proportional_allocation(weights, total, floor, cap)
    lo = min(floor, cap)
    assert len(n) == len(weights) and sum(n) <= total
    assert all(v == 0 or lo <= v <= cap for v in n)
    funded = len(weights) if lo * len(weights) <= total else total // lo
    assert sum(n) == min(total, cap * funded)  # the budget is spent unless the funded tasks' caps stop it


def test_vip_estimates_success_from_a_discounted_beta_posterior_and_favours_p_near_half():
    cfg = AllocatorConfig(vip_prior_alpha=1, vip_prior_beta=1, vip_discount=0.5, vip_floor=2)
    alloc = VipAllocator(8, cfg)
    assert alloc.success_rate("new") == 0.5
    alloc.finish_group(GroupResult("t", "g", (1.0, 0.0, 0.0, 0.0)), RolloutBudget(0))
    assert alloc.success_rate("t") == pytest.approx(2 / 6)
    alloc.finish_group(GroupResult("t", "g", (1.0, 1.0, 1.0, 1.0)), RolloutBudget(0))
    assert alloc.success_rate("t") == pytest.approx(5.5 / 8)  # s = 0.5 + 4, n = 2 + 4
    for _ in range(3):
        alloc.finish_group(GroupResult("easy", "g", (1.0,) * 8), RolloutBudget(0))
    batch = RolloutBudget(1000)
    plans = alloc.plan_batch(["easy", "t", "new"], batch)
    assert batch.spent == 24 and sum(p.initial for p in plans.values()) == 24
    assert plans["new"].initial > plans["t"].initial > plans["easy"].initial >= 2


# ---------------------------------------------------------------- RAIL


def test_rail_allocator_turns_realized_gains_into_stored_traces(tmp_path):
    store = RailTraceStore(tmp_path / "control.db")
    cfg = AllocatorConfig(rail_base_group=4, rail=RailConfig(entropy_warmup=1))
    alloc = make_allocator("rail-16", cfg, store=store)
    assert alloc.group_plan("t").initial == 4
    hidden = tuple(float(v) for v in range(6))
    alloc.branch(anchor((0.1,)), RolloutBudget(8))  # low entropy seeds the quantile
    group = RolloutBudget(8)
    plan = alloc.branch(anchor((0.9,), hidden=hidden), group)
    assert plan is not None and plan.m == 1 and group.spent == 1 and plan.arm == "m1-default"
    y = alloc.record_gain(plan, [0.0, 0.0, 0.0, 0.0], [1.0])
    assert y == pytest.approx(0.16)
    assert alloc.controller.n_traces == 1 and store.count() == 1
    (row,) = store.all()
    assert (row.arm, row.y, row.hidden, row.mode, row.group_id) == ("m1-default", y, hidden, "shadow", "g")
    assert np.allclose(row.z, alloc.controller.context(anchor((0.9,), hidden=hidden).inputs))
    stray = alloc.branch(anchor((0.95,), group="h"), RolloutBudget(8))
    assert stray is not None
    assert alloc.finish_group(GroupResult("t", "h", (0.0,)), RolloutBudget(0)).keep
    assert alloc._pending == {}  # the never-rewarded branch was dropped with its group
    assert alloc.metrics()["rail/traces"] == 1.0
    state = alloc.state_dict()
    again = make_allocator("rail-16", cfg)
    again.load_state_dict(state)
    assert again.state_dict() == state
    store.close()
